"""Request limits (trace window, iterations, start delay, job id, pids; metrics names and limit): dyno-cli refuses
such values before calling any host, as a usage error (exit 2, one line
naming the option and the allowed range), and the daemons keep refusing them with INVALID_ARGUMENT, both from the
one set of bounds in dyno.request_limits."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dyno.argtypes import INT32_MAX, number
from dyno.client.cli import build_parser
from dyno.client.cli import main as cli_main
from dyno.client.client import DynoClient
from dyno.client.errors import InvalidArgument
from dyno.client.run import main as run_main
from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve
from dyno.daemon.history import History
from dyno.daemon.server import DynoServicer
from dyno.daemon.tracing.requests import validate_spec
from dyno.daemon.tracing.values import TraceRequestError, TraceSpec
from dyno.request_limits import (
    JOB_ID_RULE,
    MAX_DURATION_MS,
    MAX_FUTURE_START_MS,
    MAX_ITERATIONS,
    MAX_JOB_ID,
    MAX_METRICS_LIMIT,
    MAX_NAME_PATTERN_LEN,
    MAX_NAME_PATTERNS,
    MAX_PIDS,
)
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit

NOW_MS = 1_800_000_000_000
MAX_DELAY_S = MAX_FUTURE_START_MS // 1000


@pytest.fixture
def fake() -> Iterator[FakeServer[FakeDynoServicer]]:
    """A daemon that would accept anything: a refused value must not even reach it."""
    fake = serve(lambda _port: FakeDynoServicer("fake-limits"))
    yield fake
    fake.server.stop(0)


def _pids(n: int) -> list[str]:
    return ["--pids", *map(str, range(1, n + 1))]


_TRACE_CASES = [
    (["--duration-ms", str(MAX_DURATION_MS + 1)], f"argument --duration-ms: must be 1-{MAX_DURATION_MS}: "),
    (["--iterations", str(MAX_ITERATIONS + 1)], f"argument --iterations: must be 1-{MAX_ITERATIONS}: "),
    (
        ["--iterations", "5", "--iteration-roundup", str(MAX_ITERATIONS + 1)],
        f"argument --iteration-roundup: must be 1-{MAX_ITERATIONS}: ",
    ),
    (
        ["--duration-ms", "100", "--start-delay-s", str(MAX_DELAY_S + 0.5)],
        f"--start-delay-s: must be 0-{MAX_DELAY_S} (the daemons refuse later starts)",
    ),
    (["--duration-ms", "100", "--job-id", "x" * (MAX_JOB_ID + 1)], f"argument --job-id: {JOB_ID_RULE}: "),
    (["--duration-ms", "100", "--job-id", "a\tb"], f"argument --job-id: {JOB_ID_RULE}: 'a\\tb'"),
    (["--duration-ms", "100", "--job-id", "  "], "argument --job-id: must not be empty"),
    (["--duration-ms", "100", *_pids(MAX_PIDS + 1)], f"--pids: at most {MAX_PIDS} pids (got {MAX_PIDS + 1})"),
]


@pytest.mark.parametrize("args, message", _TRACE_CASES)
def test_trace_refuses_what_the_daemons_refuse_before_any_call(
    args: list[str],
    message: str,
    fake: FakeServer[FakeDynoServicer],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    argv = ["trace", "--host", fake.target, "--job-id", "job1", "--output-dir", str(out), "--no-analyze", *args]
    with pytest.raises(SystemExit) as e:
        cli_main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert message in err.splitlines()[-1] and "Traceback" not in err
    assert fake.servicer.calls == 0 and not out.exists()  # no host called, no folder made


_METRICS_CASES = [
    (["--names", ""], f"argument --names: each pattern must be 1-{MAX_NAME_PATTERN_LEN} characters: ''"),
    (["--names", "x" * (MAX_NAME_PATTERN_LEN + 1)], f"each pattern must be 1-{MAX_NAME_PATTERN_LEN} characters"),
    (["--watch", "--names", ""], "argument --names: each pattern must be 1-"),
    (
        [a for i in range(MAX_NAME_PATTERNS + 1) for a in ("--names", f"m{i}")],
        f"--names: at most {MAX_NAME_PATTERNS} patterns (got {MAX_NAME_PATTERNS + 1})",
    ),
    (["--json", "--limit", str(MAX_METRICS_LIMIT + 1)], f"argument --limit: must be 0-{MAX_METRICS_LIMIT}: "),
]


@pytest.mark.parametrize("args, message", _METRICS_CASES)
def test_metrics_refuses_what_the_daemons_refuse_before_any_call(
    args: list[str], message: str, fake: FakeServer[FakeDynoServicer], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        cli_main(["metrics", "--host", fake.target, *args])
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert message in err.splitlines()[-1] and "Traceback" not in err
    assert fake.servicer.calls == 0


def test_values_at_the_limits_are_accepted() -> None:
    parser = build_parser(["trace", "metrics"])
    trace = ["trace", "--job-id", " J ", "--output-dir", "o"]
    args = parser.parse_args([*trace, "--duration-ms", str(MAX_DURATION_MS), "--start-delay-s", str(MAX_DELAY_S)])
    assert args.duration_ms == MAX_DURATION_MS and args.start_delay_s == MAX_DELAY_S
    assert args.job_id == "J"  # stripped, as the daemons take it
    args = parser.parse_args([*trace, "--iterations", str(MAX_ITERATIONS), "--iteration-roundup", str(MAX_ITERATIONS)])
    assert args.iterations == args.iteration_roundup == MAX_ITERATIONS
    args = parser.parse_args(["metrics", "--limit", str(MAX_METRICS_LIMIT), "--names", "x" * MAX_NAME_PATTERN_LEN])
    assert args.limit == MAX_METRICS_LIMIT and args.names == ["x" * MAX_NAME_PATTERN_LEN]


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"duration_ms": MAX_DURATION_MS + 1}, "duration_ms"),
        ({"iterations": MAX_ITERATIONS + 1}, "iterations"),
        ({"iterations": 5, "start_iteration_roundup": MAX_ITERATIONS + 1}, "start_iteration_roundup"),
        ({"duration_ms": 100, "start_time_ms": NOW_MS + MAX_FUTURE_START_MS + 1}, "start_time_ms"),
        ({"duration_ms": 100, "job_id": "x" * (MAX_JOB_ID + 1)}, "job_id"),
        ({"duration_ms": 100, "pids": tuple(range(1, MAX_PIDS + 2))}, "pids"),
    ],
)
def test_the_daemon_keeps_refusing_the_same_trace_requests(fields: dict, field: str) -> None:
    spec = TraceSpec(**{"job_id": "J", **fields})
    with pytest.raises(TraceRequestError) as e:
        validate_spec(spec, NOW_MS)
    assert e.value.field == field


def test_the_daemon_accepts_trace_requests_at_the_limits() -> None:
    at_limits = [
        TraceSpec(job_id="x" * MAX_JOB_ID, duration_ms=MAX_DURATION_MS, start_time_ms=NOW_MS + MAX_FUTURE_START_MS),
        TraceSpec(job_id="J", iterations=MAX_ITERATIONS, start_iteration_roundup=MAX_ITERATIONS),
        TraceSpec(job_id="J", duration_ms=1, pids=tuple(range(1, MAX_PIDS + 1))),
    ]
    for spec in at_limits:
        assert validate_spec(spec, NOW_MS).trace_id


def test_the_daemon_keeps_refusing_the_same_metrics_requests() -> None:
    daemon = serve(lambda _port: DynoServicer(lambda: dyno_pb2.Status(), History(2), "hostL"))
    client = DynoClient(daemon.target, timeout_s=5)
    try:
        for names, limit in (([""], 1), (["x" * (MAX_NAME_PATTERN_LEN + 1)], 1), (["m"] * (MAX_NAME_PATTERNS + 1), 1)):
            with pytest.raises(InvalidArgument, match="names"):
                client.metrics(names, limit=limit)
        with pytest.raises(InvalidArgument, match=f"limit: must be 0-{MAX_METRICS_LIMIT}"):
            client.metrics(limit=MAX_METRICS_LIMIT + 1)
        ok = client.metrics(["m"] * (MAX_NAME_PATTERNS - 1) + ["x" * MAX_NAME_PATTERN_LEN], limit=MAX_METRICS_LIMIT)
        assert ok.hostname == "hostL"
    finally:
        client.close()
        daemon.server.stop(0)


@pytest.mark.parametrize("bad", ["x" * (MAX_JOB_ID + 1), "a\x01b"])
def test_dyno_run_refuses_a_job_id_dynod_would_refuse_at_registration(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """dynod refuses such a Register (job_id_ok): every process of the trainer would be refused, untraceable."""
    with pytest.raises(SystemExit) as e:
        run_main(["--job-id", bad, "--print-env"])
    assert e.value.code == 2 and f"argument --job-id: {JOB_ID_RULE}" in capsys.readouterr().err


def test_dyno_run_job_id_at_the_limit_or_blank_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["--job-id", "x" * MAX_JOB_ID, "--print-env"]) == 0
    assert f"DYNO_JOB_ID={'x' * MAX_JOB_ID}" in capsys.readouterr().out
    assert run_main(["--job-id", " ", "--print-env"]) == 0  # blank: the default job id (resolved in the trainer)
    assert "DYNO_JOB_ID" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "validator, text, rule",
    [
        (number(int, gt=0, le=INT32_MAX), "0", f"must be > 0 and <= {INT32_MAX}: '0'"),  # in full, not 2.1e+09
        (number(int, ge=1, le=MAX_DURATION_MS), "0", f"must be 1-{MAX_DURATION_MS}: '0'"),
        (number(float, ge=0.5), "0.25", "must be >= 0.5: '0.25'"),
    ],
)
def test_ranges_are_written_as_typed(validator: Callable[[str], float], text: str, rule: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(rule)):
        validator(text)
