"""Output helpers shared by the commands (host options live in _hosts.py)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from google.protobuf import json_format

if TYPE_CHECKING:
    from dyno.client.cluster import HostResult

__all__ = ["host_entry", "print_json", "proto_to_dict"]


def proto_to_dict(msg: Any) -> dict[str, Any]:
    return json_format.MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=False))


def host_entry(r: HostResult[Any], fields: dict[str, Any]) -> dict[str, Any]:
    """One host's object in a multi-host --json answer: every host is listed, failed ones too, so a tool can
    tell which failed and why: {"host", "ok", **fields, "error": None or "ErrorType: message"}."""
    return {"host": str(r.host), "ok": r.ok, **fields, "error": None if r.ok else f"{r.error_type}: {r.error}"}
