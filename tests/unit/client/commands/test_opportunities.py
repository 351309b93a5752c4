"""`dyno-cli opportunities --hosts`: against real gRPC servers on loopback serving hand-built ListJobs records
(opportunity_cases.py), a dead host among them (partial answer naming it, exit 3); the same records as columns (as
dynod answers `analysis_rules`), from a dynod that answers columns without their analyses (asked again for records),
and a host whose columns are malformed (a failed host); records without any analysis; usage mistakes exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from opportunity_cases import RecordsServicer, case_records, job_hosts

from dyno.client.cli import main as cli_main
from dyno.client.commands._common import json_document
from dyno.client.opportunities.jsondoc import to_json
from dyno.client.opportunities.ranking import rank
from dyno.client.opportunities.text import render
from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, fake_job_record, serve
from dyno.job_columns import job_columns
from dyno.v1 import dyno_pb2

from conftest import dead_target

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def servers() -> Iterator[list[FakeServer[RecordsServicer]]]:
    records = case_records("a", "b")
    s = [serve(lambda port, d=d: RecordsServicer(f"host-{d}", [r for h, r in records if h == d])) for d in "ab"]
    yield s
    for one in s:
        one.server.stop(0)


class ColumnsServicer(RecordsServicer):
    """Answers a columnar request as dynod does (`analyses` with analysis_rules), or, as `kind` says, as a dynod
    older than analysis_rules ("before": columns without analyses) or a broken one ("malformed": a bad index)."""

    def __init__(self, hostname: str, records: list[dyno_pb2.JobRecord], kind: str) -> None:
        super().__init__(hostname, records)
        self.kind = kind
        self.asked: list[tuple[bool, bool]] = []  # (columnar, analysis_rules) of each request

    def ListJobsEncoded(self, request: dyno_pb2.ListJobsRequest, context: object) -> bytes:  # type: ignore[override]
        self.asked.append((request.columnar, request.analysis_rules))
        if not request.columnar:
            return super().ListJobsEncoded(request, context)  # type: ignore[arg-type]
        columns = job_columns(self.records, analysis_rules=request.analysis_rules and self.kind != "before")
        if self.kind == "malformed":
            columns.analyses.rule[0] = len(columns.rules)
        return dyno_pb2.ListJobsResponse(hostname=self.hostname, columns=columns).SerializeToString()


@pytest.fixture(scope="module")
def column_servers() -> Iterator[dict[str, FakeServer[ColumnsServicer]]]:
    records = case_records("a", "b")
    s = {
        f"{d}-{kind}": serve(
            lambda port, d=d, kind=kind: ColumnsServicer(f"host-{d}", [r for h, r in records if h == d], kind)
        )
        for d in "ab"
        for kind in ("now", "before", "malformed")
    }
    yield s
    for one in s.values():
        one.server.stop(0)


def test_columns_and_a_dynod_before_analysis_rules_rank_as_records(
    servers, column_servers, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    assert cli_main(["opportunities", "--hosts", ",".join(s.target for s in servers), "--json"]) == 0
    expected = capsys.readouterr().out
    for a, b in (("now", "now"), ("before", "before"), ("now", "before")):
        pair = column_servers[f"a-{a}"], column_servers[f"b-{b}"]
        assert cli_main(["opportunities", "--hosts", ",".join(s.target for s in pair), "--json"]) == 0
        assert capsys.readouterr().out == expected
    assert column_servers["a-now"].servicer.asked[-1] == (True, True)  # columns with their analyses' rules
    assert column_servers["b-before"].servicer.asked[-2:] == [(True, True), (False, False)]  # then records


def test_each_page_is_checked_once(column_servers, monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    """As the pages arrive (pages.job_pages), not again when ranked: check_columns and check_analyses once a page."""
    from dyno.client import column_pages

    checked: list[int] = []
    real = column_pages._out_of_bounds
    monkeypatch.setattr(column_pages, "_out_of_bounds", lambda bounds: checked.append(len(bounds)) or real(bounds))
    pair = column_servers["a-now"], column_servers["b-now"]  # a page each
    assert cli_main(["opportunities", "--hosts", ",".join(s.target for s in pair), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rules"] and sorted(checked) == [4, 4, 5, 5]


def test_a_host_with_malformed_columns_is_a_failed_host(column_servers, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    good, bad = column_servers["a-now"], column_servers["b-malformed"]
    assert cli_main(["opportunities", "--hosts", f"{good.target},{bad.target}", "--json"]) == 3
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    (failed,) = doc["failed_hosts"]
    assert failed["host"] == bad.target and failed["error"].startswith("MalformedPage: a columnar ListJobs page")
    assert "analyses.rule" in failed["error"] and "Traceback" not in captured.err and bad.target in captured.err
    # host a's jobs still ranked: sync-calls 10 x 0.1 + 20 x 0.25, dataloader 10 x 0.5
    assert [(r["rule"], r["recoverable_gpu_hours"]) for r in doc["rules"]] == [("sync-calls", 6.0), ("dataloader", 5.0)]


def test_records_without_any_analysis_rank_as_ranking_rank_does(capsys: pytest.CaptureFixture[str]) -> None:
    """A new fleet (or a window with nothing analysed): records, none with an analysis, from dynods answering columns
    and one answering records; every GPU-hour is never analysed, as ranking.rank says, and the command exits 0."""
    with ExitStack() as stack:
        s = [
            stack.enter_context(serve(lambda port, c=c: FakeDynoServicer("fake", jobs=30, columnar=c)))
            for c in (True, True, False)
        ]
        hosts = ",".join(one.target for one in s)
        records = [(one.target, fake_job_record("fake", i)) for one in s for i in range(30)]
        expected = rank(job_hosts(records), since_s=7 * 86400.0, source="daemons", top=5)
        assert expected.never_analysed_gpu_hours > 0 and not expected.rules
        assert cli_main(["opportunities", "--hosts", hosts, "--json"]) == 0
        captured = capsys.readouterr()
        assert captured.out == json_document(to_json(expected)) + "\n" and captured.err == ""
        assert cli_main(["opportunities", "--hosts", hosts]) == 0
        assert capsys.readouterr().out == render(expected, None) + "\n"


def _code(argv: list[str]) -> int:
    """main()'s exit code, argparse's own exits (bad values) included."""
    try:
        return cli_main(argv)
    except SystemExit as e:
        return int(e.code or 0)


def test_json_from_two_hosts(servers, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = ",".join(s.target for s in servers)
    assert cli_main(["opportunities", "--hosts", hosts, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(r["rule"], round(r["recoverable_gpu_hours"], 6)) for r in doc["rules"]] == [
        ("dataloader", 11.0),
        ("sync-calls", 6.0),
    ]
    assert doc["rules"][0]["top_jobs"][0]["hosts"] == ["host-a", "host-b"]  # one job over both hosts
    assert doc["totals"]["never_analysed_gpu_hours"] == pytest.approx(12.0) and doc["failed_hosts"] == []
    assert doc["never_analysed"]["failed_analyses"] == 1


def test_a_dead_host_gives_a_partial_answer_naming_it(servers, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    dead = dead_target()
    hosts = ",".join([*(s.target for s in servers), dead])
    page = tmp_path / "opps.html"
    assert cli_main(["opportunities", "--hosts", hosts, "--timeout-s", "1", "--html", str(page)]) == 3
    out, err = capsys.readouterr()
    assert "1. dataloader: 11.00 GPU-hours recoverable, 1 job of 1 user on 2 hosts" in out
    assert "Never analysed: 12.00 GPU-hours of 2 jobs" in out and f"HTML page written to {page}" in out
    assert dead in err
    html = page.read_text()
    assert dead in html and html.index('data-rule="dataloader"') < html.index('data-rule="sync-calls"')
    assert cli_main(["opportunities", "--hosts", hosts, "--timeout-s", "1", "--json"]) == 3
    doc = json.loads(capsys.readouterr().out)
    assert [f["host"] for f in doc["failed_hosts"]] == [dead] and len(doc["rules"]) == 2


def test_no_host_answers_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["opportunities", "--hosts", dead_target(), "--timeout-s", "1"]) == 1


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--since", "7"], "is not a duration like 7d"),
        (["--since", "0s"], "give more than 0"),
        (["--prometheus", "prometheus:9090"], "give the server's URL, e.g. http://prometheus:9090"),
        (["--html", "/nonexistent-dir/x.html"], "is not an existing folder"),
        (["--top", "0"], "--top"),
    ],
)
def test_usage_mistakes_exit_2(args: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _code(["opportunities", "--hosts", dead_target(), *args]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_an_unreachable_prometheus_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    dead = dead_target()
    assert cli_main(["opportunities", "--prometheus", f"http://{dead}", "--timeout-s", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"dyno-cli opportunities: error: cannot reach Prometheus at http://{dead}")
    assert "Traceback" not in err


def test_help_loads_no_protobuf_grpc_numpy_or_other_command() -> None:
    code = (
        "import sys\nfrom dyno.client.cli import main\ntry:\n    main(['opportunities', '--help'])\n"
        "except SystemExit:\n    pass\nprint(' '.join(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    loaded = set(done.stdout.split())
    assert "dyno.client.commands.opportunities" in loaded
    heavy = {"grpc", "google.protobuf", "numpy", "dyno.client.commands.jobs", "dyno.client.opportunities.ranking"}
    assert loaded & heavy == set()
