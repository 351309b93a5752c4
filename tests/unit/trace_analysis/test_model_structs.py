"""The model's types are frozen msgspec Structs (decision 69): results are shared between the analyses' caches, the
rules and the report, so none may be changed in place; rank parts cross processes by pickle and compare by value."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import msgspec
import pytest
from multirank_jobs import gpu_job

import dyno.trace_analysis.api
import dyno.trace_analysis.report.html
import dyno.trace_analysis.report.text
from dyno.trace_analysis.api import RankPart, analyze_rank
from dyno.trace_analysis.loader import load_traces
from dyno.trace_analysis.rules import select_rules
from dyno.trace_analysis.rules.engine import resolve_rule_thresholds

pytestmark = pytest.mark.unit

# not the model: the scanner's state, filled in while a file is read, and the event decoder's msgspec types
MUTABLE = {
    "dyno.trace_analysis.jsonscan.ScanResult",
    "dyno.trace_analysis.eventdecode.Event",
    "dyno.trace_analysis.eventdecode.EventArgs",
}


def _defined_in_module(cls: type) -> bool:
    owner: object = sys.modules[cls.__module__]
    for name in cls.__qualname__.split("."):
        owner = getattr(owner, name, None)
    return owner is cls


def _structs() -> list[type[msgspec.Struct]]:
    assert dyno.trace_analysis.api and dyno.trace_analysis.report.html and dyno.trace_analysis.report.text
    out, todo = [], list(msgspec.Struct.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        # defined in a module (not made at run time: part_checks' defstruct check types, which other tests make)
        if cls.__module__.startswith("dyno.trace_analysis.") and _defined_in_module(cls):
            out.append(cls)
    return out


def test_every_model_struct_is_frozen() -> None:
    structs = _structs()
    assert len(structs) > 50  # the report, analyses, rules and the trace model are all found
    thawed = sorted(f"{c.__module__}.{c.__qualname__}" for c in structs if not c.__struct_config__.frozen)
    assert thawed == sorted(MUTABLE)


def test_a_rank_part_pickles_to_an_equal_one_and_refuses_changes(tmp_path: Path) -> None:
    (trace,) = load_traces([str(gpu_job(tmp_path, [100_000.0]))])
    part = analyze_rank(trace, select_rules(None), resolve_rule_thresholds(None))
    back = pickle.loads(pickle.dumps(part))
    assert isinstance(back, RankPart) and back == part and back is not part
    assert back.summary == part.summary and back.rules == part.rules
    with pytest.raises(AttributeError):
        part.rank = 1  # type: ignore[misc]
