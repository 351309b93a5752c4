"""dyno.trace_ids: the trace-id rule and file-name host part shared by dynod and dyno-cli."""

from __future__ import annotations

import re

import pytest

from dyno.trace_ids import TRACE_ID_RULE, is_trace_id, new_trace_id, safe_host, validate_trace_id

pytestmark = pytest.mark.unit


def test_valid_ids_pass_through() -> None:
    assert validate_trace_id("a.B_c-1") == "a.B_c-1"
    assert is_trace_id("x" * 64) and is_trace_id("...a")


@pytest.mark.parametrize("bad", ["", "a/b", "..", ".", "...", "x" * 65, "a b", "abc\n", "é"])
def test_ids_that_are_no_single_safe_path_component_are_refused(bad: str) -> None:
    assert not is_trace_id(bad)
    with pytest.raises(ValueError, match=re.escape(TRACE_ID_RULE)):
        validate_trace_id(bad)


def test_new_ids_are_valid_and_distinct() -> None:
    ids = {new_trace_id(1_700_000_000) for _ in range(50)}
    assert len(ids) == 50 and all(is_trace_id(i) for i in ids)
    assert all(i.startswith("20231114T221320-") for i in ids)  # UTC time of the given instant


def test_safe_host() -> None:
    assert safe_host("node 1/x") == "node_1_x"
    assert safe_host("gpu001.cluster_1778") == "gpu001.cluster_1778"
    assert safe_host("") == "host"
