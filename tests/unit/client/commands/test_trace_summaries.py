"""`dyno-cli trace --summaries` and `dyno-cli fetch --summaries` in-process against fake daemons over real gRPC:
each daemon answers GetTraceSummary with its own host's analysis (parts of a generated job with a planted
straggler), pending for a few polls first; no raw file is fetched or written; the merged report names the
straggler among all the job's ranks; a failed, disabled or slow analysis is named with its reason (exit 3, or 1
when no host merges); the options that cannot go with --summaries are usage errors."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from fetch_cmd_fakes import KnownTraceServicer
from multirank_jobs import gpu_job

from dyno.client.cli import main as cli_main
from dyno.client.hosts import Host
from dyno.daemon.fake_server import serve
from dyno.trace_analysis.host_summary import summarize_trace
from dyno.trace_summary import AnalysisFailure, AnalysisState, TraceSummary
from dyno.trace_summary_pb import summary_to_proto
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit

TID = "t-summaries"
STEPS = [100_000, 101_000, 99_500, 160_000]  # rank 3 is the straggler


class SummaryServicer(KnownTraceServicer):
    """A daemon whose analysis of TID is pending for `pending` polls, then `answer` (with its parts when asked)."""

    def __init__(self, hostname: str, answer: dyno_pb2.TraceSummary, pending: int = 1) -> None:
        super().__init__(hostname, {TID})
        self.answer = answer
        self.pending = pending
        self.summary_calls: list[bool] = []  # include_rank_parts of each call

    def GetTraceSummary(self, request, context):  # noqa: N802 - grpc method name
        self._known(request.trace_id, context)
        self.summary_calls.append(request.include_rank_parts)
        if len(self.summary_calls) <= self.pending:
            return dyno_pb2.TraceSummary(trace_id=request.trace_id, state=dyno_pb2.ANALYSIS_STATE_RUNNING)
        answer = dyno_pb2.TraceSummary()
        answer.CopyFrom(self.answer)
        if not request.include_rank_parts:
            answer.ClearField("rank_parts")
        return answer


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dyno_pb2.TraceSummary]:
    """Each fake host's answer: node-a holds ranks 0-1, node-b ranks 2-3 (the straggler)."""
    job = gpu_job(tmp_path_factory.mktemp("job"), STEPS)
    out = {}
    for name, ranks in (("a", [0, 1]), ("b", [2, 3])):
        h = summarize_trace([str(job / f"rank-{r}.json") for r in ranks], trace_id=TID)
        out[name] = summary_to_proto(h.summary, h.rank_parts, h.thinned)
    failed = TraceSummary(trace_id=TID).failed(AnalysisFailure.TIMED_OUT, "over its 600 s limit", 1)
    out["failed"] = summary_to_proto(failed)
    out["disabled"] = summary_to_proto(TraceSummary(trace_id=TID, state=AnalysisState.DISABLED))
    return out


class Fakes:
    def __init__(self) -> None:
        self.pool = futures.ThreadPoolExecutor(max_workers=16)
        self.servers: list[grpc.Server] = []

    def start(self, answer: dyno_pb2.TraceSummary, pending: int = 1) -> tuple[Host, SummaryServicer]:
        name = f"node{len(self.servers)}"
        fake = serve(lambda _port: SummaryServicer(name, answer, pending), executor=self.pool)
        self.servers.append(fake.server)
        return Host("127.0.0.1", fake.port), fake.servicer


@pytest.fixture
def fakes() -> Iterator[Fakes]:
    f = Fakes()
    yield f
    for s in f.servers:
        s.stop(0)
    f.pool.shutdown()


def _files(where: Path) -> list[str]:
    return sorted(str(p.relative_to(where)) for p in where.rglob("*"))


def test_fetch_summaries_merges_both_hosts_and_names_the_straggler(
    fakes: Fakes, answers: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (a, sa), (b, sb) = fakes.start(answers["a"], pending=2), fakes.start(answers["b"])
    html = tmp_path / "report.html"
    code = cli_main(["fetch", "--hosts", f"{a},{b}", "--trace-id", TID, "--summaries", "--html", str(html)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "rank 3 is a straggler among 4 ranks" in out
    assert "dyno-cli fetch: complete: report over 4 rank(s) from the analyses of 2 of 2 host(s)" in err
    assert "Traceback" not in err and "fetched 0 file" not in err  # the progress counts no files
    assert f"{a}: done\n" in err
    assert not sa.fetches and not sb.fetches  # no raw file pulled
    assert _files(tmp_path) == ["report.html"] and "straggler" in html.read_text()
    assert len(sa.summary_calls) == 3 and all(sa.summary_calls)  # waited while RUNNING, parts asked for


def test_trace_summaries_json_with_a_failed_host_is_partial(
    fakes: Fakes, answers: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    (a, _), (b, _) = fakes.start(answers["a"]), fakes.start(answers["failed"])
    argv = ["trace", "--hosts", f"{a},{b}", "--job-id", "job1", "--iterations", "2", "--trace-id", TID]
    code = cli_main([*argv, "--summaries", "--json"])
    out, err = capsys.readouterr()
    assert code == 3, err
    doc = json.loads(out)
    assert doc["exit_code"] == 3 and doc["status"] == "partial" and doc["output_dir"] is None
    assert [r["rank"] for r in doc["report"]["ranks"]] == [0, 1]
    assert [s["state"] for s in doc["summaries"]] == ["done", "failed"]
    assert doc["summaries"][1]["error"] == "analysis failed (TIMED_OUT): over its 600 s limit"
    assert doc["report"]["errors"] == [{"path": str(b), "reason": "analysis failed (TIMED_OUT): over its 600 s limit"}]
    assert f"dyno-cli trace: {b}: not merged: analysis failed (TIMED_OUT): over its 600 s limit" in err


def test_no_host_merged_is_exit_1_and_a_slow_analysis_times_out(
    fakes: Fakes, answers: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    (a, _), (b, _) = fakes.start(answers["disabled"]), fakes.start(answers["a"], pending=10**6)
    argv = ["fetch", "--hosts", f"{a},{b}", "--trace-id", TID, "--summaries", "--analysis-timeout-s", "0.6"]
    assert cli_main(argv) == 1
    err = capsys.readouterr().err
    assert f"{a}: not merged: this dynod does not analyse traces" in err
    assert f"{b}: not merged: analysis running: not finished after 0.6 s" in err
    assert "report over 0 rank(s) from the analyses of 0 of 2 host(s)" in err


def test_a_daemon_without_get_trace_summary_is_named(fakes: Fakes, capsys: pytest.CaptureFixture[str]) -> None:
    fake = serve(lambda _port: KnownTraceServicer("old", {TID}), executor=fakes.pool)  # UNIMPLEMENTED
    fakes.servers.append(fake.server)
    assert cli_main(["fetch", "--host", fake.target, "--trace-id", TID, "--summaries"]) == 1
    assert "cannot send trace summaries (an older version)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--summaries", "--output-dir", "x"], "--summaries fetches and writes no file"),
        (["--summaries", "--no-analyze"], "--no-analyze: --summaries is the analysis"),
        ([], "--output-dir is required (unless --summaries)"),
    ],
)
def test_options_that_do_not_go_with_summaries(
    extra: list[str], words: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for argv in (
        ["fetch", "--host", "127.0.0.1:1", "--trace-id", TID],
        ["trace", "--host", "127.0.0.1:1", "--job-id", "j", "--iterations", "1"],
    ):
        with pytest.raises(SystemExit) as e:
            cli_main([*argv, *extra])
        assert e.value.code == 2
        assert words in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "x")
