"""Encoded answers kept while what they encode is the same objects (dyno.daemon.encoded_answers): GetMetrics answers
a repeated request with the bytes it built for the same samples, and anything new (a sample, another request) is
built anew. **Why:** 50 callers polling back to back kept dynod's GIL saturated building the same answers."""

from __future__ import annotations

import pytest
from grpc_context import AbortingContext

from dyno.daemon.encoded_answers import MAX_ANSWER_BYTES, EncodedAnswers
from dyno.daemon.history import History, Sample
from dyno.daemon.samplers.base import Reading, labels
from dyno.daemon.server import DynoServicer
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


class _Obj:
    pass


def test_an_answer_is_kept_while_its_inputs_are_the_same_objects() -> None:
    answers = EncodedAnswers(max_entries=2)
    a, b = _Obj(), _Obj()
    answers.put("k", [a, b], b"x")
    assert answers.get("k", [a, b]) == b"x"
    assert answers.get("k", [a, _Obj()]) is None  # one replaced (a record or sample changes as a new object)
    assert answers.get("k", [a]) is None and answers.get("other", [a, b]) is None
    answers.put("k2", [], b"y")
    answers.put("k3", [], b"z")  # past max_entries: started over
    assert answers.get("k", [a, b]) is None and answers.get("k3", []) == b"z"
    answers.put("big", [], b"x" * (MAX_ANSWER_BYTES + 1))  # a history page: not kept
    assert answers.get("big", []) is None


def test_answers_are_kept_within_a_byte_budget() -> None:
    answers = EncodedAnswers(max_answer_bytes=400, max_bytes=1000)
    answers.put("a", [], b"a" * 320)  # an answer of a third of the budget is kept
    answers.put("a", [], b"A" * 320)  # replaced: counted once
    answers.put("b", [], b"b" * 320)
    answers.put("c", [], b"c" * 320)
    assert answers.get("a", []) == b"A" * 320 and answers.get("c", []) == b"c" * 320
    answers.put("d", [], b"d" * 320)  # past 1000 bytes together: started over
    assert answers.get("a", []) is None and answers.get("d", []) == b"d" * 320


def _sample(t: int) -> Sample:
    return Sample(t, tuple(Reading("gpu_power_watts", float(t), labels(gpu=g)) for g in range(4)))


def test_get_metrics_answers_the_same_bytes_until_a_sample_comes() -> None:
    history = History(100)
    for t in range(1, 11):
        history.append(_sample(t))
    servicer = DynoServicer(lambda: dyno_pb2.Status(), history, "node1")
    request = dyno_pb2.GetMetricsRequest(limit=5)
    first = servicer.GetMetricsEncoded(request, AbortingContext())  # type: ignore[arg-type]
    assert servicer.GetMetricsEncoded(request, AbortingContext()) is first  # type: ignore[arg-type]
    names = dyno_pb2.GetMetricsRequest(limit=5, names=["nothing*"])
    assert (
        not dyno_pb2.GetMetricsResponse.FromString(servicer.GetMetricsEncoded(names, AbortingContext()))
        .samples[0]
        .metrics
    )  # type: ignore[arg-type]
    history.append(_sample(11))
    got = dyno_pb2.GetMetricsResponse.FromString(servicer.GetMetricsEncoded(request, AbortingContext()))  # type: ignore[arg-type]
    assert [s.timestamp_ms for s in got.samples] == [7, 8, 9, 10, 11]
    assert got.samples[-1].metrics[0].value == 11.0


def test_get_metrics_keeps_a_monitoring_poll_of_many_series() -> None:
    """GetMetrics(limit=10) of 8 GPUs is ~320 KB: answered from the cache, not built again for each call."""
    history = History(100)
    for t in range(1, 11):
        history.append(Sample(t, tuple(Reading("gpu_sm_util", float(t), labels(gpu=g)) for g in range(1000))))
    servicer = DynoServicer(lambda: dyno_pb2.Status(), history, "node1")
    request = dyno_pb2.GetMetricsRequest(limit=10)
    first = servicer.GetMetricsEncoded(request, AbortingContext())  # type: ignore[arg-type]
    assert 256 << 10 < len(first) <= MAX_ANSWER_BYTES
    assert servicer.GetMetricsEncoded(request, AbortingContext()) is first  # type: ignore[arg-type]
