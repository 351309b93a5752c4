"""Request size on dynod's gRPC servers: any client that reaches the TCP port may call the read-only RPCs (no
token), and any local user the agent socket. With grpc's default 4 MiB per message, 64 clients sending 3 MB requests
took dynod to 620 MB (its unit's MemoryMax is 512M). Requests are now capped at connection_limits.MAX_REQUEST_BYTES
(~5x the largest valid request), which the largest valid requests stay well under."""

from __future__ import annotations

import functools
import os
import random
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from small_daemon import small_daemon

from dyno.daemon.app import Daemon
from dyno.daemon.connection_limits import MAX_REQUEST_BYTES
from dyno.request_limits import MAX_JOB_ID, MAX_NAME_PATTERN_LEN, MAX_NAME_PATTERNS, MAX_PIDS
from dyno.v1 import agent_pb2, agent_pb2_grpc, dyno_pb2, dyno_pb2_grpc

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    # sampling every 20 ms: the fuzz opens 120 metric streams, each waiting for the next sample
    with small_daemon("dyno-seclim-", interval_s=0.02) as daemon:
        yield daemon


def _code(call: object) -> grpc.StatusCode:
    try:
        call()  # type: ignore[operator]
    except grpc.RpcError as e:
        return e.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


_BIG = {("grpc.max_send_message_length", 8 << 20)}  # the client would refuse to send it otherwise


