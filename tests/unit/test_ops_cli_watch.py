"""`dyno-cli metrics --watch` follows one daemon; with several hosts the usage error must say that it is --watch
that takes one (plain `metrics` takes many), not "this command talks to one daemon"."""

from __future__ import annotations

import pytest

from dyno.client.cli import main as cli_main

pytestmark = pytest.mark.unit


def test_watch_with_several_hosts_names_watch(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli_main(["metrics", "--watch", "--hosts", "127.0.0.1:1,127.0.0.1:2"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--watch follows one daemon" in err and "2" in err
    assert "without --watch" in err


def test_watch_into_a_pipe_or_file_writes_no_terminal_escapes(capsys: pytest.CaptureFixture[str]) -> None:
    """`dyno-cli metrics --watch | tee log` (or > file) got a clear-screen escape before every sample."""
    from dyno.daemon.fake_server import FakeDynoServicer, serve
    from dyno.v1 import dyno_pb2

    class TwoSamples(FakeDynoServicer):
        def StreamMetrics(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
            for i in range(2):
                yield dyno_pb2.Sample(timestamp_ms=1000 + i, metrics=[dyno_pb2.Metric(name="load_average_1m", value=i)])

    fake = serve(lambda _port: TwoSamples("gpu7"))
    try:
        assert cli_main(["metrics", "--host", fake.target, "--watch"]) == 0
    finally:
        fake.server.stop(0)
    out = capsys.readouterr().out
    assert "\x1b" not in out and out.count("load_average_1m") == 2


def test_json_since_without_limit_gives_every_sample_since(capsys: pytest.CaptureFixture[str]) -> None:
    """`metrics --json --since-ms T` asked the daemon for the newest sample only (--limit defaulted to 1), so
    "everything since T" came back as one sample with no word about the rest."""
    from dyno.daemon.fake_server import FakeDynoServicer, serve
    from dyno.v1 import dyno_pb2

    asked: list[tuple[int, int]] = []

    class Recording(FakeDynoServicer):
        def GetMetrics(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
            asked.append((request.since_ms, request.limit))
            return dyno_pb2.GetMetricsResponse(hostname=self.hostname)

    fake = serve(lambda _port: Recording("gpu7"))
    try:
        for argv in (["--since-ms", "1000"], ["--since-ms", "1000", "--limit", "5"], []):
            assert cli_main(["metrics", "--host", fake.target, "--json", *argv]) == 0
    finally:
        fake.server.stop(0)
    assert asked == [(1000, 0), (1000, 5), (0, 1)]
