"""`dyno-cli metrics` across hosts lists every host in its host table, as `status` and `version` do: a host that
failed (its error type; the error on stderr) and one that has no sample yet (a daemon just started). Against real
gRPC servers on free loopback ports and a port nothing listens on."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from dyno.client.cli import build_parser, main
from dyno.client.cli import main as cli_main
from dyno.client.cluster import HostResult
from dyno.client.commands.metrics import render_selected
from dyno.client.hosts import Host
from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve
from dyno.v1 import dyno_pb2

from conftest import dead_target

pytestmark = pytest.mark.unit


class NoSampleYet(FakeDynoServicer):
    def GetMetrics(self, request, context):  # noqa: N802 - grpc method name
        return dyno_pb2.GetMetricsResponse(hostname=self.hostname)


@pytest.fixture
def servers() -> Iterator[tuple[FakeServer[FakeDynoServicer], FakeServer[NoSampleYet]]]:
    full = serve(lambda port: FakeDynoServicer(f"fake-{port}"))
    empty = serve(lambda port: NoSampleYet(f"fake-{port}"))
    yield full, empty
    full.server.stop(0)
    empty.server.stop(0)


def _host_table(stdout: str) -> dict[str, list[str]]:
    block = stdout.strip().split("\n\n")[-1].splitlines()
    assert block[0].split()[:3] == ["HOST", "CPU", "USER"], stdout
    return {ln.split()[0]: ln.split()[1:] for ln in block[2:]}


def test_every_host_has_a_row(servers, capsys: pytest.CaptureFixture[str]) -> None:
    full, empty = servers
    dead = dead_target()
    code = cli_main(["metrics", "--hosts", f"{full.target},{dead},{empty.target}", "--timeout-s", "1"])
    out, err = capsys.readouterr()
    assert code == 3
    rows = _host_table(out)
    assert list(rows) == [full.target, dead, empty.target]
    assert rows[dead][0] == "Unavailable" and set(rows[dead][1:]) == {"-"}
    assert rows[empty.target][:3] == ["no", "samples", "yet"]
    assert f"dyno-cli: error: {dead}: cannot reach dynod" in err


def test_all_hosts_failed_still_shows_them(capsys: pytest.CaptureFixture[str]) -> None:
    dead = [dead_target(), dead_target()]
    assert cli_main(["metrics", "--hosts", ",".join(dead), "--timeout-s", "1"]) == 1
    assert list(_host_table(capsys.readouterr().out)) == dead


# `dyno-cli metrics --hosts A,B --names 'net_*'` shows the metrics asked for


def _answer(*metrics: tuple[str, dict[str, str], float]) -> dyno_pb2.GetMetricsResponse:
    sample = dyno_pb2.Sample(timestamp_ms=1)
    for name, labels, value in metrics:
        sample.metrics.add(name=name, labels=labels, value=value)
    return dyno_pb2.GetMetricsResponse(hostname="h", samples=[sample])


def test_the_matched_metrics_are_the_columns() -> None:
    results = [
        HostResult(Host("a", 1778), True, _answer(("net_rx_bytes_per_second", {"device": "eth0"}, 2048.0))),
        HostResult(Host("b", 1778), True, _answer(("net_rx_bytes_per_second", {"device": "ib0"}, 1024.0))),
        HostResult(Host("c", 1778), False, error="down", error_type="Unavailable"),
    ]
    lines = render_selected(results, ["net_*"]).splitlines()
    assert lines[0].split() == ["HOST", "ENTITY", "net_rx_bytes_per_second"]
    assert lines[2].split() == ["a:1778", "device=eth0", "2.0", "KiB/s"]
    assert lines[3].split() == ["b:1778", "device=ib0", "1.0", "KiB/s"]
    assert lines[4].split() == ["c:1778", "Unavailable", "-"]


def test_nothing_matched_says_so() -> None:
    results = [HostResult(Host(n, 1778), True, _answer()) for n in ("a", "b")]
    assert render_selected(results, ["nosuch*"]) == "no metric matches nosuch* on 2 host(s)"


# `metrics --limit` / `--since-ms` select samples for --json; the tables and --watch show the newest sample


@pytest.mark.parametrize(
    "argv",
    [
        ["--limit", "10"],
        ["--since-ms", "1000"],
        ["--watch", "--json", "--limit", "5"],
        ["--watch", "--since-ms", "1000"],
    ],
)
def test_history_options_without_json_are_usage_errors(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["metrics", "--host", "127.0.0.1:1", "--timeout-s", "0.5", *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "for --json without --watch" in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("words", "patterns"),
    [
        (["--names", "gpu_util*,cpu_user*"], ["gpu_util*", "cpu_user*"]),
        (["--names", "gpu_*", "--names", "load_*"], ["gpu_*", "load_*"]),
        (["--names", "gpu_[a,b]*"], ["gpu_[a,b]*"]),  # a comma inside [...] belongs to the pattern
    ],
)
def test_names_take_comma_separated_patterns(words: list[str], patterns: list[str]) -> None:
    """--names takes comma-separated patterns ("gpu_util*,cpu_user*" is two)."""

    assert build_parser().parse_args(["metrics", *words]).names == patterns


def test_an_empty_pattern_in_a_list_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["metrics", "--names", "gpu_*,", "--host", "127.0.0.1:1"])
    assert e.value.code == 2 and "each pattern must be 1-" in capsys.readouterr().err


# `dyno-cli metrics --names PATTERN` matching nothing says that nothing matched, not an empty "(0 values)" header.


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
    """--watch --json streams one JSON object per line, no tables or terminal escape codes."""
    fake = serve(lambda _port: TwoSamples("gpu7"))
    try:
        assert cli_main(["metrics", "--host", fake.target, "--watch", "--json"]) == 0
    finally:
        fake.server.stop(0)
    lines = capsys.readouterr().out.splitlines()
    samples = [json.loads(line) for line in lines]
    assert [s["timestamp_ms"] for s in samples] == [1000, 1001]  # numbers (client.proto_json)
    assert samples[1]["metrics"][0]["name"] == "cpu_user_percent"


# `dyno-cli metrics --watch` follows one daemon; with several hosts the usage error must say that it is --watch that
# takes one (plain `metrics` takes many), not "this command talks to one daemon"


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


# The history options given without --json read as a sentence


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--limit", "5"], "--limit selects samples"),
        (["--since-ms", "1"], "--since-ms selects samples"),
        (["--limit", "5", "--since-ms", "1"], "--limit and --since-ms select samples"),
    ],
)
def test_metrics_history_options_without_json_read_as_a_sentence(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        main(["metrics", "--host", "127.0.0.1:1", *argv])
    assert e.value.code == 2
    assert said in capsys.readouterr().err
