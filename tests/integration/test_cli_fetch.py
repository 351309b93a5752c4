"""`dyno-cli fetch` end to end: two real dynods on free loopback ports (one with --auth-token-file), each with a
real agent-instrumented CPU torch trainer of one job behind it. Traces are started by the library or by a
`dyno-cli trace` that is killed before it fetched anything; `dyno-cli fetch --trace-id` then gets every file.
The last test restarts a daemon, which still serves its finished trace from the trace's record."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from two_host_job import Job, two_host_job

from dyno.client.auth import ClientAuth
from dyno.client.cluster import Cluster
from dyno.client.hosts import parse_hosts
from dyno.client.trace.start import start_trace_retrying
from dyno.daemon.tracing.journal import RECORD_NAME
from dyno.filechunks import checksum_of, new_digest
from dyno.v1 import dyno_pb2

from conftest import ctrl_c, run_cli, start_cli, wait_for

pytestmark = pytest.mark.integration
pytest.importorskip("torch")


@pytest.fixture(scope="module")
def job() -> Iterator[Job]:
    with two_host_job("fetch", ddp=False) as j:
        yield j


def _cluster(job: Job) -> Cluster:
    return Cluster(parse_hosts(job.hosts), deadline_s=5, auth=ClientAuth.from_files(token_file=job.token))


def _start(job: Job, trace_id: str, duration_ms: int = 800) -> None:
    """Start a trace with the library (as a tool would), on every host."""
    req = dyno_pb2.TraceRequest(job_id=job.job_id, trace_id=trace_id, duration_ms=duration_ms)
    with _cluster(job) as cluster:
        results = cluster.call(lambda c: start_trace_retrying(c, req))
    assert all(r.ok and r.value.triggered for r in results), [r.error for r in results]


def _wait_finished(job: Job, trace_id: str) -> None:
    with _cluster(job) as cluster:
        wait_for(lambda: all(r.ok and r.value.finished for r in cluster.call(lambda c: c.get_trace(trace_id))), 60, 0.2)


def _fetch(job: Job, out: Path, trace_id: str, *args: str) -> subprocess.CompletedProcess:
    return run_cli(
        "fetch", "--hosts", job.hosts, "--auth-token-file", str(job.token), "--trace-id", trace_id,
        "--output-dir", str(out), *args, timeout=120,
    )  # fmt: skip


def _check(job: Job, folder: Path, manifest: dict) -> None:
    """Every process fetched, where the manifest says, byte for byte the daemon's file, checksum verified."""
    assert manifest["status"] == "complete" and manifest["exit_code"] == 0 and manifest["errors"] == []
    assert manifest["job_id"] == job.job_id and manifest["request"]["trace_id"] == manifest["trace_id"]
    assert [h["host"] for h in manifest["hosts"]] == [job.open.target, job.locked.target]
    procs = manifest["processes"]
    assert sorted(p["rank"] for p in procs) == [0, 1]
    for p, d in zip(procs, job.daemons, strict=True):
        assert p["host"] == d.target and p["state"] == "done" and p["fetch"] == "fetched"
        local = folder / p["file"]
        assert local.parent.name == f"127.0.0.1_{d.port}"
        assert Path(p["remote_path"]).parent == d.trace_dir / manifest["trace_id"]
        data = local.read_bytes()
        assert data == Path(p["remote_path"]).read_bytes() and len(data) == p["size_bytes"] > 0
        assert checksum_of(new_digest(data)) == p["checksum"]


