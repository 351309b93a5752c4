"""The hand-rolled Sample encoder must produce exactly the message the protobuf runtime would build."""

from __future__ import annotations

import pytest

from dyno.daemon.history import Sample, name_filter
from dyno.daemon.samplers.base import Reading, labels
from dyno.daemon.sampling_pb import sample_to_proto
from dyno.daemon.wire import encode_sample, sample_message, samples_response
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit

SAMPLES = [
    Sample(
        1_700_000_000_123,
        (
            Reading("gpu_power_watts", 312.25, labels(gpu=0, uuid="GPU-1234")),
            Reading("gpu_power_watts", 0.0, labels(gpu=1, uuid="GPU-5678")),
            Reading("cpu_user_percent", -1.5, labels(cpu="total")),
            Reading("load_average_1m", 1e300),
            Reading("név_ütf8", 7.0, labels(device="ünï", empty="")),
        ),
    ),
    Sample(0, ()),
    Sample(5, (Reading("x" * 300, 1.0, labels(**{"k" * 200: "v" * 200})),)),
]


@pytest.mark.parametrize("sample", SAMPLES)
def test_encode_matches_reference(sample):
    assert dyno_pb2.Sample.FromString(encode_sample(sample)) == sample_to_proto(sample)


def test_filter_and_response():
    keep = name_filter(["gpu_*"])
    msg = sample_message(SAMPLES[0], keep)
    assert [m.name for m in msg.metrics] == ["gpu_power_watts", "gpu_power_watts"]
    assert msg.metrics[0].labels == {"gpu": "0", "uuid": "GPU-1234"}
    resp = samples_response(SAMPLES, "node-7")
    assert resp.hostname == "node-7"
    assert list(resp.samples) == [sample_to_proto(s) for s in SAMPLES]


def test_stored_encoder_matches_reference_and_filters():
    from dyno.daemon.history import History
    from dyno.daemon.wire import StoredEncoder

    samples = [s for s in SAMPLES if s.timestamp_ms]  # history keeps samples newer than since_ms=0
    h = History(capacity=10)
    for s in samples:
        h.append(s)
    enc = StoredEncoder(h.series)
    resp = dyno_pb2.GetMetricsResponse.FromString(enc.response_bytes(h.stored(), "node-7"))
    assert list(resp.samples) == [sample_to_proto(s) for s in samples]
    keep = h.series.matching(["gpu_*"])
    first = dyno_pb2.GetMetricsResponse.FromString(enc.response_bytes(h.stored(limit=2), "n", keep)).samples[0]
    assert [m.name for m in first.metrics] == ["gpu_power_watts", "gpu_power_watts"]