def test_an_oversized_request_is_refused_on_the_tcp_port(daemon: Daemon) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}", options=list(_BIG)) as ch:
        stub = dyno_pb2_grpc.DynoStub(ch)
        huge = dyno_pb2.GetMetricsRequest(names=["x" * 1000] * (MAX_REQUEST_BYTES // 1000 + 10))
        assert huge.ByteSize() > MAX_REQUEST_BYTES
        assert _code(lambda: stub.GetMetrics(huge, timeout=10)) == grpc.StatusCode.RESOURCE_EXHAUSTED
        # the largest valid requests pass
        widest = dyno_pb2.GetMetricsRequest(names=["y" * MAX_NAME_PATTERN_LEN] * MAX_NAME_PATTERNS, limit=1)
        assert _code(lambda: stub.GetMetrics(widest, timeout=10)) == grpc.StatusCode.OK
        most = dyno_pb2.TraceRequest(job_id="j" * MAX_JOB_ID, pids=[2**31 - 1] * MAX_PIDS, duration_ms=100)
        assert most.ByteSize() < MAX_REQUEST_BYTES // 10
        assert _code(lambda: stub.StartTrace(most, timeout=10)) == grpc.StatusCode.OK  # nothing matched: a message


def test_an_oversized_request_is_refused_on_the_agent_socket(daemon: Daemon) -> None:
    with grpc.insecure_channel(f"unix:{daemon.config.agent_socket_path}", options=list(_BIG)) as ch:
        stub = agent_pb2_grpc.AgentStub(ch)
        huge = agent_pb2.RegisterRequest(pid=os.getpid(), cmdline="c" * (MAX_REQUEST_BYTES + 1))
        assert _code(lambda: stub.Register(huge, timeout=10)) == grpc.StatusCode.RESOURCE_EXHAUSTED
        ok = agent_pb2.RegisterRequest(pid=os.getpid(), job_id="j", cmdline="c" * 4096, ancestry=[1] * 64)
        assert stub.Register(ok, timeout=10).session_id


def _first(stream: Any) -> None:
    next(stream)
    stream.cancel()


_CLEAN = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def test_boundary_and_random_dyno_requests_get_a_clean_answer(daemon: Daemon) -> None:
    """Every request field of the Dyno service at its limits, beyond them, and random: each call is answered with a
    status of its own (a handler that raised would answer UNKNOWN), no file outside the trace dir is served, and the
    daemon answers as before afterwards. A process is registered, so trace requests reach the trace manager."""
    rng = random.Random(7)
    ints32 = [0, 1, -1, 2**31 - 1, -(2**31), os.getpid()]
    ints64 = [0, -1, 2**63 - 1, -(2**63), 1, 10**13]
    texts = ["", "..", "../../etc/passwd", "/etc/passwd", "a/b", "x" * 65, "t" * 64, "\u00e9\u202e", "*", "[", "j\n"]
    with grpc.insecure_channel(f"unix:{daemon.config.agent_socket_path}") as ach:
        agent_pb2_grpc.AgentStub(ach).Register(agent_pb2.RegisterRequest(pid=os.getpid(), job_id="fz"), timeout=10)
    codes: list[grpc.StatusCode] = []
    fetches: list[grpc.StatusCode] = []
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as ch:
        stub = dyno_pb2_grpc.DynoStub(ch)
        for _ in range(120):
            names = [rng.choice(texts) for _ in range(rng.choice([0, 1, 3, 257]))]
            req = dyno_pb2.GetMetricsRequest(names=names, since_ms=rng.choice(ints64), limit=rng.choice(ints32))
            codes.append(_code(functools.partial(stub.GetMetrics, req, timeout=10)))
            stream = stub.StreamMetrics(dyno_pb2.StreamMetricsRequest(names=names), timeout=10)
            codes.append(_code(functools.partial(_first, stream)))
            listing = dyno_pb2.ListProcessesRequest(job_id=rng.choice(texts))
            codes.append(_code(functools.partial(stub.ListProcesses, listing, timeout=10)))
            jobs = dyno_pb2.ListJobsRequest(
                since_ms=rng.choice(ints64),
                until_ms=rng.choice(ints64),
                job_id=rng.choice([*texts, "j" * 200]),
                user=rng.choice(texts),
                running_only=rng.random() < 0.5,
                page_size=rng.choice(ints32),
                page_token=rng.choice([*texts, "j1:1", "j1:" + "9" * 19, "j1:" + "9" * 40, "j1:-1"]),
            )
            codes.append(_code(functools.partial(stub.ListJobs, jobs, timeout=10)))
            spec = dyno_pb2.TraceRequest(
                job_id=rng.choice(["fz", *texts]),
                pids=[rng.choice(ints32) for _ in range(rng.choice([0, 1, 1025]))],
                process_limit=rng.choice(ints32),
                trace_id=rng.choice(texts),
            )
            if rng.random() < 0.5:
                spec.duration_ms = rng.choice(ints64)
            else:
                spec.iterations = rng.choice(ints32)
            if rng.random() < 0.5:
                spec.start_time_ms = rng.choice(ints64)
            else:
                spec.start_iteration_roundup = rng.choice(ints32)
            codes.append(_code(functools.partial(stub.StartTrace, spec, timeout=10)))
            tid = rng.choice(texts)
            codes.append(_code(functools.partial(stub.GetTrace, dyno_pb2.GetTraceRequest(trace_id=tid), timeout=10)))
            cancel = dyno_pb2.CancelTraceRequest(trace_id=tid)
            codes.append(_code(functools.partial(stub.CancelTrace, cancel, timeout=10)))
            fetch = dyno_pb2.FetchTraceFileRequest(
                trace_id=tid, pid=rng.choice(ints32), chunk_size=rng.choice([0, 1, 2**20, 2**20 + 1, 2**32 - 1])
            )
            fetches.append(_code(functools.partial(list, stub.FetchTraceFile(fetch, timeout=10))))
        raw = [b"\xff" * 9, bytes(rng.getrandbits(8) for _ in range(200)), b"\x0a\xff\xff\xff\xff\x0f"]
        for method in ("GetMetrics", "StartTrace", "GetTrace", "ListProcesses", "ListJobs"):
            call = ch.unary_unary(f"/dyno.v1.Dyno/{method}", request_serializer=None, response_deserializer=None)
            for body in raw:
                codes.append(_code(functools.partial(call, body, timeout=10)))
        unexpected = {c for c in codes + fetches if c not in _CLEAN}  # unparsable bodies too: never INTERNAL
        assert unexpected == set()
        assert grpc.StatusCode.OK in codes
        assert grpc.StatusCode.OK not in fetches  # no trace has a file: nothing was served, whatever the id
        assert stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=10).hostname == daemon.hostname
