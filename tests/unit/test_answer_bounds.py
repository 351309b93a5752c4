"""Every unary answer of the Dyno service fits a stock client's 4 MiB (grpcio's default receive limit): a daemon with
thousands of registered processes, each with a long command line, answered ListProcesses with ~17 MB (or refused
it past 16 MiB), and a
job-wide trace's TraceStatus with long error texts was as big. Real grpc server on 127.0.0.1 port 0, grpcio's
generated stub with its default options."""

from __future__ import annotations

from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from fake_proc import no_proc_identifier

from dyno.daemon.answer_bounds import ELLIPSIS, fit_texts
from dyno.daemon.history import History
from dyno.daemon.registry import MAX_PROCESSES, PROTOCOL_AGENT, ProcessRecord, ProcessRegistry
from dyno.daemon.server import DynoServicer, add_to_server
from dyno.daemon.trace_manager import TraceManager
from dyno.daemon.trace_service import TraceRpcs
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

pytestmark = pytest.mark.unit


def _full_registry(n: int) -> TraceRpcs:
    """The trace RPCs of a registry of `n` processes with 4 KiB command lines (the agent's bound)."""
    registry = ProcessRegistry(is_alive=lambda pid: True, max_processes=n, max_per_uid=n)
    for pid in range(1, n + 1):
        cmdline = f"python train.py {pid} " + "x" * 4000
        registry.register(ProcessRecord(pid=pid, job_id="j" * 128, protocol=PROTOCOL_AGENT, cmdline=cmdline))
    manager = TraceManager(registry, Path("/nonexistent/traces"), "n", kineto_identifier=no_proc_identifier())
    return TraceRpcs(manager, registry, "n")


class _HugeTraceRpcs:
    """GetTrace of a job-wide trace of MAX_PROCESSES processes with long texts; the registry's ListProcesses."""

    def __init__(self, processes: int) -> None:
        rpcs = _full_registry(processes)
        self.ListProcesses, self.ListProcessesEncoded = rpcs.ListProcesses, rpcs.ListProcessesEncoded

    def GetTrace(self, request: Any, context: grpc.ServicerContext) -> Any:
        procs = [
            dyno_pb2.ProcessTrace(pid=p, path=f"/var/lib/dyno/traces/t/{p}.json", error="é" * 2048, waiting="w" * 4096)
            for p in range(1, MAX_PROCESSES + 1)
        ]
        return dyno_pb2.TraceStatus(trace_id=request.trace_id, processes=procs)

    StartTrace = CancelTrace = FetchTraceFile = GetTrace


@pytest.mark.parametrize("processes", [MAX_PROCESSES, 20_000])
def test_huge_answers_fit_a_stock_stub_with_every_process_listed(processes: int) -> None:
    """MAX_PROCESSES: the default registry cap, in one answer; 20,000 (--max-processes allows 65536): in pages."""
    servicer = DynoServicer(lambda: dyno_pb2.Status(), History(2), "n", _HugeTraceRpcs(processes))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    add_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = dyno_pb2_grpc.DynoStub(channel)
            pages = [stub.ListProcesses(dyno_pb2.ListProcessesRequest(), timeout=30)]
            while pages[-1].next_page_token:
                request = dyno_pb2.ListProcessesRequest(page_token=pages[-1].next_page_token)
                pages.append(stub.ListProcesses(request, timeout=30))
            trace = stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id="t"), timeout=30)
    finally:
        server.stop(0)
    assert len(pages) == 1 if processes == MAX_PROCESSES else 2 <= len(pages) <= 5
    procs = [p for page in pages for p in page.processes]
    assert [p.pid for p in procs] == list(range(1, processes + 1))
    assert all(p.job_id == "j" * 128 and p.cmdline.endswith(ELLIPSIS) for p in procs)
    assert procs[0].cmdline.startswith("python train.py 1 ")
    assert len(trace.processes) == MAX_PROCESSES and trace.processes[-1].path.endswith(f"/{MAX_PROCESSES}.json")
    assert all(p.error.endswith(ELLIPSIS) and p.error.startswith("é") for p in trace.processes)


def test_an_answer_within_the_bound_is_left_as_it_is() -> None:
    answer = dyno_pb2.ListProcessesResponse(processes=[dyno_pb2.ProcessInfo(pid=1, cmdline="x" * 5000)])
    assert not fit_texts(answer, "processes", ("cmdline",), 10_000)
    assert answer.processes[0].cmdline == "x" * 5000
    assert fit_texts(answer, "processes", ("cmdline",), 1000)
    assert answer.ByteSize() <= 1000 and answer.processes[0].cmdline.endswith(ELLIPSIS)
