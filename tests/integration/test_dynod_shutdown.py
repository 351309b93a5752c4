"""dynod's SIGTERM with a live StreamMetrics reader (`dyno-cli metrics --watch`): the stream must end at once
with a clear UNAVAILABLE "shutting down", instead of holding the shutdown for the whole drain grace and then
being cut with CANCELLED "Cancelling all calls"."""

from __future__ import annotations

import threading

import grpc
import pytest

from dyno.v1 import dyno_pb2, dyno_pb2_grpc

from conftest import Dynod

pytestmark = pytest.mark.integration


def test_sigterm_ends_metric_streams_with_a_reason() -> None:
    d = Dynod().start()
    try:
        channel = grpc.insecure_channel(d.target)
        stream = dyno_pb2_grpc.DynoStub(channel).StreamMetrics(dyno_pb2.StreamMetricsRequest(), timeout=60)
        next(stream)  # the stream is live
        outcome: list[grpc.RpcError] = []

        def drain() -> None:
            try:
                for _ in stream:
                    pass
            except grpc.RpcError as e:
                outcome.append(e)

        reader = threading.Thread(target=drain)
        reader.start()
        assert d.stop() == 0
        reader.join(30)
        channel.close()
    finally:
        d.cleanup()
    assert outcome, "the stream ended without a status"
    assert outcome[0].code() == grpc.StatusCode.UNAVAILABLE and "shutting down" in outcome[0].details()
