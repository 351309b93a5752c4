"""Every unary answer of the Dyno service fits a stock client's 4 MiB (grpcio's default receive limit): a daemon with
thousands of registered processes, each with a long command line, answered ListProcesses with ~17 MB, and a
job-wide trace's TraceStatus with long error texts was as big. Real grpc server on 127.0.0.1 port 0, grpcio's
generated stub with its default options."""

from __future__ import annotations

from concurrent import futures
from typing import Any

import grpc
import pytest

from dyno.daemon.answer_bounds import ELLIPSIS, fit_texts
from dyno.daemon.history import History
from dyno.daemon.registry import MAX_PROCESSES
from dyno.daemon.server import DynoServicer, add_to_server
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

pytestmark = pytest.mark.unit


class _HugeTraceRpcs:
    """The trace RPCs of a full registry: MAX_PROCESSES processes with 4 KiB texts (the agent's bound)."""

    def ListProcesses(self, request: Any, context: grpc.ServicerContext) -> Any:
        return dyno_pb2.ListProcessesResponse(
            hostname="n",
            processes=[
                dyno_pb2.ProcessInfo(pid=p, job_id="j" * 128, cmdline=f"python train.py {p} " + "x" * 4096)
                for p in range(1, MAX_PROCESSES + 1)
            ],
        )

    def GetTrace(self, request: Any, context: grpc.ServicerContext) -> Any:
        procs = [
            dyno_pb2.ProcessTrace(pid=p, path=f"/var/lib/dyno/traces/t/{p}.json", error="é" * 2048, waiting="w" * 4096)
            for p in range(1, MAX_PROCESSES + 1)
        ]
        return dyno_pb2.TraceStatus(trace_id=request.trace_id, processes=procs)

    StartTrace = CancelTrace = FetchTraceFile = GetTrace


def test_huge_answers_fit_a_stock_stub_with_every_process_listed() -> None:
    servicer = DynoServicer(lambda: dyno_pb2.Status(), History(2), "n", _HugeTraceRpcs())
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    add_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = dyno_pb2_grpc.DynoStub(channel)
            procs = stub.ListProcesses(dyno_pb2.ListProcessesRequest(), timeout=30)
            trace = stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id="t"), timeout=30)
    finally:
        server.stop(0)
    assert [p.pid for p in procs.processes] == list(range(1, MAX_PROCESSES + 1))
    assert all(p.job_id == "j" * 128 and p.cmdline.endswith(ELLIPSIS) for p in procs.processes)
    assert procs.processes[0].cmdline.startswith("python train.py 1 ")
    assert len(trace.processes) == MAX_PROCESSES and trace.processes[-1].path.endswith(f"/{MAX_PROCESSES}.json")
    assert all(p.error.endswith(ELLIPSIS) and p.error.startswith("é") for p in trace.processes)


def test_an_answer_within_the_bound_is_left_as_it_is() -> None:
    answer = dyno_pb2.ListProcessesResponse(processes=[dyno_pb2.ProcessInfo(pid=1, cmdline="x" * 5000)])
    assert not fit_texts(answer, "processes", ("cmdline",), 10_000)
    assert answer.processes[0].cmdline == "x" * 5000
    assert fit_texts(answer, "processes", ("cmdline",), 1000)
    assert answer.ByteSize() <= 1000 and answer.processes[0].cmdline.endswith(ELLIPSIS)
