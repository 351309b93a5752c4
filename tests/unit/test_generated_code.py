"""The committed dyno.v1 modules must be exactly what scripts/gen_protos.py produces from the .proto files."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(importlib.util.find_spec("grpc_tools") is None, reason="grpcio-tools (dev extra) not installed")
def test_generated_code_is_fresh(tmp_path):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import gen_protos
    finally:
        sys.path.pop(0)
    generated = gen_protos.generate(tmp_path)
    assert generated, "protoc produced nothing"
    committed_dir = REPO / "protos" / "dyno" / "v1"
    stale = [p.name for p in generated if (committed_dir / p.name).read_bytes() != p.read_bytes()]
    assert not stale, f"stale generated code {stale}: run `python scripts/gen_protos.py` and commit the result"
    committed = {p.name for p in committed_dir.glob("*_pb2*.py*")}
    assert committed == {p.name for p in generated}, "generated file set differs"
