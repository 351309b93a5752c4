"""`dyno-cli metrics --names PATTERN` matching nothing: the daemon answers with its newest sample holding no values;
the CLI must say that nothing matched, not draw an empty "(0 values)" header."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from dyno.client.cli import main as cli_main
from dyno.daemon.fake_server import FakeDynoServicer, serve
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


class NoMatch(FakeDynoServicer):
    def GetMetrics(self, request, context):  # noqa: N802 - grpc method name
        sample = dyno_pb2.Sample(timestamp_ms=int(time.time() * 1000))
        return dyno_pb2.GetMetricsResponse(samples=[sample], hostname=self.hostname)


@pytest.fixture
def target() -> Iterator[str]:
    fake = serve(lambda _port: NoMatch("gpu7"))
    yield fake.target
    fake.server.stop(0)


def test_no_metric_matching_the_names_is_said(target: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["metrics", "--host", target, "--names", "nomatch*", "--names", "gpu_x"]) == 0
    assert capsys.readouterr().out.strip() == "gpu7: no metric matches nomatch* gpu_x"


class TwoSamples(FakeDynoServicer):
    def StreamMetrics(self, request, context):  # noqa: N802
        for i in range(2):
            yield dyno_pb2.Sample(timestamp_ms=1000 + i, metrics=[dyno_pb2.Metric(name="cpu_user_percent", value=i)])


def test_watch_with_json_streams_one_json_object_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    """--watch --json used to ignore --json and draw tables with terminal escape codes into a pipe."""
    fake = serve(lambda _port: TwoSamples("gpu7"))
    try:
        assert cli_main(["metrics", "--host", fake.target, "--watch", "--json"]) == 0
    finally:
        fake.server.stop(0)
    lines = capsys.readouterr().out.splitlines()
    samples = [json.loads(line) for line in lines]
    assert [s["timestamp_ms"] for s in samples] == [1000, 1001]  # numbers (client.proto_json)
    assert samples[1]["metrics"][0]["name"] == "cpu_user_percent"
