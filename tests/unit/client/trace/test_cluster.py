"""ClusterTrace (dyno.client.trace.cluster), its manifest and its progress views, against in-process fake daemons."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from dyno.client.cli import main as cli_main
from dyno.client.client import DynoClient
from dyno.client.cluster import Cluster
from dyno.client.hosts import Host
from dyno.client.trace.cluster import ClusterTrace, start_trace_retrying
from dyno.client.trace.manifest import MANIFEST_NAME, build_manifest, read_manifest, write_manifest
from dyno.client.trace.progress import PlainProgress, RichProgress
from dyno.client.trace.records import HostRecord, ProcRecord, host_dir_name, trace_exit_code
from dyno.daemon.fake_server import FAKE_TRACE_FILE, FakeDynoServicer, FakeServer, serve, whole_file_chunk
from dyno.daemon.rpc_abort import abort
from dyno.error_reasons import ErrorReason
from dyno.filechunks import checksum_of, new_digest
from dyno.v1 import dyno_pb2

from conftest import free_port

pytestmark = pytest.mark.unit

DONE, RUNNING, CANCELLED = dyno_pb2.TRACE_STATE_DONE, dyno_pb2.TRACE_STATE_RUNNING, dyno_pb2.TRACE_STATE_CANCELLED


class TracingServicer(FakeDynoServicer):
    """Two ranks per host. `finish=True`: GetTrace says done and files can be fetched; else the traces run until
    CancelTrace."""

    def __init__(self, hostname: str, finish: bool) -> None:
        super().__init__(hostname)
        self.finish = finish
        self.cancelled = threading.Event()

    def _content(self, pid: int) -> bytes:
        return json.dumps({"traceEvents": [], "host": self.hostname, "pid": pid}).encode()

    def _status(self, trace_id: str) -> dyno_pb2.TraceStatus:
        state = DONE if self.finish else (CANCELLED if self.cancelled.is_set() else RUNNING)
        procs = [
            dyno_pb2.ProcessTrace(
                pid=p.pid,
                rank=p.rank,
                state=state,
                size_bytes=len(self._content(p.pid)) if state == DONE else 0,
                error="cancelled" if state == CANCELLED else "",
            )
            for p in self._processes()
        ]
        return dyno_pb2.TraceStatus(
            trace_id=trace_id, processes=procs, finished=state != RUNNING, hostname=self.hostname
        )

    def GetTrace(self, request, context):  # noqa: N802 - grpc method name
        return self._status(request.trace_id)

    def CancelTrace(self, request, context):  # noqa: N802
        self.cancelled.set()
        return self._status(request.trace_id)

    def FetchTraceFile(self, request, context) -> Iterator[dyno_pb2.FileChunk]:  # noqa: N802
        data = self._content(request.pid)
        yield whole_file_chunk(data, f"{self.hostname}_{request.pid}.json")


class LostReplyServicer(TracingServicer):
    """Its first StartTrace is carried out but the reply is lost (UNAVAILABLE); a repeat of the id is refused as
    the daemon does."""

    def __init__(self, hostname: str, finish: bool) -> None:
        super().__init__(hostname, finish)
        self.started: set[str] = set()

    def StartTrace(self, request, context):  # noqa: N802
        if request.trace_id in self.started:
            abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"trace_id: {request.trace_id!r} is already in use",
                ErrorReason.TRACE_ID_IN_USE,
            )
        self.started.add(request.trace_id)
        context.abort(grpc.StatusCode.UNAVAILABLE, "connection reset")


@pytest.fixture
def fakes() -> Iterator:
    pool = futures.ThreadPoolExecutor(max_workers=16)
    servers: list[grpc.Server] = []

    def make(finish: bool = True, cls: type[TracingServicer] = TracingServicer) -> tuple[Host, TracingServicer]:
        name = f"node{len(servers)}"
        fake = serve(lambda _port: cls(name, finish), executor=pool)
        servers.append(fake.server)
        return Host("127.0.0.1", fake.port), fake.servicer

    yield make
    for s in servers:
        s.stop(0)
    pool.shutdown()


def _request(trace_id: str = "t-unit") -> dyno_pb2.TraceRequest:
    return dyno_pb2.TraceRequest(job_id="job1", trace_id=trace_id, duration_ms=100)


def test_every_host_fetched_into_its_folder_and_a_dead_host_reported(fakes, tmp_path: Path) -> None:
    (a, _), (b, _) = fakes(), fakes()
    dead = Host("127.0.0.1", free_port())
    with Cluster([a, dead, b], deadline_s=2) as cluster:
        ct = ClusterTrace(cluster, _request(), tmp_path / "t-unit", wait_s=10, unreachable_s=1, poll_s=0.05)
        ct.start()
        assert ct.triggered_any
        ct.follow()
        assert ct.wait(20)
    hosts = ct.snapshot()
    assert [h.state for h in hosts] == ["done", "failed", "done"]
    assert hosts[1].error_type == "Unavailable" and not hosts[1].processes
    files = ct.fetched_files()
    assert len(files) == 4
    for h in (hosts[0], hosts[2]):
        assert [p.rank for p in h.processes] == [0, 1]
        for p in h.processes:
            path = tmp_path / "t-unit" / p.file
            assert path.parent.name == host_dir_name(h.host) == f"127.0.0.1_{h.host.port}"
            assert checksum_of(new_digest(path.read_bytes())) == p.checksum
            assert json.loads(path.read_text())["pid"] == p.pid
    assert trace_exit_code(hosts) == 3


def test_unfinished_traces_are_cancelled_after_the_wait(fakes, tmp_path: Path) -> None:
    host, servicer = fakes(finish=False)
    with Cluster([host], deadline_s=2) as cluster:
        ct = ClusterTrace(cluster, _request(), tmp_path, wait_s=0.3, poll_s=0.05)
        ct.start()
        ct.follow()
        assert ct.wait(10)
    assert servicer.cancelled.is_set()
    (h,) = ct.snapshot()
    assert h.state == "done" and {p.state for p in h.processes} == {"cancelled"}
    assert all(p.error for p in h.processes) and ct.fetched_files() == []
    assert trace_exit_code([h]) == 1


def test_interrupt_cancels_and_marks_what_did_not_arrive(fakes, tmp_path: Path) -> None:
    host, servicer = fakes(finish=False)
    with Cluster([host], deadline_s=2) as cluster:
        ct = ClusterTrace(cluster, _request(), tmp_path, wait_s=60, poll_s=0.05)
        ct.start()
        ct.follow()
        ct.interrupt(grace_s=2)
    (h,) = ct.snapshot()
    assert servicer.cancelled.is_set() and h.state == "failed" and h.error == "interrupted"
    assert all(p.error for p in h.processes)


def test_start_is_retried_safely_when_the_reply_is_lost(fakes) -> None:
    host, servicer = fakes(cls=LostReplyServicer)
    with DynoClient(host.target, timeout_s=5) as c:
        resp = start_trace_retrying(c, _request("t-lost"))
    assert servicer.started == {"t-lost"}  # carried out once
    assert resp.trace_id == "t-lost" and [p.pid for p in resp.triggered] == [1000, 1001]
    assert "after a retry" in resp.message


def test_a_trace_needs_a_caller_chosen_id() -> None:
    with Cluster(["a"]) as cluster, pytest.raises(ValueError):
        ClusterTrace(cluster, dyno_pb2.TraceRequest(job_id="j", duration_ms=1), Path("/tmp"), wait_s=1)


def _host(name: str, state: str, *procs: ProcRecord, error: str = "") -> HostRecord:
    h = HostRecord(Host(name), host_dir_name(Host(name)), state=state, error=error)
    h.processes = list(procs)
    h.matched_pids = [p.pid for p in procs]
    return h


def _fetched(pid: int) -> ProcRecord:
    return ProcRecord(pid, rank=pid, state="done", fetch="fetched", file=f"x/{pid}.json", fetched_bytes=10)


def test_exit_codes() -> None:
    assert trace_exit_code([_host("a", "done", _fetched(1)), _host("b", "done", _fetched(2))]) == 0
    assert trace_exit_code([_host("a", "done", _fetched(1)), _host("b", "failed", error="x")]) == 3
    assert trace_exit_code([_host("a", "done", _fetched(1)), _host("b", "no_match", error="none")]) == 3
    failed = ProcRecord(2, state="failed", error="boom")
    assert trace_exit_code([_host("a", "done", _fetched(1), failed)]) == 3
    assert trace_exit_code([_host("a", "done", failed)]) == 1
    assert host_dir_name(Host("::1", 1778)) == "__1_1778"


def test_manifest_is_written_atomically_with_errors_listed(tmp_path: Path) -> None:
    hosts = [
        _host("a", "done", _fetched(1), ProcRecord(2, state="failed", error="no optimizer step")),
        _host("b", "failed", ProcRecord(3, state="lost", error="gone"), error="cannot reach dynod"),
    ]
    hosts[1].error_type = "Unavailable"
    m = build_manifest(
        trace_id="t1",
        request={"job_id": "j", "trace_id": "t1", "start_time_ms": "1700000000000"},
        hosts=hosts,
        status="partial",
        requested_ms=1699999994000,
        start_fanout_s=0.01,
        exit_code=3,
        finished_ms=1700000001000,
    )
    write_manifest(tmp_path, m)
    write_manifest(tmp_path, {**m, "status": "partial"})  # replaced in place
    assert [p.name for p in tmp_path.iterdir()] == [MANIFEST_NAME]  # no temp file left behind
    back = read_manifest(tmp_path)
    assert back["schema"] == "dyno.trace-manifest" and back["version"] == 1 and back["job_id"] == "j"
    assert back["timings"]["start_time_ms"] == 1700000000000 and back["timings"]["elapsed_s"] == 7.0
    assert back["summary"] == {"hosts": 2, "hosts_failed": 1, "processes": 3, "fetched": 1, "bytes": 10}
    assert back["errors"] == ["b:1778: cannot reach dynod (Unavailable)", "a:1778 pid 2: no optimizer step"]
    assert [p["host"] for p in back["processes"]] == ["a:1778", "a:1778", "b:1778"]


def test_plain_progress_prints_host_changes_and_periodic_totals() -> None:
    out = io.StringIO()
    now = [0.0]
    view = PlainProgress(out, every_s=2.0, clock=lambda: now[0])
    tracing = _host("a", "tracing", ProcRecord(1, state="running"))
    view.update([tracing, _host("b", "failed", error="cannot reach dynod")])
    now[0] = 1.0
    view.update([tracing])  # nothing changed, no total yet
    now[0] = 2.5
    view.close([_host("a", "done", _fetched(1))])
    lines = out.getvalue().splitlines()
    assert lines[0] == "  a:1778: tracing 1 process(es), pids 1"
    assert lines[1] == "  b:1778: failed: cannot reach dynod"
    assert lines[2].startswith("[   0.0s] hosts: 1 tracing, 1 failed | processes: 1 matched, 1 running")
    assert lines[3].startswith("  a:1778: done, 1 file(s) fetched")
    assert lines[4].startswith("[   2.5s] hosts: 1 done") and "fetched 1 file(s), 10 B" in lines[4]
    assert len(lines) == 5


def test_rich_progress_draws_one_row_per_host() -> None:
    out = io.StringIO()
    view = RichProgress(out, "trace t1 (job j)")
    view._console.width = 150
    hosts = [_host("a", "done", _fetched(1)), _host("bad", "failed", error="cannot reach dynod")]
    view.update(hosts)
    view.close(hosts)
    text = out.getvalue()
    assert "trace t1 (job j)" in text and "REASON" in text
    row = next(line for line in text.splitlines() if "bad:1778" in line)
    assert "failed" in row and "cannot reach dynod" in row


# A host whose StartTrace reply comes after --call-timeout-s is confirmed with GetTrace and followed; one that never
# got the request stays failed. Real gRPC servers on loopback.


class LateReply(FakeDynoServicer):
    """StartTrace starts the trace at once (if `starts`) and replies 1.5 s later; GetTrace: its one process done."""

    def __init__(self, starts: bool = True) -> None:
        super().__init__("fake-late", nprocs=1)
        self.starts = starts
        self.started: set[str] = set()
        self.lock = threading.Lock()

    def StartTrace(self, request, context):  # noqa: N802 - grpc method name
        if self.starts:
            with self.lock:
                self.started.add(request.trace_id)
        time.sleep(1.5)
        return super().StartTrace(request, context)

    def GetTrace(self, request, context):  # noqa: N802
        with self.lock:
            known = request.trace_id in self.started
        if not known:
            abort(context, grpc.StatusCode.NOT_FOUND, f"no trace {request.trace_id!r}")
        return self.done_status(request.trace_id)


@pytest.fixture
def late() -> Iterator[FakeServer[LateReply]]:
    fake = serve(lambda _port: LateReply())
    yield fake
    fake.server.stop(0)


def _trace(target: str, out: Path) -> int:
    argv = ["trace", "--host", target, "--job-id", "job1", "--duration-ms", "100", "--start-delay-s", "0"]
    return cli_main(
        [*argv, "--call-timeout-s", "1", "--trace-id", "t-late", "--no-analyze", "--json", "--output-dir", str(out)]
    )


def test_a_trace_started_despite_a_late_reply_is_followed_and_fetched(
    late: FakeServer[LateReply], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _trace(late.target, tmp_path) == 0
    answer = json.loads(capsys.readouterr().out)
    (host,) = answer["hosts"]
    assert host["state"] == "done" and "confirmed by GetTrace" in host["message"]
    (proc,) = answer["processes"]
    assert proc["fetch"] == "fetched" and Path(proc["path"]).read_bytes() == FAKE_TRACE_FILE


def test_a_late_reply_that_started_nothing_stays_failed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = serve(lambda _port: LateReply(starts=False))
    try:
        assert _trace(fake.target, tmp_path) == 1
    finally:
        fake.server.stop(0)
    (host,) = json.loads(capsys.readouterr().out)["hosts"]
    assert host["state"] == "failed" and host["error_type"] == "DeadlineExceeded"
