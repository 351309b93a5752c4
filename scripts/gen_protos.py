#!/usr/bin/env python3
"""Regenerate the committed protobuf/gRPC modules of dyno.v1 from protos/dyno/v1/*.proto.

Usage: python scripts/gen_protos.py [--out DIR]   (default: beside the .proto files)
The test tests/unit/test_generated_code.py runs this into a temp dir and fails when the committed files differ.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
PROTO_DIR = PROTO_ROOT / "dyno" / "v1"


def generate(out: Path) -> list[Path]:
    """Compile every proto into `out` (laid out as dyno/v1/...); returns the generated files."""
    import grpc_tools
    from grpc_tools import protoc  # dev dependency only

    protos = sorted(PROTO_DIR.glob("*.proto"))
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *[str(p.relative_to(PROTO_ROOT)) for p in protos],
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted((out / "dyno" / "v1").glob("*_pb2*.py*"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=PROTO_ROOT, help="output root (default: protos/)")
    args = parser.parse_args()
    for path in generate(args.out):
        print(path.relative_to(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
