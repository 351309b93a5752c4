"""dyno-cli version: the daemons' versions and API."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import dyno
from dyno.client.commands._common import host_entry, host_table, print_json, print_out, proto_to_dict
from dyno.client.commands._hosts import (
    FANOUT_EXIT_CODES,
    add_host_command,
    cluster_from_args,
    fanout_exit_code,
    print_failures,
)

if TYPE_CHECKING:  # the client stack (grpc, protobuf) is loaded by run() alone: `version --help` needs none of it
    from dyno.client.cluster import HostResult
    from dyno.v1 import dyno_pb2


def register(sub: argparse._SubParsersAction) -> None:
    p = add_host_command(
        sub,
        "version",
        description="Show the versions of dyno-cli and of the daemons it talks to: one row per host, a failed host "
        "with its error type (the error on stderr).",
        codes=FANOUT_EXIT_CODES,
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def render(results: Sequence[HostResult[dyno_pb2.VersionInfo]]) -> str:
    """One row per daemon, failed ones included (with the error type, as in `status`)."""
    return host_table(
        ["HOST", "DYNOD", "API", "PYTHON", "GRPC"], results, lambda v: [v.version, v.api, v.python, v.grpc]
    )


def _no_version() -> dict[str, Any]:
    """A failed daemon's entry: VersionInfo's keys, each null."""
    from dyno.v1 import dyno_pb2

    return {f.name: None for f in dyno_pb2.VersionInfo.DESCRIPTOR.fields}


def run(args: argparse.Namespace) -> int:
    with cluster_from_args(args) as cluster:
        results = cluster.version()
    if args.json:
        from dyno.client.proto_json import JSON_SCHEMA

        print_json(
            {
                "client": dyno.__version__,
                "json_schema": JSON_SCHEMA,  # the version of every --json form (docs/API.md)
                # a failed daemon has the same keys, null (a tool reads d["version"] of every entry)
                "daemons": [host_entry(r, proto_to_dict(r.value) if r.ok else _no_version()) for r in results],
            }
        )
    else:
        print_out(f"dyno-cli {dyno.__version__}")
        print_out(render(results))
    print_failures(results)
    return fanout_exit_code(results)
