"""GetMetrics over a long history: the answer must fit what a client can receive, and building it must not take the
daemon's memory with it. An hour of 1 s samples of 8 GPUs is ~110 MB encoded: `dyno-cli metrics --json --limit 0`
failed with "Received message larger than max" after the daemon had built it (~800 MB peak, over the unit's
MemoryMax=512M, for one read-only call anyone may make)."""

from __future__ import annotations

import re

import grpc
import pytest
from grpc_context import Aborted, AbortingContext

from dyno.daemon import server as server_module
from dyno.daemon.history import History, Sample
from dyno.daemon.samplers.base import Reading, labels
from dyno.daemon.server import DynoServicer
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def _servicer(samples: int) -> DynoServicer:
    h = History(samples)
    for t in range(1, samples + 1):
        h.append(
            Sample(t, tuple(Reading("gpu_power_watts", float(t), labels(gpu=g, uuid=f"GPU-{g}")) for g in range(50)))
        )
    return DynoServicer(lambda: dyno_pb2.Status(), h, "node1")


def _get(servicer: DynoServicer, limit: int = 0, names: tuple[str, ...] = ()) -> dyno_pb2.GetMetricsResponse:
    request = dyno_pb2.GetMetricsRequest(limit=limit, names=list(names))
    return servicer.GetMetrics(request, AbortingContext())  # type: ignore[arg-type]


def test_an_answer_too_big_for_a_client_is_refused_saying_how_many_samples_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    servicer = _servicer(100)
    one = len(_get(servicer, limit=1).SerializeToString())
    monkeypatch.setattr(server_module, "MAX_METRICS_RESPONSE_BYTES", 30 * one)
    with pytest.raises(Aborted) as e:
        _get(servicer)
    assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    fit = int(re.search(r"the newest (\d+) fit", e.value.details)[1])
    assert 25 <= fit <= 30 and "limit" in e.value.details and "names" in e.value.details
    got = _get(servicer, limit=fit)  # what it says fits does
    assert [s.timestamp_ms for s in got.samples] == list(range(101 - fit, 101))
    with pytest.raises(Aborted):
        _get(servicer, limit=fit + 1)
    assert len(_get(servicer, names=("nomatch",)).samples) == 100  # filtered: small again


def test_the_default_bound_is_below_what_dyno_cli_accepts() -> None:
    from dyno.client import client

    assert server_module.MAX_METRICS_RESPONSE_BYTES <= client.MAX_RECEIVE_BYTES // 2


def test_over_grpc_the_encoded_answer_and_the_refusal_arrive_intact(monkeypatch: pytest.MonkeyPatch) -> None:
    """add_to_server sends GetMetrics' encoded bytes as they are (no parsed copy in the daemon)."""
    from concurrent import futures

    from dyno.daemon.server import add_to_server
    from dyno.v1 import dyno_pb2_grpc

    servicer = _servicer(40)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    add_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = dyno_pb2_grpc.DynoStub(channel)
            got = stub.GetMetrics(dyno_pb2.GetMetricsRequest(limit=3, names=["gpu_*"]), timeout=10)
            assert got == _get(servicer, limit=3) and got.hostname == "node1" and len(got.samples[0].metrics) == 50
            monkeypatch.setattr(server_module, "MAX_METRICS_RESPONSE_BYTES", 1000)
            with pytest.raises(grpc.RpcError) as e:
                stub.GetMetrics(dyno_pb2.GetMetricsRequest(), timeout=10)
            assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "the newest 0 fit" in e.value.details()
    finally:
        server.stop(0)


class _StreamContext(AbortingContext):
    def __init__(self) -> None:
        self.callbacks: list = []

    def add_callback(self, callback) -> bool:  # type: ignore[no-untyped-def]
        self.callbacks.append(callback)
        return True

    def is_active(self) -> bool:
        return True

    def end(self) -> None:  # what grpc does when the RPC ends, however it ends
        for callback in self.callbacks:
            callback()


def test_live_streams_are_bounded_so_they_cannot_starve_every_other_call() -> None:
    """Each StreamMetrics holds one of dynod's 32 RPC threads for as long as it runs: 32 `dyno-cli metrics --watch`
    (nobody needs a token for it) left GetStatus, health checks and StartTrace waiting until their deadline."""
    servicer = _servicer(2)
    contexts = [_StreamContext() for _ in range(server_module.MAX_METRIC_STREAMS)]
    streams = [servicer.StreamMetrics(dyno_pb2.StreamMetricsRequest(), c) for c in contexts]  # type: ignore[arg-type]
    assert server_module.MAX_METRIC_STREAMS <= 16  # half the worker threads at most
    with pytest.raises(Aborted) as e:
        servicer.StreamMetrics(dyno_pb2.StreamMetricsRequest(), _StreamContext())  # type: ignore[arg-type]
    assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED and "live metric streams" in e.value.details
    contexts[0].end()  # one stream ends (client gone, cancelled, deadline): its place is free
    assert servicer.StreamMetrics(dyno_pb2.StreamMetricsRequest(), _StreamContext()) is not None  # type: ignore[arg-type]
    assert len(streams) == server_module.MAX_METRIC_STREAMS
