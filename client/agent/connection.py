"""The agent's connection to dynod: register over the Agent service's Unix socket, hold a Watch stream open through
which commands arrive, report trace states, and reconnect with backoff (registering again after a daemon restart).

Runs on the agent's connection thread (`DaemonConnection.run`); commands are handed to a callback. Nothing raised
here reaches the trainer: a missing daemon is logged once as a warning, then at debug level.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dyno.client.agent.env import (
    ENV_SOCKET,
    AgentIdentity,
    pick_socket,
    pid_namespace,
    socket_candidates,
    socket_named,
)
from dyno.grpc_import import import_grpc
from dyno.logthrottle import ThrottledLog

__all__ = ["DaemonConnection"]

log = logging.getLogger(__name__)

_REGISTER_TIMEOUT_S = 3.0
_REPORT_TIMEOUT_S = 3.0
_WARN_EVERY_S = 600.0  # the same warning at most this often; debug in between
# Final reports (done, failed) that found no daemon (it was restarting) are sent again after the next registration:
# a trace recording across a daemon restart is finished and reported to the restarted daemon. At most this many.
_MAX_UNSENT = 16
_FINAL_STATES = ("DONE", "FAILED")
# Status codes of a report that did not reach a daemon (worth sending again), as opposed to a daemon's answer;
# PERMISSION_DENIED: the daemon no longer knows this session (its stream ended before ours did): the next
# registration's session is believed
_NOT_DELIVERED = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED", "PERMISSION_DENIED"})

# Status codes by which a daemon that is up refuses a registration (bad arguments, not allowed).
# The daemon is there and answered (RESOURCE_EXHAUSTED: its registry caps): say its reason, not "no daemon".
_REFUSALS = frozenset(
    {"INVALID_ARGUMENT", "PERMISSION_DENIED", "UNAUTHENTICATED", "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED"}
)


class DaemonConnection:
    """One process's registration with dynod. `run()` is the connection thread's loop; `on_command(command)` gets
    each AgentCommand of the Watch stream; `may_register()` (when given) is asked before each attempt, which waits
    while it says no; `on_session_end()` is called when a registered session's stream has ended. `stopping` ends the
    loop."""

    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None,
        identify: Callable[[], AgentIdentity],
        on_command: Callable[[Any], None],
        stopping: threading.Event,
        *,
        may_register: Callable[[], bool] | None = None,
        on_session_end: Callable[[], None] | None = None,
        min_backoff_s: float = 0.2,
        max_backoff_s: float = 5.0,
    ) -> None:
        # Without an explicit socket: the trainer's own user's default, then the system daemon's; which one is
        # picked again at each connection attempt (the one that listens), so either daemon may start later.
        self.socket_candidates: tuple[Path, ...] = socket_candidates(socket_path)
        self._socket_named = socket_named(socket_path)  # else the defaults: the warning says how to name it
        self.socket_path: Path = self.socket_candidates[0]
        self._identify, self._on_command, self._may_register = identify, on_command, may_register
        self._on_session_end = on_session_end
        self.identity: AgentIdentity = identify()
        self._stopping = stopping
        self._min_backoff_s, self._max_backoff_s = min_backoff_s, max_backoff_s
        self._pid = os.getpid()
        self.registered = threading.Event()
        self._lock = threading.Lock()
        self._warn = ThrottledLog(log, _WARN_EVERY_S)
        self.session_id = ""
        self.registrations = 0  # successful Register calls (> 1 after a daemon restart)
        self._stub: Any = None
        self._stream: Any = None
        self._keepalive_s = 5.0
        self._last_message = time.monotonic()
        self._unsent: deque[tuple[str, str, str, int, str]] = deque(maxlen=_MAX_UNSENT)  # report()'s arguments

    def run(self) -> None:
        backoff = self._min_backoff_s
        while not self._stopping.is_set():
            if self._may_register is not None and not self._may_register():
                self._stopping.wait(0.5)
                continue
            try:
                if self._session():
                    backoff = self._min_backoff_s
            except Exception as e:  # noqa: BLE001 - nothing may escape into the trainer
                self._connection_failed(e)
            finally:
                ended = self.registered.is_set()
                self.registered.clear()
                if ended and self._on_session_end is not None:
                    self._on_session_end()
            if self._stopping.is_set():
                break
            self._stopping.wait(backoff * random.uniform(0.8, 1.2))
            backoff = min(backoff * 2, self._max_backoff_s)

    def cancel(self) -> None:
        """End the Watch stream now (at stop; `stopping` is set first, so the loop ends)."""
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.cancel()

    def check_keepalive(self) -> None:
        """A daemon that hangs without closing the socket: the keepalives stop, we reconnect."""
        with self._lock:
            stream = self._stream
            silent_s = time.monotonic() - self._last_message
        if stream is not None and silent_s > 3 * self._keepalive_s + 1.0:
            log.debug("dyno agent: no keepalive for %.1f s; reconnecting", silent_s)
            stream.cancel()

    def report(self, trace_id: str, state: str, *, path: str = "", size_bytes: int = 0, error: str = "") -> None:
        """ReportTrace. A final report (DONE, FAILED) that reached no daemon is kept and sent again after the next
        registration (a daemon restart mid-trace); any other loss is only logged (the daemon's timeouts cover it)."""
        registrations = self.registrations
        if self._send_report(trace_id, state, path, size_bytes, error) or state not in _FINAL_STATES:
            return
        self._unsent.append((trace_id, state, path, size_bytes, error))
        if self.registrations != registrations:
            # a registration completed while this report was on its way with the old session (refused: the daemon
            # knows it no more): it may have sent what was unsent before this was kept, and no other one follows
            self._send_unsent()

    def _send_unsent(self) -> None:
        """After a registration: the final reports that found no daemon, oldest first (kept if they fail again)."""
        while self._unsent:
            args = self._unsent.popleft()
            if not self._send_report(*args):
                self._unsent.appendleft(args)
                return
            log.debug("dyno agent: reported %s for trace %s after reconnecting", args[1], args[0])

    def _send_report(self, trace_id: str, state: str, path: str, size_bytes: int, error: str) -> bool:
        """False when the report reached no daemon (not connected, or the daemon is going or gone)."""
        try:
            from dyno.v1 import agent_pb2, dyno_pb2

            with self._lock:  # the stub and its registration's session, of the same registration
                stub, session = self._stub, self.session_id
            if stub is None:
                log.debug("dyno agent: cannot report %s for trace %s: not connected", state, trace_id)
                return False
            stub.ReportTrace(
                agent_pb2.ReportTraceRequest(
                    pid=self._pid,
                    trace_id=trace_id,
                    state=dyno_pb2.TraceState.Value(f"TRACE_STATE_{state}"),
                    path=path,
                    size_bytes=size_bytes,
                    error=error[:4096],
                    session_id=session,  # the daemon believes a report only with its registration's session
                ),
                timeout=_REPORT_TIMEOUT_S,
            )
        except Exception as e:  # noqa: BLE001 - the daemon may be gone; its own timeouts cover a lost report
            log.debug("dyno agent: cannot report %s for trace %s: %s", state, trace_id, e)
            code = getattr(e, "code", None)
            return not (callable(code) and code().name in _NOT_DELIVERED)
        return True

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
            hint = "" if self._socket_named else f" (set {ENV_SOCKET} to the daemon's --agent-socket)"
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

        grpc = import_grpc()  # first: the generated stub module below imports grpc too
        from dyno.v1 import agent_pb2, agent_pb2_grpc

        # A fresh channel per attempt: a channel that saw the daemon down backs off its own reconnects for up to
        # minutes, which would delay re-registration after a restart.
        self.socket_path = pick_socket(self.socket_candidates)
        channel = grpc.insecure_channel(f"unix:{self.socket_path}", options=[("grpc.enable_http_proxy", 0)])
        try:
            stub = agent_pb2_grpc.AgentStub(channel)
            ident = self.identity = self._identify()
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
                    pid_namespace=pid_namespace() or "",
                    reports_with_session=True,
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
            self.registered.set()
            self._send_unsent()
            try:
                for command in stream:
                    self._last_message = time.monotonic()
                    self._on_command(command)
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
