"""Calls one dynod as whichever user runs it (test_security_local_users runs it as `nobody`), and prints what came
back as one JSON line: {"code": grpc status name, "detail": ..., plus the answer's fields}.

    local_user_calls.py TARGET list
    local_user_calls.py TARGET jobs [USER]
    local_user_calls.py TARGET start JOB_ID
    local_user_calls.py TARGET cancel TRACE_ID
    local_user_calls.py TARGET get TRACE_ID
    local_user_calls.py TARGET fetch TRACE_ID PID
    local_user_calls.py TARGET register AGENT_SOCKET PID JOB_ID
    local_user_calls.py TARGET own AGENT_SOCKET JOB_ID
    local_user_calls.py TARGET read PATH

`own` registers this process (an agent's Register and Watch) and traces its own job twice: the first trace as an
agent would (the file written where the command says, DONE reported, then fetched), the second cancelled. `read`
reads a file from disk.
"""

from __future__ import annotations

import errno
import json
import os
import queue
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from dyno.error_reasons import reason_of
from dyno.v1 import agent_pb2, agent_pb2_grpc, dyno_pb2, dyno_pb2_grpc


def _call(fn: Any, request: Any) -> tuple[str, str, Any]:
    try:
        return "OK", "", fn(request, timeout=10)
    except grpc.RpcError as e:
        return e.code().name, e.details() or "", None


def read_watch(watch: Any, on_trace: Callable[[Any], None] = lambda _config: None) -> threading.Thread:
    """Read an agent's Watch stream on a daemon thread until it ends (cancelled, or the daemon gone), handing each
    trace command's TraceConfig to `on_trace`: what keeps a trainer's registration, as its agent does."""

    def read() -> None:
        try:
            for cmd in watch:
                if cmd.HasField("trace"):
                    on_trace(cmd.trace)
        except grpc.RpcError:
            pass  # cancelled by its owner, or the daemon stopped

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


def main(argv: list[str]) -> dict[str, Any]:
    target, action, args = argv[0], argv[1], argv[2:]
    dyno = dyno_pb2_grpc.DynoStub(grpc.insecure_channel(target))
    if action == "list":
        code, detail, answer = _call(dyno.ListProcesses, dyno_pb2.ListProcessesRequest())
        procs = [{"pid": p.pid, "cmdline": p.cmdline} for p in answer.processes] if answer else []
        return {"code": code, "detail": detail, "processes": procs}
    if action == "jobs":
        request = dyno_pb2.ListJobsRequest(user=args[0] if args else "")
        code, detail, answer = _call(dyno.ListJobs, request)
        jobs = [[j.job_id, j.user] for j in answer.jobs] if answer else []
        return {"code": code, "detail": detail, "jobs": jobs}
    if action == "start":
        code, detail, answer = _call(dyno.StartTrace, dyno_pb2.TraceRequest(job_id=args[0], duration_ms=60000))
        if answer is None:
            return {"code": code, "detail": detail}
        triggered = [p.pid for p in answer.triggered]
        return {"code": code, "trace_id": answer.trace_id, "triggered": triggered, "message": answer.message}
    if action == "cancel":
        code, detail, _ = _call(dyno.CancelTrace, dyno_pb2.CancelTraceRequest(trace_id=args[0]))
        return {"code": code, "detail": detail}
    if action == "get":
        code, detail, answer = _call(dyno.GetTrace, dyno_pb2.GetTraceRequest(trace_id=args[0]))
        pids = [p.pid for p in answer.processes] if answer else []
        return {"code": code, "detail": detail, "pids": pids, "finished": bool(answer and answer.finished)}
    if action == "fetch":
        request = dyno_pb2.FetchTraceFileRequest(trace_id=args[0], pid=int(args[1]))
        try:
            data = b"".join(c.data for c in dyno.FetchTraceFile(request, timeout=10))
            return {"code": "OK", "detail": "", "bytes": len(data)}
        except grpc.RpcError as e:
            return {"code": e.code().name, "detail": e.details() or ""}
    if action == "read":
        try:
            with open(args[0], "rb") as f:
                return {"code": "OK", "bytes": len(f.read())}
        except OSError as e:
            return {"code": errno.errorcode.get(e.errno or 0, "OSError"), "detail": str(e)}
    agent = agent_pb2_grpc.AgentStub(grpc.insecure_channel(f"unix:{args[0]}"))
    if action == "register":
        try:
            agent.Register(agent_pb2.RegisterRequest(pid=int(args[1]), job_id=args[2]), timeout=10)
            return {"code": "OK", "detail": "", "reason": ""}
        except grpc.RpcError as e:
            return {"code": e.code().name, "detail": e.details() or "", "reason": reason_of(e.trailing_metadata())}
    if action == "own":
        return _own(dyno, agent, args[1])
    raise SystemExit(f"unknown action {action!r}")


def _own(dyno: Any, agent: Any, job_id: str) -> dict[str, Any]:
    pid = os.getpid()
    code, detail, reg = _call(agent.Register, agent_pb2.RegisterRequest(pid=pid, job_id=job_id, cmdline="own job"))
    if reg is None:
        return {"code": code, "detail": f"register: {detail}"}
    commands: queue.Queue[Any] = queue.Queue()
    watch = agent.Watch(agent_pb2.WatchRequest(pid=pid, session_id=reg.session_id))
    read_watch(watch, commands.put)
    out: dict[str, Any] = {"pid": pid}
    try:
        # 1: traced, the file written as the agent writes it, reported, fetched
        code, detail, answer = _call(dyno.StartTrace, dyno_pb2.TraceRequest(job_id=job_id, duration_ms=60000))
        if answer is None:
            return {"code": code, "detail": f"start: {detail}"}
        out.update(code=code, triggered=[p.pid for p in answer.triggered], trace_id=answer.trace_id)
        config = commands.get(timeout=10)
        out["delivered"] = config.trace_id
        output = Path(config.output_path)
        output.write_bytes(b"{}")
        out["folder"] = [output.parent.stat().st_uid, oct(output.parent.stat().st_mode & 0o7777)]
        report = agent_pb2.ReportTraceRequest(
            pid=pid,
            trace_id=answer.trace_id,
            state=dyno_pb2.TRACE_STATE_DONE,
            path=str(output),
            session_id=reg.session_id,
        )
        out["report"] = _call(agent.ReportTrace, report)[0]
        fetch = dyno_pb2.FetchTraceFileRequest(trace_id=answer.trace_id, pid=pid)
        try:
            out["fetched"] = len(b"".join(c.data for c in dyno.FetchTraceFile(fetch, timeout=10)))
        except grpc.RpcError as e:
            out["fetched"] = f"{e.code().name}: {e.details()}"
        # 2: traced and cancelled
        second = _call(dyno.StartTrace, dyno_pb2.TraceRequest(job_id=job_id, duration_ms=60000))[2]
        cancel_code, cancel_detail, _ = _call(dyno.CancelTrace, dyno_pb2.CancelTraceRequest(trace_id=second.trace_id))
        out.update(cancel=cancel_code, cancel_detail=cancel_detail)
        listed = _call(dyno.ListProcesses, dyno_pb2.ListProcessesRequest(job_id=job_id))[2]
        out["own_cmdline"] = [p.cmdline for p in listed.processes] if listed else []
        return out
    finally:
        watch.cancel()


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])), flush=True)
