"""Output helpers shared by the commands (host options live in _hosts.py)."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format

__all__ = ["print_json", "proto_to_dict"]


def proto_to_dict(msg: Any) -> dict[str, Any]:
    return json_format.MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=False))
