"""The dyno trainer agent: registers this process with the local dynod and takes torch.profiler traces on request.

    from dyno.client import agent
    agent.start()                      # job id etc. from the environment; returns at once

or, with no code change, `dyno-run -- python train.py` (see dyno.client.run). The agent connects to the daemon's
Agent service on a Unix socket (DYNO_AGENT_SOCKET, else the default of a dynod of this user or the system dynod's,
whichever listens), registers, and keeps a Watch stream open through which trace requests arrive as they are made.
Everything runs in two daemon threads: one holds the connection (reconnecting with backoff and registering again
after a daemon restart), one runs traces. No exception ever reaches the trainer; a missing daemon is logged once as
a warning, then at debug level.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

from dyno.client.agent_env import (
    ENV_SOCKET,
    AgentIdentity,
    multiprocessing_role,
    pick_socket,
    resolve_identity,
    socket_candidates,
)
from dyno.client.agent_output import OutputFiles
from dyno.client.agent_trace import StepCounter, TraceFailed, TraceSpec, run_trace
from dyno.logthrottle import ThrottledLog
from dyno.trace_options import options_from_pb

__all__ = ["Agent", "EXIT_FINISH_S", "start", "stop", "current"]

log = logging.getLogger(__name__)

_REGISTER_TIMEOUT_S = 3.0
_REPORT_TIMEOUT_S = 3.0
_WARN_EVERY_S = 600.0  # the same warning at most this often; debug in between
_IDLE_TICK_S = 1.0
# At a normal exit during a trace: how long the program's exit may wait for the profiler to stop, the
# recorded part to be written and reported. Past it the trace is reported failed and the program exits.
EXIT_FINISH_S = 5.0


# Status codes by which a daemon that is up refuses a registration (bad arguments, not allowed).
_REFUSALS = frozenset({"INVALID_ARGUMENT", "PERMISSION_DENIED", "UNAUTHENTICATED", "FAILED_PRECONDITION"})


def _torch_loaded() -> bool:
    # Fully imported, not just begun: importing grpc here while the main thread is inside torch's import is
    # avoidable risk.
    torch = sys.modules.get("torch")
    return torch is not None and not getattr(getattr(torch, "__spec__", None), "_initializing", False)


def _import_grpc() -> Any:
    """grpc, imported without its fork handlers unless the program asked for them: with our Watch call always in
    flight, every fork() of the trainer (DataLoader workers) would otherwise log "Other threads are currently
    calling into gRPC, skipping fork() handlers"; the forked children never use our channel."""
    if "grpc" in sys.modules:
        return sys.modules["grpc"]
    added = "GRPC_ENABLE_FORK_SUPPORT" not in os.environ
    if added:
        os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"
    try:
        import grpc
    finally:
        if added:
            os.environ.pop("GRPC_ENABLE_FORK_SUPPORT", None)  # leave the trainer's children as they were
    return grpc


def _spec_from_pb(cfg: Any) -> TraceSpec:
    return TraceSpec(
        trace_id=cfg.trace_id,
        output_path=Path(cfg.output_path),
        deadline_ms=cfg.deadline_ms,
        **options_from_pb(cfg),
    )


