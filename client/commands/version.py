"""dyno-cli version: the daemon's version and API."""

from __future__ import annotations

import argparse

import dyno
from dyno.client.commands._common import add_target_arguments, client_from_args, print_json, proto_to_dict


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("version", help="daemon and client versions",
                       description="Show the versions of dyno-cli and of the daemon it talks to.")
    add_target_arguments(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with client_from_args(args) as c:
        v = c.version()
    if args.json:
        print_json({"client": dyno.__version__, "daemon": proto_to_dict(v)})
    else:
        print(f"dyno-cli {dyno.__version__}\ndynod {v.version} ({v.api}) on {c.target}, python {v.python}, "
              f"grpc {v.grpc}")
    return 0
