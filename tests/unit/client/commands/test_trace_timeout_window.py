"""`dyno-cli trace --duration-ms 10000 --timeout-s 2` cannot succeed: the wait ends before the trace's window does,
so every process was started and then cancelled ("cancelled by dyno-cli (--timeout-s)", exit 1), a trace taken from
the job for nothing. It is a usage error now (exit 2), said before any host is called. Against a real gRPC server
on a free loopback port that counts StartTrace calls."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dyno.client.cli import main as cli_main
from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


class Counting(FakeDynoServicer):
    starts = 0

    def StartTrace(self, request, context):  # noqa: N802 - grpc method name
        Counting.starts += 1
        return super().StartTrace(request, context)


@pytest.fixture
def server() -> Iterator[FakeServer[Counting]]:
    Counting.starts = 0
    srv = serve(lambda port: Counting(f"fake-{port}"))
    yield srv
    srv.server.stop(0)


def _trace(server, tmp_path: Path, *extra: str) -> int:
    return cli_main(
        ["trace", "--host", server.target, "--job-id", "job1", "--output-dir", str(tmp_path / "out"), "--no-analyze"]
        + list(extra)
    )


@pytest.mark.parametrize(
    "window",
    [
        ["--duration-ms", "10000", "--timeout-s", "2"],
        ["--duration-ms", "1000", "--start-delay-s", "5", "--timeout-s", "6"],
    ],
)
def test_a_wait_shorter_than_the_window_is_a_usage_error(server, tmp_path: Path, capsys, window) -> None:
    with pytest.raises(SystemExit) as e:
        _trace(server, tmp_path, *window)
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert "--timeout-s" in err and "before the trace's window ends" in err, err
    assert Counting.starts == 0 and not (tmp_path / "out").exists()


def test_a_wait_longer_than_the_window_traces(server, tmp_path: Path, capsys) -> None:
    code = _trace(server, tmp_path, "--duration-ms", "100", "--start-delay-s", "0", "--timeout-s", "20")
    assert Counting.starts == 1, capsys.readouterr().err
    assert code != 2  # traced (how the fake's processes end is not the point)


class KinetoJob(Counting):
    """A job with a libkineto process: dyno-cli's default start delay is 7 s (libkineto polls every 5 s)."""

    def _processes(self):
        procs = super()._processes()
        for p in procs:
            p.protocol = dyno_pb2.PROTOCOL_KINETO
        return procs


def test_a_wait_shorter_than_the_default_start_delay_and_window_is_a_usage_error(tmp_path: Path, capsys) -> None:
    """--timeout-s 5 for 2 s looked long enough, but without --start-delay-s a kineto job starts in 7 s: the check
    took the delay as 0 and every process was started, then cancelled at 5 s (review of the explorer's check)."""
    Counting.starts = 0
    srv = serve(lambda port: KinetoJob(f"fake-{port}"))
    try:
        with pytest.raises(SystemExit) as e:
            _trace(srv, tmp_path, "--duration-ms", "2000", "--timeout-s", "5")
    finally:
        srv.server.stop(0)
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert "before the trace's window ends" in err and "start in 7 s (the default for this job" in err, err
    assert Counting.starts == 0 and not (tmp_path / "out").exists()