class Agent:
    """One per process (use the module-level `start()`). Threads are started by `start()`."""

    def __init__(
        self,
        job_id: str | None = None,
        socket_path: str | os.PathLike[str] | None = None,
        *,
        rank: int | None = None,
        local_rank: int | None = None,
        world_size: int | None = None,
        wait_for_torch: bool = False,
        min_backoff_s: float = 0.2,
        max_backoff_s: float = 5.0,
    ) -> None:
        self._job_id, self._rank, self._local_rank, self._world_size = job_id, rank, local_rank, world_size
        # Without an explicit socket: the trainer's own user's default, then the system daemon's; which one is
        # picked again at each connection attempt (the one that listens), so either daemon may start later.
        self.socket_candidates: tuple[Path, ...] = socket_candidates(socket_path)
        self.socket_path: Path = self.socket_candidates[0]
        self.identity: AgentIdentity = resolve_identity(job_id, rank=rank, local_rank=local_rank, world_size=world_size)
        self._wait_for_torch = wait_for_torch
        self._min_backoff_s, self._max_backoff_s = min_backoff_s, max_backoff_s
        self._pid = os.getpid()
        self._stopping = threading.Event()
        self._registered = threading.Event()
        self._lock = threading.Lock()
        self._warn = ThrottledLog(log, _WARN_EVERY_S)
        self.steps = StepCounter()
        self.session_id = ""
        self.registrations = 0  # successful Register calls (> 1 after a daemon restart)
        self._stub: Any = None
        self._stream: Any = None
        self._keepalive_s = 5.0
        self._last_message = time.monotonic()
        self._queue: queue.Queue[TraceSpec | None] = queue.Queue()
        # trace id -> its cancel event, for the running trace and those queued behind a cancelled one
        self._traces: dict[str, threading.Event] = {}
        self._threads: list[threading.Thread] = []
        self._exiting = threading.Event()  # the program is exiting normally: finish a recording trace early
        self._recording: TraceSpec | None = None  # the trace whose profiler runs (RUNNING reported), if any
        self._idle = threading.Event()  # set while no trace is being run by the trace thread
        self._idle.set()
        self._given_up: str | None = None  # a trace reported failed at exit while still being written
        self._files: OutputFiles | None = None  # the files of the trace being run
        self._abandoned: OutputFiles | None = None  # those of the trace given up at exit (swept again at stop)
        self._exit_hook = False

    # --- public ---------------------------------------------------------------------------------------------

    @property
    def registered(self) -> bool:
        """True while registered with a daemon and watching for requests."""
        return self._registered.is_set()

    def wait_registered(self, timeout_s: float | None = None) -> bool:
        return self._registered.wait(timeout_s)

    def start(self) -> Agent:
        # The optimizer hook goes in on this (the trainer's) thread, or on the thread importing torch.optim.
        try:
            self.steps.install()
        except Exception:
            log.debug("dyno agent: cannot install the optimizer step hook", exc_info=True)
        for target, name in ((self._connection_loop, "dyno-agent"), (self._trace_loop, "dyno-agent-trace")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def finish_at_exit(self, timeout_s: float = EXIT_FINISH_S) -> None:
        """At a normal exit (atexit): a trace that is recording stops early, and what it recorded is written and
        reported done with a note; waits at most timeout_s for that, then reports it failed. A trace not recording
        yet (and an iteration trace this thread cannot stop) is left to stop(), which cancels it. Registered when a
        trace first starts recording, so that it runs before torch's and grpc's own atexit handlers (LIFO) and
        before stop() closes the channel."""
        if os.getpid() != self._pid or self._stopping.is_set():
            return
        with self._lock:
            spec = self._recording
            cancel = self._traces.get(spec.trace_id) if spec else None
        if spec is None or cancel is None or cancel.is_set():
            return
        trace_id = spec.trace_id
        # An iteration trace's profiler is stopped here, on this thread, if this is the thread that trained;
        # otherwise it is left as it was (stop() cancels it; the daemon says the process exited mid-trace).
        if spec.iterations and not self.steps.finish_early():
            return
        log.info("dyno agent: the program is exiting during trace %s; writing what was recorded", trace_id)
        self._exiting.set()
        cancel.set()
        if self._idle.wait(timeout_s):
            return
        with self._lock:
            late = self._recording is spec
            if late:
                self._given_up, self._abandoned = trace_id, self._files
        if late:
            # The program exits now, maybe in the middle of the export: nothing of the trace may stay in the trace
            # folder (a partial export, a half-written copy). What the export writes after this, stop() sweeps
            # again, and dynod once the process is gone.
            if self._abandoned is not None:
                self._abandoned.abandon()
            self._report(
                trace_id,
                "FAILED",
                error=f"the program exited during the trace and writing what it had recorded took longer than "
                f"{timeout_s:g} s; no file",
            )

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop both threads; a running trace is cancelled (no file). Safe to call twice and from atexit."""
        if os.getpid() != self._pid:  # a forked child inherited this object but none of its threads
            return
        self._stopping.set()
        with self._lock:
            cancels, stream = list(self._traces.values()), self._stream
        for cancel in cancels:
            cancel.set()
        if stream is not None:
            stream.cancel()
        self._queue.put(None)  # wakes the trace thread
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))
        if self._abandoned is not None:  # what the export of a trace given up at exit wrote since
            self._abandoned.abandon()

    # --- connection -----------------------------------------------------------------------------------------

    def _connection_loop(self) -> None:
        backoff = self._min_backoff_s
        while not self._stopping.is_set():
            if self._wait_for_torch and not self._may_register():
                self._stopping.wait(0.5)
                continue
            try:
                if self._session():
                    backoff = self._min_backoff_s
            except Exception as e:  # noqa: BLE001 - nothing may escape into the trainer
                self._connection_failed(e)
            finally:
                self._registered.clear()
            if self._stopping.is_set():
                break
            self._stopping.wait(backoff * random.uniform(0.8, 1.2))
            backoff = min(backoff * 2, self._max_backoff_s)

    def _may_register(self) -> bool:
        """Auto-started (dyno-run): only processes that use torch register, and of multiprocessing spawn children
        only trainers (torch.multiprocessing.spawn workers), not helpers (DataLoader workers), whose agent stops."""
        argv = getattr(sys, "orig_argv", None) or sys.argv
        role = multiprocessing_role(argv, sys.modules.get("multiprocessing"))
        if role == "helper":
            self._stopping.set()
            self._queue.put(None)  # wakes the trace thread, which ends too
            return False
        return role == "process" and _torch_loaded()

    def _connection_failed(self, e: Exception) -> None:
        code = getattr(e, "code", None)
        reason = code().name if callable(code) else f"{type(e).__name__}: {e}"
        if reason in _REFUSALS:  # the daemon is there and answered: its reason, not "no daemon"
            details = getattr(e, "details", None)
            self._warn.warning(
                "refused",
                "dyno agent: the dyno daemon at unix:%s refused to register this process: %s (%s); retrying in the "
                "background",
                self.socket_path,
                details() if callable(details) else e,
                reason,
            )
            return
        if self.registrations:
            self._warn.warning(
                "lost",
                "dyno agent: lost the daemon at unix:%s (%s); reconnecting in the background",
                self.socket_path,
                reason,
            )
        else:
            tried = " or ".join(f"unix:{path}" for path in self.socket_candidates)
            hint = f" (set {ENV_SOCKET} to the daemon's --agent-socket)" if len(self.socket_candidates) > 1 else ""
            self._warn.warning(
                "absent",
                "dyno agent: no dyno daemon at %s (%s); tracing is unavailable until it starts, retrying in the "
                "background%s",
                tried,
                reason,
                hint,
            )

    def _session(self) -> bool:
        """One connection: register, then watch until the stream ends. True when registration succeeded."""
        from dyno import __version__

        grpc = _import_grpc()  # first: the generated stub module below imports grpc too
        from dyno.v1 import agent_pb2, agent_pb2_grpc

        # A fresh channel per attempt: a channel that saw the daemon down backs off its own reconnects for up to
        # minutes, which would delay re-registration after a restart.
        self.socket_path = pick_socket(self.socket_candidates)
        channel = grpc.insecure_channel(f"unix:{self.socket_path}", options=[("grpc.enable_http_proxy", 0)])
        try:
            stub = agent_pb2_grpc.AgentStub(channel)
            ident = resolve_identity(
                self._job_id, rank=self._rank, local_rank=self._local_rank, world_size=self._world_size
            )
            self.identity = ident
            resp = stub.Register(
                agent_pb2.RegisterRequest(
                    pid=ident.pid,
                    ancestry=list(ident.ancestry),
                    job_id=ident.job_id,
                    rank=ident.rank,
                    local_rank=ident.local_rank,
                    world_size=ident.world_size,
                    gpu=ident.gpu,
                    hostname=ident.hostname,
                    cmdline=ident.cmdline,
                    agent_version=__version__,
                ),
                timeout=_REGISTER_TIMEOUT_S,
            )
            stream = stub.Watch(agent_pb2.WatchRequest(pid=ident.pid, session_id=resp.session_id))
            with self._lock:
                if self._stopping.is_set():
                    stream.cancel()
                self._stub, self._stream, self.session_id = stub, stream, resp.session_id
                self._keepalive_s = max(resp.keepalive_ms, 100) / 1000.0 if resp.keepalive_ms else 5.0
                self._last_message = time.monotonic()
            self.registrations += 1
            log.info(
                "dyno agent: registered pid %d (job %r) with dynod at unix:%s",
                ident.pid,
                ident.job_id,
                self.socket_path,
            )
            self._registered.set()
            try:
                for command in stream:
                    self._last_message = time.monotonic()
                    self._dispatch(command)
            except grpc.RpcError as e:
                if self._stopping.is_set() or e.code() == grpc.StatusCode.CANCELLED:
                    return True
                self._connection_failed(e)
                return True
            self._warn.warning("lost", "dyno agent: the daemon closed the stream; reconnecting in the background")
            return True
        finally:
            with self._lock:
                self._stream, self._stub = None, None
            channel.close()

    def _dispatch(self, command: Any) -> None:
        kind = command.WhichOneof("kind")
        if kind == "trace":
            self._submit(_spec_from_pb(command.trace))
        elif kind == "cancel_trace_id":
            with self._lock:
                cancel = self._traces.get(command.cancel_trace_id)
            if cancel is not None:
                cancel.set()

    # --- traces -----------------------------------------------------------------------------------------------

    def _submit(self, spec: TraceSpec) -> None:
        # One trace at a time; a cancelled one still winding down (profiler stop) does not make us busy.
        with self._lock:
            busy = next((tid for tid, cancel in self._traces.items() if not cancel.is_set()), None)
            if busy is None:
                self._traces[spec.trace_id] = threading.Event()
        if busy is not None:
            self._report(spec.trace_id, "FAILED", error=f"busy: trace {busy} is still running in this process")
            return
        self._queue.put(spec)

    def _trace_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                spec = self._queue.get(timeout=_IDLE_TICK_S)
            except queue.Empty:
                self._check_keepalive()
                continue
            if spec is not None:
                self._run_one(spec)

    def _check_keepalive(self) -> None:
        # A daemon that hangs without closing the socket: the keepalives stop, we reconnect.
        with self._lock:
            stream = self._stream
            silent_s = time.monotonic() - self._last_message
        if stream is not None and silent_s > 3 * self._keepalive_s + 1.0:
            log.debug("dyno agent: no keepalive for %.1f s; reconnecting", silent_s)
            stream.cancel()

    def _run_one(self, spec: TraceSpec) -> None:
        with self._lock:
            cancel = self._traces.setdefault(spec.trace_id, threading.Event())
        if cancel.is_set():  # cancelled while queued: the daemon already knows
            with self._lock:
                self._traces.pop(spec.trace_id, None)
            return
        outcome: dict[str, Any]
        files = OutputFiles(spec.output_path)
        with self._lock:
            self._files = files
        self._idle.clear()
        try:
            result = run_trace(spec, self.steps, cancel, lambda: self._on_recording(spec), self._exiting, files)
            outcome = {"state": "DONE", "path": str(result.path), "size_bytes": result.size_bytes}
            if result.note:
                outcome["error"] = result.note  # the daemon keeps a done trace's text as its note
            log.info("dyno agent: trace %s written to %s (%d bytes)", spec.trace_id, result.path, result.size_bytes)
        except TraceFailed as e:
            log.info("dyno agent: trace %s failed: %s", spec.trace_id, e)
            outcome = {"state": "FAILED", "error": str(e)}
        except Exception as e:  # noqa: BLE001
            log.warning("dyno agent: trace %s failed unexpectedly", spec.trace_id, exc_info=True)
            outcome = {"state": "FAILED", "error": f"agent error: {type(e).__name__}: {e}"}
        finally:
            # Not busy any more *before* the final report: the daemon may hand us the next request the moment
            # that report lands (back-to-back traces were refused as "busy" in that window).
            with self._lock:
                self._traces.pop(spec.trace_id, None)
                self._recording, self._files = None, None
                given_up, self._given_up = self._given_up == spec.trace_id, None
        if given_up:  # finish_at_exit stopped waiting and reported it failed: no file may stay behind
            files.abandon()
        else:
            self._report(spec.trace_id, **outcome)
        self._idle.set()

    def _on_recording(self, spec: TraceSpec) -> None:
        with self._lock:
            self._recording = spec
            first = not self._exit_hook
            self._exit_hook = True
        if first:
            # Now, not at start(): torch and grpc are loaded by now and their atexit handlers registered, so ours
            # runs before theirs and before stop() (atexit runs handlers last registered first).
            atexit.register(self.finish_at_exit)
        self._report(spec.trace_id, "RUNNING")

    def _report(self, trace_id: str, state: str, *, path: str = "", size_bytes: int = 0, error: str = "") -> None:
        try:
            from dyno.v1 import agent_pb2, dyno_pb2

            stub = self._stub
            if stub is None:
                raise ConnectionError("not connected")
            stub.ReportTrace(
                agent_pb2.ReportTraceRequest(
                    pid=self._pid,
                    trace_id=trace_id,
                    state=dyno_pb2.TraceState.Value(f"TRACE_STATE_{state}"),
                    path=path,
                    size_bytes=size_bytes,
                    error=error[:4096],
                ),
                timeout=_REPORT_TIMEOUT_S,
            )
        except Exception as e:  # noqa: BLE001 - the daemon may be gone; its own timeouts cover a lost report
            log.debug("dyno agent: cannot report %s for trace %s: %s", state, trace_id, e)


_agent: Agent | None = None
_agent_lock = threading.Lock()


def _forget_in_child() -> None:
    # fork() copies this module's state but not the agent's threads: the child starts without an agent.
    global _agent
    _agent = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def start(
    job_id: str | None = None,
    socket_path: str | os.PathLike[str] | None = None,
    *,
    rank: int | None = None,
    local_rank: int | None = None,
    world_size: int | None = None,
    wait_for_torch: bool = False,
    max_backoff_s: float = 5.0,
) -> Agent:
    """Start this process's agent (idempotent: a running agent is returned as is). Returns at once; connecting
    and registering happen in the background. job_id defaults to DYNO_JOB_ID / SLURM ids / TORCHELASTIC_RUN_ID,
    rank info to RANK / LOCAL_RANK / WORLD_SIZE, socket_path to DYNO_AGENT_SOCKET, else whichever of the default
    socket of a dynod of this user and the system dynod's (/run/dyno/agent.sock) listens (agent_env.socket_candidates).
    wait_for_torch: register only once the process has imported torch (used by dyno-run's bootstrap)."""
    global _agent
    with _agent_lock:
        if _agent is not None:
            return _agent
        agent = Agent(
            job_id,
            socket_path,
            rank=rank,
            local_rank=local_rank,
            world_size=world_size,
            wait_for_torch=wait_for_torch,
            max_backoff_s=max_backoff_s,
        )
        _agent = agent.start()
        atexit.register(agent.stop, 1.0)
        return agent


def stop(timeout_s: float = 2.0) -> None:
    """Stop this process's agent, if any."""
    global _agent
    with _agent_lock:
        agent, _agent = _agent, None
    if agent is not None:
        agent.stop(timeout_s)


def current() -> Agent | None:
    """This process's running agent, or None."""
    return _agent
