"""`dyno-cli jobs`: one row per job across hosts ranked by wasted GPU-hours, SM-active basis only where every host
measured it, partial answers (exit 3), JSON with integers as numbers, a host whose columns are malformed a failed
host. Against real gRPC servers on loopback."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator

import pytest

from dyno.client.cli import main as cli_main
from dyno.client.commands.jobs import parse_since
from dyno.client.jobs_table import BASIS_BUSY, BASIS_SM, from_records, render, to_json
from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve
from dyno.v1 import dyno_pb2

from conftest import dead_target

pytestmark = pytest.mark.unit
H = 3600.0


def rec(job: str, host: str, gpu_s: float, busy: float, sm: float | None = None, **kw: object) -> dyno_pb2.JobRecord:
    return dyno_pb2.JobRecord(
        job_id=job,
        user="alice",
        hostname=host,
        first_seen_ms=1000,
        last_seen_ms=1000 + int(gpu_s * 1000),
        gpus_max=8,
        gpu_seconds=gpu_s,
        busy_gpu_seconds=gpu_s * busy,
        sm_active_gpu_seconds=gpu_s * (sm or 0.0),
        gpm_gpu_seconds=gpu_s if sm is not None else 0.0,
        **kw,  # type: ignore[arg-type]
    )


def test_rows_join_hosts_and_rank_by_wasted_gpu_hours() -> None:
    rows = from_records(
        [
            ("a:1778", rec("small-idle", "a", 1 * H, 0.0)),
            ("a:1778", rec("big", "a", 8 * H, 0.5, traces=2)),
            ("b:1778", rec("big", "b", 8 * H, 0.5, traces=1)),
            ("a:1778", rec("gpm", "a", 4 * H, 0.9, sm=0.25)),
            ("b:1778", rec("gpm", "b", 4 * H, 0.9, sm=0.25)),
        ]
    )
    assert [r.job_id for r in rows] == ["big", "gpm", "small-idle"]
    big, gpm, _ = rows
    assert (big.hosts, big.host_count, big.gpus, big.gpu_hours, big.traces) == (("a", "b"), 2, 16, 16.0, 3)
    assert big.wasted_gpu_hours == pytest.approx(8.0) and big.basis == BASIS_BUSY
    assert gpm.basis == BASIS_SM and gpm.wasted_gpu_hours == pytest.approx(6.0)  # busy 90 % but SM-active 25 %


def test_the_latest_analysis_over_a_jobs_hosts_is_its_costliest_rule_or_why_it_failed() -> None:
    done = dyno_pb2.TraceSummary(
        state=dyno_pb2.ANALYSIS_STATE_DONE,
        analyzed_ms=5,
        rules=[
            dyno_pb2.RuleLoss(rule="dataloader", time_lost_share=0.25),
            dyno_pb2.RuleLoss(rule="x", time_lost_share=0.1),
        ],
    )
    crashed = dyno_pb2.TraceSummary(
        state=dyno_pb2.ANALYSIS_STATE_FAILED, failure=dyno_pb2.ANALYSIS_FAILURE_TIMED_OUT, analyzed_ms=9
    )
    rows = from_records(
        [
            ("a", rec("both", "a", H, 0.5, latest_analysis=done)),
            ("b", rec("both", "b", H, 0.5, latest_analysis=crashed)),
            ("a", rec("done", "a", H, 0.4, latest_analysis=done)),
            ("a", rec("never", "a", H, 0.3)),
        ]
    )
    by_job = {r.job_id: r.analysis for r in rows}
    assert by_job == {"both": "analysis failed: timed out", "done": "dataloader 25%", "never": ""}
    assert "ANALYSIS" in render(rows) and "dataloader 25%" in render(rows)
    assert {j["job_id"]: j["analysis"] for j in to_json(rows)}["never"] is None


def test_sm_basis_needs_every_host_to_have_measured_it() -> None:
    (row,) = from_records([("a", rec("mixed", "a", H, 0.5, sm=0.1)), ("b", rec("mixed", "b", H, 0.5))])
    assert row.basis == BASIS_BUSY and row.sm_fraction is None and row.wasted_gpu_hours == pytest.approx(1.0)


def test_since_durations() -> None:
    assert parse_since("7d") == 7 * 86400 and parse_since("90m") == 5400 and parse_since("1.5h") == 5400
    for bad in ("7", "d", "-1d", "0s", "99999w"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_since(bad)


@pytest.fixture
def servers() -> Iterator[list[FakeServer[FakeDynoServicer]]]:
    s = [serve(lambda port: FakeDynoServicer(f"fake-{port}", jobs=1500)) for _ in range(2)]
    yield s
    for one in s:
        one.server.stop(0)


def test_jobs_across_hosts_json_and_a_failed_host_is_partial(servers, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = ",".join(s.target for s in servers)
    assert cli_main(["jobs", "--hosts", hosts, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    jobs = answer["jobs"]
    assert len(jobs) == 1500  # every host's pages gathered; one row per job over both hosts
    top = jobs[0]
    assert top["host_count"] == 2 and top["gpus"] == 16 and isinstance(top["start_ms"], int)
    wasted = [j["wasted_gpu_hours"] for j in jobs]
    assert wasted == sorted(wasted, reverse=True)
    dead = dead_target()
    code = cli_main(["jobs", "--hosts", f"{hosts},{dead}", "--timeout-s", "1"])
    out, err = capsys.readouterr()
    assert code == 3
    assert out.splitlines()[0].split()[:4] == ["JOB", "USER", "HOSTS", "GPUS"]
    assert dead in err


def test_all_hosts_down_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["jobs", "--hosts", dead_target(), "--timeout-s", "1"]) == 1


def test_prometheus_url_mistakes_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["jobs", "--prometheus", "prometheus:9090"]) == 1
    assert "give the server's URL, e.g. http://prometheus:9090" in capsys.readouterr().err
    dead = dead_target()
    assert cli_main(["jobs", "--prometheus", f"http://{dead}", "--timeout-s", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"dyno-cli jobs: error: cannot reach Prometheus at http://{dead}") and "Traceback" not in err


def test_a_mixed_fleet_joins_columns_and_an_older_dynods_records_into_the_same_rows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The command asks for columns; a dynod before them ignores the field and answers records (the fake server
    with columnar=False): every host's records count, whichever form they came in."""
    with (
        serve(lambda port: FakeDynoServicer(f"fake-{port}", jobs=1500)) as columnar,
        serve(lambda port: FakeDynoServicer(f"fake-{port}", jobs=1500, columnar=False)) as older,
        serve(lambda port: FakeDynoServicer(f"fake-{port}", jobs=1500, columnar=False)) as older2,
    ):
        assert cli_main(["jobs", "--hosts", f"{columnar.target},{older.target}", "--json"]) == 0
        mixed = json.loads(capsys.readouterr().out)["jobs"]
        assert columnar.servicer.calls == 1  # its 1500 records in one columnar page (records: pages of 1000)
        assert cli_main(["jobs", "--hosts", f"{older.target},{older2.target}", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["jobs"] == mixed
        assert len(mixed) == 1500 and mixed[0]["host_count"] == 2 and mixed[0]["gpus"] == 16


class _NoDatabase(FakeDynoServicer):
    """A host whose job database cannot be used: its (columnar) pages say why."""

    def ListJobsEncoded(self, request: dyno_pb2.ListJobsRequest, context: object) -> bytes:
        page = super().ListJobsEncoded(request, context)  # type: ignore[arg-type]
        return page + dyno_pb2.ListJobsResponse(store_problem="disk full").SerializeToString()


def test_a_host_without_its_job_database_is_named_on_stderr_and_in_the_json(capsys: pytest.CaptureFixture[str]) -> None:
    with serve(lambda port: _NoDatabase(f"fake-{port}", jobs=3)) as s:
        assert cli_main(["jobs", "--hosts", s.target, "--json"]) == 0
        out, err = capsys.readouterr()
    assert json.loads(out)["store_problems"] == [f"{s.target}: disk full"] and len(json.loads(out)["jobs"]) == 3
    assert f"job database of {s.target}: disk full (running jobs only)" in err


class _Malformed(FakeDynoServicer):
    """A dynod whose columnar page is broken as `kind` says: an index out of its table, or a column one short."""

    def __init__(self, hostname: str, kind: str) -> None:
        super().__init__(hostname, jobs=20, analyses=True)  # analysed records: top_rule and analysed_rows filled
        self.kind = kind

    def ListJobsEncoded(self, request: dyno_pb2.ListJobsRequest, context: object) -> bytes:
        page = dyno_pb2.ListJobsResponse.FromString(super().ListJobsEncoded(request, context))  # type: ignore[arg-type]
        c = page.columns
        n = len(c.job_id)
        if self.kind == "gpm_rows":
            c.gpm_rows.append(n)
            c.sm_active_gpu_seconds.append(1.0)
            c.gpm_gpu_seconds.append(1.0)
        elif self.kind == "gpu_seconds":
            del c.gpu_seconds[-1]
        else:
            table = {
                "hostname_index": c.hostnames,
                "user_index": c.users,
                "top_rule": c.rules,
                "analysed_rows": c.job_id,
            }
            getattr(c, self.kind)[0] = len(table[self.kind])
        return page.SerializeToString()


_KINDS = ["hostname_index", "user_index", "top_rule", "analysed_rows", "gpm_rows", "gpu_seconds"]


@pytest.fixture(scope="module")
def malformed() -> Iterator[dict[str, FakeServer[FakeDynoServicer]]]:
    s: dict[str, FakeServer[FakeDynoServicer]] = {
        kind: serve(lambda port, k=kind: _Malformed("bad", k)) for kind in _KINDS
    }
    s["good"] = serve(lambda port: FakeDynoServicer("good", jobs=20))
    yield s
    for one in s.values():
        one.server.stop(0)


@pytest.mark.parametrize("kind", _KINDS)
def test_a_host_with_malformed_columns_is_a_failed_host(
    malformed: dict[str, FakeServer[FakeDynoServicer]], kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A buggy or hostile dynod's columns (an index out of its table, a column of another length) make its host a
    failed one, named on stderr and in the JSON's failed hosts (exit 3), as opportunities does; the rest are joined."""
    good, bad = malformed["good"].target, malformed[kind].target
    assert cli_main(["jobs", "--hosts", f"{good},{bad}", "--json"]) == 3
    out, err = capsys.readouterr()
    doc = json.loads(out)
    says = f"a columnar ListJobs page whose columns do not agree: {kind}"
    assert doc["failed_hosts"] == [{"host": bad, "error": says}] and len(doc["jobs"]) == 20
    assert f"dyno-cli: error: {bad}: {says} (MalformedPage)" in err and "Traceback" not in err
    assert cli_main(["jobs", "--hosts", bad]) == 1  # no host answered
    assert says in capsys.readouterr().err