def test_fetch_a_trace_started_by_the_library(job: Job, tmp_path: Path) -> None:
    _start(job, "fe-lib")
    html = tmp_path / "report.html"
    res = _fetch(job, tmp_path, "fe-lib", "--json", "--html", str(html))  # waits for the running traces
    assert res.returncode == 0, res.stdout + res.stderr
    result = json.loads(res.stdout)
    folder = tmp_path / "fe-lib"
    assert result["ok"] and result["output_dir"] == str(folder)
    _check(job, folder, result)
    on_disk = json.loads((folder / "manifest.json").read_text())
    assert on_disk["client"]["argv"][0] == "fetch"
    _check(job, folder, on_disk)
    # the fetched files were analyzed (no torch.distributed here, so no distributedInfo ranks to compare)
    assert result["analysis_error"] is None and result["report"]["schema"] == "dyno.trace_analysis.report"
    assert "<html" in html.read_text().lower()

    # again into the same folder: both files verified against the manifest's checksums, none fetched again
    res = _fetch(job, tmp_path, "fe-lib", "--no-analyze")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "2 of 2 traced file(s) fetched (2 already there, checksum verified)" in res.stderr
    again = json.loads((folder / "manifest.json").read_text())
    assert [p["reused"] for p in again["processes"]] == [True, True]
    _check(job, folder, again)


def test_fetch_after_the_trace_command_was_killed(job: Job, tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "dyno.client", "trace", "--hosts", job.hosts, "--auth-token-file", str(job.token),
           "--job-id", job.job_id, "--duration-ms", "1500", "--start-delay-s", "0.5", "--trace-id", "fe-killed",
           "--output-dir", str(tmp_path)]  # fmt: skip
    folder = tmp_path / "fe-killed"
    cli = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (folder / "manifest.json").exists(), 60, 0.05)  # started, nothing fetched yet
        cli.send_signal(signal.SIGKILL)  # no chance to cancel or to fetch anything
        cli.wait(10)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert json.loads((folder / "manifest.json").read_text())["status"] == "running"
    assert not [f for f in folder.rglob("*") if f.is_file() and f.name != "manifest.json"]

    res = _fetch(job, tmp_path, "fe-killed", "--no-analyze")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "complete: 2 of 2 traced file(s) fetched" in res.stderr and "PID" in res.stdout
    manifest = json.loads((folder / "manifest.json").read_text())
    _check(job, folder, manifest)
    assert manifest["request"]["duration_ms"] == 1500 and int(manifest["request"]["start_time_ms"]) > 0


def test_ctrl_c_stops_waiting_but_leaves_the_trace_running(job: Job, tmp_path: Path) -> None:
    _start(job, "fe-int", duration_ms=30000)
    cli = start_cli("fetch", "--hosts", job.hosts, "--trace-id", "fe-int", "--output-dir", str(tmp_path),
                    "--no-analyze")  # fmt: skip
    out, err = ctrl_c(cli, lambda: wait_for(lambda: (tmp_path / "fe-int" / "manifest.json").exists(), 60, 0.05))
    assert cli.returncode == 130, out + err
    assert "Traceback" not in err and "the trace goes on" in err
    manifest = json.loads((tmp_path / "fe-int" / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["exit_code"] == 130
    with _cluster(job) as cluster:
        for r in cluster.call(lambda c: c.get_trace("fe-int")):  # fetch did not cancel it
            assert r.ok and not r.value.finished
            assert dyno_pb2.TRACE_STATE_CANCELLED not in {p.state for p in r.value.processes}
        assert all(r.ok for r in cluster.call(lambda c: c.cancel_trace("fe-int")))  # free the trainers
    _wait_finished(job, "fe-int")


# Must stay the last test of the module: it restarts a daemon.
def test_a_restarted_daemon_still_serves_its_finished_trace(job: Job, tmp_path: Path) -> None:
    """The finished trace's record in its folder (dyno.daemon.tracing.journal) outlives the daemon: GetTrace and
    FetchTraceFile answer as before the restart, on the authenticated host too."""
    _start(job, "fe-restart", duration_ms=300)
    _wait_finished(job, "fe-restart")
    wait_for((job.locked.trace_dir / "fe-restart" / RECORD_NAME).is_file, 10, 0.05)  # written just after finishing
    job.locked.restart()
    res = _fetch(job, tmp_path, "fe-restart", "--no-analyze")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "complete: 2 of 2 traced file(s) fetched" in res.stderr
    _check(job, tmp_path / "fe-restart", json.loads((tmp_path / "fe-restart" / "manifest.json").read_text()))
