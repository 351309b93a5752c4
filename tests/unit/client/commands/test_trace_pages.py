"""`dyno-cli trace` and `dyno-cli fetch` on a trace whose GetTrace answers come in pages (dyno.daemon.tracing.pages):
every process's file is fetched, as from a trace of one page. Against a real gRPC server on 127.0.0.1 port 0 with
dynod's trace RPCs and trace manager, its page bound made small so that 40 processes take several pages; a thread
plays the processes' agents (writes each file, reports it done)."""

from __future__ import annotations

import gzip
import json
import os
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from fake_proc import no_proc_identifier

from dyno.client.cli import main as cli_main
from dyno.daemon.history import History
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.server import DynoServicer, add_to_server
from dyno.daemon.tracing import service as trace_service
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.service import TraceRpcs
from dyno.daemon.tracing.values import TraceState, UnknownTraceError
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit

PIDS = range(1001, 1041)
TRACE = b'{"traceEvents": []}\n'


def _agents(manager: TraceManager, trace_id: str, stop: threading.Event) -> None:
    """Each process of `trace_id`, once it is in the trace: its file written, its trace reported done."""
    done: set[int] = set()
    while not stop.wait(0.05):
        try:
            view = manager.get(trace_id)
        except UnknownTraceError:
            continue
        for p in view.processes:
            if p.pid not in done:
                Path(p.path).write_bytes(gzip.compress(TRACE))
                manager.agent_report(p.pid, trace_id, TraceState.DONE)
                done.add(p.pid)


@pytest.fixture
def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(trace_service, "MAX_PROCESS_LIST_BYTES", 2500)  # ~15 processes a page
    registry = ProcessRegistry(is_alive=lambda pid: True, uid_of=lambda pid: os.getuid())
    for pid in PIDS:
        registry.register(RegisteredProcess(pid=pid, job_id="J", protocol=PROTOCOL_AGENT, cmdline="python train.py"))
    manager = TraceManager(registry, tmp_path / "traces", "node1", kineto_identifier=no_proc_identifier())
    status = dyno_pb2.Status(hostname="node1", version="0")
    servicer = DynoServicer(lambda: status, History(2), "node1", TraceRpcs(manager, registry, "node1"))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    add_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    stop = threading.Event()
    agents = threading.Thread(target=_agents, args=(manager, "paged", stop), daemon=True)
    agents.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        stop.set()
        agents.join()
        server.stop(0)


def _fetched(out: Path, target: str) -> list[str]:
    host_dir = out / "paged" / target.replace(":", "_")
    return sorted(p.name for p in host_dir.iterdir() if gzip.decompress(p.read_bytes()) == TRACE)


def test_trace_and_fetch_get_every_file_of_a_paged_trace(
    daemon: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["trace", "--host", daemon, "--job-id", "J", "--duration-ms", "100", "--start-delay-s", "0"]
    code = cli_main([*argv, "--trace-id", "paged", "--no-analyze", "--output-dir", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert code == 0, err
    want = [f"node1_{pid}.pt.trace.json.gz" for pid in PIDS]
    assert _fetched(tmp_path / "a", daemon) == want
    manifest = json.loads((tmp_path / "a" / "paged" / "manifest.json").read_text())
    assert sorted(p["pid"] for p in manifest["processes"]) == list(PIDS)

    code = cli_main(["fetch", "--host", daemon, "--trace-id", "paged", "--output-dir", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert code == 0, err
    assert _fetched(tmp_path / "b", daemon) == want
