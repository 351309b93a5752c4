"""`dyno-cli trace`'s options and hints: the how-to-register hint only when the daemons that answered had no process
at all; --pids as `ps` prints them; --timeout-s bounds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dyno.client.cli import build_parser
from dyno.client.cli import main as cli_main
from dyno.client.commands import trace
from dyno.client.commands.trace import nothing_registered
from dyno.client.hosts import Host
from dyno.client.trace.records import HOST_FAILED, HOST_NO_MATCH, HostRecord
from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def _host(name: str, state: str = HOST_NO_MATCH, **kw: list) -> HostRecord:
    return HostRecord(Host(name), f"{name}_1778", state=state, **kw)


def test_empty_daemons_get_the_hint_even_beside_an_unreachable_one() -> None:
    assert nothing_registered([_host("gpu1")])
    assert nothing_registered([_host("gpu1"), _host("gpu2", HOST_FAILED)])


def test_no_hint_when_another_job_busy_or_matched_processes_were_there() -> None:
    assert not nothing_registered([_host("gpu1"), _host("gpu2", registered_jobs=["exp9"])])
    assert not nothing_registered([_host("gpu1", busy_pids=[42])])
    assert not nothing_registered([_host("gpu1", matched_pids=[42])])


def test_no_hint_when_no_host_answered() -> None:
    assert not nothing_registered([_host("gpu1", HOST_FAILED)])
    assert not nothing_registered([])


# --pids takes pids as `dyno-cli ps` prints them ("4242,4240"), and a repeated --pids adds to the list.


_BASE = ["trace", "--job-id", "j", "--duration-ms", "100", "--output-dir", "out"]


@pytest.mark.parametrize(
    ("words", "pids"),
    [
        (["--pids", "4242,4240"], [4242, 4240]),
        (["--pids", "4242", "4240"], [4242, 4240]),
        (["--pids", "1", "--pids", "2,3"], [1, 2, 3]),
        ([], []),
    ],
)
def test_pids_in_the_request(words: list[str], pids: list[int]) -> None:
    args = build_parser().parse_args([*_BASE, *words])
    assert list(trace._request(args, "t", 0.0, 0.0).pids) == pids


@pytest.mark.parametrize("word", ["1,x", "1,", "1,0", "-3"])
def test_a_bad_pid_in_a_list_is_a_usage_error(capsys: pytest.CaptureFixture[str], word: str) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args([*_BASE, f"--pids={word}"])
    assert e.value.code == 2
    assert "argument --pids" in capsys.readouterr().err


# `trace --timeout-s 0` is a usage error (fetch's 0 means: take what is done now).


def test_trace_refuses_a_zero_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(
            ["trace", "--job-id", "j", "--duration-ms", "100", "--output-dir", "o", "--timeout-s", "0"]
        )
    assert e.value.code == 2
    assert "argument --timeout-s: must be > 0" in capsys.readouterr().err


def test_trace_without_a_timeout_leaves_it_to_the_default_and_fetch_takes_zero() -> None:
    parser = build_parser()
    args = parser.parse_args(["trace", "--job-id", "j", "--duration-ms", "100", "--output-dir", "o"])
    assert args.timeout_s is None  # default_wait_s() then decides
    args = parser.parse_args(["fetch", "--trace-id", "t", "--output-dir", "o", "--timeout-s", "0"])
    assert args.timeout_s == 0


# A --timeout-s that ends before the trace's window does is a usage error (exit 2), before any host is called.


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
