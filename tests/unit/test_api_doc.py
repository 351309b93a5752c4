"""docs/API.md stays true to the wire contract: every RPC of dyno.v1.Dyno has a section, every field of every request
is named in it, the page bound it and the .proto state is request_limits', and the examples it links exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dyno.request_limits import MAX_METRICS_PAGE_BYTES
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "API.md").read_text()
SERVICE = dyno_pb2.DESCRIPTOR.services_by_name["Dyno"]


def _section(method: str) -> str:
    """The text under the ### heading that names `method`, up to the next heading."""
    for m in re.finditer(r"^### (.+)$", DOC, re.M):
        if method in re.findall(r"\w+", m.group(1)):
            end = DOC.find("\n#", m.end())
            return DOC[m.end() : end if end >= 0 else len(DOC)]
    raise AssertionError(f"docs/API.md has no section for {method}")


@pytest.mark.parametrize("method", [m.name for m in SERVICE.methods])
def test_every_rpc_and_each_request_field_is_documented(method: str) -> None:
    section = _section(method)
    request = SERVICE.methods_by_name[method].input_type
    missing = [f.name for f in request.fields if f"`{f.name}`" not in section]
    assert not missing, f"{method}: request fields not in docs/API.md: {missing}"


def test_the_page_bound_stated_is_the_constant() -> None:
    stated = f"{MAX_METRICS_PAGE_BYTES:,}"
    proto = (REPO / "protos" / "dyno" / "v1" / "dyno.proto").read_text()
    assert stated in DOC and stated in proto
    assert set(re.findall(r"\b\d,\d{3},\d{3}\b", DOC + proto)) == {stated}


def test_the_linked_examples_exist() -> None:
    links = re.findall(r"\]\(\.\./(examples/[^)]+)\)", DOC)
    assert len(links) >= 3 and all((REPO / link).is_file() for link in links)
