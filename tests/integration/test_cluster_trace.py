"""`dyno-cli trace` and `dyno-cli ps` across hosts, end to end: two real dynods on different loopback ports
(one without auth, one with --auth-token-file), each with a real agent-instrumented CPU torch trainer behind it;
the two trainers are the two ranks of one gloo DDP job. The last test stops a daemon mid-run."""

from __future__ import annotations

import gzip
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from two_host_job import Job, two_host_job

from dyno.filechunks import checksum_of, new_digest
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

from conftest import Dynod, ctrl_c, dead_target, run_cli, start_cli, trace_unknown_job, wait_for

pytestmark = pytest.mark.integration
pytest.importorskip("torch")


def _trace_state(d: Dynod, trace_id: str) -> dyno_pb2.TraceStatus | None:
    with grpc.insecure_channel(d.target) as ch:
        try:
            return dyno_pb2_grpc.DynoStub(ch).GetTrace(dyno_pb2.GetTraceRequest(trace_id=trace_id), timeout=5)
        except grpc.RpcError:
            return None


@pytest.fixture(scope="module")
def job() -> Iterator[Job]:
    with two_host_job("ct", ddp=True) as j:
        yield j


def _trace(job: Job, out: Path, *args: str, token: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    auth = ["--auth-token-file", str(job.token)] if token else []
    return run_cli(
        "trace", "--hosts", job.hosts, *auth, "--job-id", job.job_id, "--output-dir", str(out), *args, timeout=timeout
    )


def _load(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def _check_files(folder: Path, manifest: dict) -> None:
    """Every fetched file is where the manifest says, with its size and checksum."""
    for p in manifest["processes"]:
        if p["fetch"] != "fetched":
            continue
        path = folder / p["file"]
        assert path.parent.parent == folder and path.parent.name.startswith("127.0.0.1_")
        data = path.read_bytes()
        assert len(data) == p["fetched_bytes"] == p["size_bytes"] > 0
        assert checksum_of(new_digest(data)) == p["checksum"]
        assert _load(path)["trace_id"] == manifest["trace_id"]


def test_ps_across_hosts(job: Job) -> None:
    res = run_cli("ps", "--hosts", job.hosts, "--job-id", job.job_id)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split()[:3] == ["HOST", "PID", "JOB"]
    assert any(line.startswith(job.open.target) and " 0/2 " in line for line in lines)
    assert any(line.startswith(job.locked.target) and " 1/2 " in line for line in lines)
    res = run_cli("ps", "--hosts", f"{job.hosts},{dead_target()}", "--call-timeout-s", "2", "--json")
    assert res.returncode == 3, res.stderr  # every command takes trace's --call-timeout-s (ps: as --timeout-s)
    res = run_cli("ps", "--hosts", f"{job.hosts},{dead_target()}", "--timeout-s", "2", "--json")
    assert res.returncode == 3, res.stderr
    rows = json.loads(res.stdout)
    assert [r["ok"] for r in rows] == [True, True, False] and "Unavailable" in rows[2]["error"]


def test_every_host_traced_fetched_and_analyzed(job: Job, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    res = _trace(
        job, tmp_path, "--duration-ms", "300", "--start-delay-s", "1", "--trace-id", "ct-all", "--html", str(html)
    )
    assert res.returncode == 0, res.stdout + res.stderr
    folder = tmp_path / "ct-all"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["schema"] == "dyno.trace-manifest" and manifest["status"] == "complete"
    assert manifest["exit_code"] == 0 and manifest["errors"] == []
    assert [h["host"] for h in manifest["hosts"]] == [job.open.target, job.locked.target]
    assert all(h["state"] == "done" for h in manifest["hosts"])
    # one request, one absolute start for every host
    assert manifest["request"]["trace_id"] == "ct-all" and int(manifest["request"]["start_time_ms"]) > 0
    assert manifest["timings"]["start_time_ms"] == int(manifest["request"]["start_time_ms"])
    procs = manifest["processes"]
    assert sorted(p["rank"] for p in procs) == [0, 1]
    assert {p["host"]: p["file"].split("/")[0] for p in procs} == {
        job.open.target: job.host_dir(job.open),
        job.locked.target: job.host_dir(job.locked),
    }
    assert all(p["state"] == "done" and p["protocol"] == "agent" for p in procs)
    _check_files(folder, manifest)
    assert "hosts: " in res.stderr  # plain progress lines (not a terminal)
    assert "PID" in res.stdout and "ct-all" not in res.stdout.split("PID")[0]
    assert "rank" in res.stdout.lower() and "finding" in res.stdout.lower()  # the cross-rank report
    assert "<html" in html.read_text().lower()


def test_missing_token_is_partial_with_a_clear_reason(job: Job, tmp_path: Path) -> None:
    res = _trace(job, tmp_path, "--duration-ms", "200", "--start-delay-s", "1", "--trace-id", "ct-noauth", token=False)
    assert res.returncode == 3, res.stdout + res.stderr
    assert f"{job.locked.target}: not authenticated" in res.stderr and "--auth-token-file" in res.stderr
    manifest = json.loads((tmp_path / "ct-noauth" / "manifest.json").read_text())
    assert manifest["status"] == "partial" and manifest["exit_code"] == 3
    open_host, locked_host = manifest["hosts"]
    assert open_host["state"] == "done"
    assert locked_host["state"] == "failed" and locked_host["error_type"] == "Unauthenticated"
    (proc,) = manifest["processes"]
    assert proc["host"] == job.open.target and proc["rank"] == 0 and proc["fetch"] == "fetched"
    _check_files(tmp_path / "ct-noauth", manifest)
    assert "finding" in res.stdout.lower()  # the report of what arrived


def test_unknown_job_is_exit_1_with_the_reason(job: Job, tmp_path: Path) -> None:
    res = trace_unknown_job(tmp_path, "--hosts", job.hosts, "--auth-token-file", str(job.token))
    assert job.job_id in res.stderr
    assert "nothing traced" in res.stderr
    assert not list(tmp_path.iterdir())


def test_usage_errors_exit_2(job: Job, tmp_path: Path) -> None:
    for args in (
        ["--iterations", "2", "--start-delay-s", "1"],
        ["--duration-ms", "100", "--iteration-roundup", "4"],
        ["--duration-ms", "100", "--trace-id", "../x"],
        ["--duration-ms", "100", "--start-delay-s", "7200"],
    ):
        res = _trace(job, tmp_path, *args)
        assert res.returncode == 2, (args, res.stderr)
        assert res.stderr.count("\n") <= 3 and "error" in res.stderr
    assert not list(tmp_path.iterdir())


def test_iterations_json_result(job: Job, tmp_path: Path) -> None:
    res = _trace(job, tmp_path, "--iterations", "2", "--iteration-roundup", "5", "--record-shapes", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    result = json.loads(res.stdout)
    assert result["ok"] and result["status"] == "complete"
    assert result["request"]["iterations"] == 2 and result["request"]["start_iteration_roundup"] == 5
    folder = Path(result["output_dir"])
    assert folder == tmp_path / result["trace_id"]
    assert all(Path(p["path"]) == folder / p["file"] for p in result["processes"])
    _check_files(folder, result)
    assert result["analysis_error"] is None
    assert sorted(r["rank"] for r in result["report"]["ranks"]) == [0, 1]
    on_disk = json.loads((folder / "manifest.json").read_text())
    assert on_disk["processes"] == [{k: v for k, v in p.items() if k != "path"} for p in result["processes"]]


def _start_cli(job: Job, out: Path, *args: str) -> subprocess.Popen[str]:
    return start_cli("trace", "--hosts", job.hosts, "--auth-token-file", str(job.token), "--job-id", job.job_id,
                     "--output-dir", str(out), *args)  # fmt: skip


def _wait_running(d: Dynod, trace_id: str) -> None:
    running = dyno_pb2.TRACE_STATE_RUNNING
    wait_for(
        lambda: (s := _trace_state(d, trace_id)) is not None and any(p.state == running for p in s.processes),
        30,
        0.1,
    )


def test_ctrl_c_cancels_and_still_writes_the_manifest(job: Job, tmp_path: Path) -> None:
    cli = _start_cli(job, tmp_path, "--duration-ms", "30000", "--start-delay-s", "0.5", "--trace-id", "ct-int")
    out, err = ctrl_c(cli, lambda: _wait_running(job.open, "ct-int"))
    assert cli.returncode == 130, out + err
    manifest = json.loads((tmp_path / "ct-int" / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["exit_code"] == 130
    assert all(h["state"] == "failed" and h["error"] == "interrupted" for h in manifest["hosts"])
    assert len(manifest["processes"]) == 2 and all(p["error"] for p in manifest["processes"])
    # the traces were cancelled on the daemons, so the trainers are free for the next request
    for d in (job.open, job.locked):
        status = wait_for(lambda d=d: (s := _trace_state(d, "ct-int")) is not None and s.finished and s, 15, 0.1)
        assert {p.state for p in status.processes} == {dyno_pb2.TRACE_STATE_CANCELLED}


# Must stay the last test of the module: it stops a daemon.
def test_daemon_stopped_mid_run_is_partial(job: Job, tmp_path: Path) -> None:
    cli = _start_cli(
        job, tmp_path, "--duration-ms", "2500", "--start-delay-s", "0.5", "--trace-id", "ct-stop",
        "--call-timeout-s", "2", "--json",
    )  # fmt: skip
    try:
        _wait_running(job.locked, "ct-stop")
        job.locked.stop()
        out, err = cli.communicate(timeout=90)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 3, out + err
    result = json.loads(out)
    assert result["status"] == "partial" and not result["ok"]
    open_host, stopped = result["hosts"]
    assert open_host["state"] == "done"
    assert stopped["state"] == "failed" and stopped["error_type"] in ("Unavailable", "NotFound")
    by_host = {p["host"]: p for p in result["processes"]}
    assert by_host[job.open.target]["fetch"] == "fetched"
    assert by_host[job.locked.target]["fetch"] != "fetched" and by_host[job.locked.target]["error"]
    assert f"{job.locked.target}:" in err  # listed with its reason
    _check_files(tmp_path / "ct-stop", result)
    assert [r["rank"] for r in result["report"]["ranks"]] == [0]  # the rest was analyzed
    assert json.loads((tmp_path / "ct-stop" / "manifest.json").read_text())["status"] == "partial"
