"""Options and helpers shared by the single-host commands."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from google.protobuf import json_format

from dyno.client.client import DEFAULT_PORT, DynoClient, format_target

__all__ = ["add_target_arguments", "client_from_args", "print_json", "proto_to_dict"]


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return v


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("daemon")
    g.add_argument("--host", default=os.environ.get("DYNO_HOST", "localhost"),
                   help="daemon host (default $DYNO_HOST or localhost)")
    g.add_argument("--port", type=int, default=int(os.environ.get("DYNO_PORT", DEFAULT_PORT)),
                   help=f"daemon gRPC port (default $DYNO_PORT or {DEFAULT_PORT})")
    g.add_argument("--timeout-s", type=_positive, default=5.0, help="deadline of each call (default 5)")


def client_from_args(args: argparse.Namespace) -> DynoClient:
    return DynoClient(format_target(args.host, args.port), timeout_s=args.timeout_s)


def proto_to_dict(msg: Any) -> dict[str, Any]:
    return json_format.MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=False))
