"""The tracing subsystem of dynod, assembled: registry, trace manager, kineto endpoint, Agent UDS server,
housekeeping (timeouts, garbage collection, retention) and the Dyno tracing RPCs (`rpcs`)."""

from __future__ import annotations

import logging
import threading
import time

from dyno.daemon.agent_server import AgentServer
from dyno.daemon.agent_service import AgentServicer
from dyno.daemon.callers import CallerIdentity
from dyno.daemon.config import DaemonConfig
from dyno.daemon.instance_id import new_instance_id
from dyno.daemon.registered_process import PROTOCOL_KINETO, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.kineto_ipc import KinetoEndpoint
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.retention import enforce_retention
from dyno.daemon.tracing.service import TraceRpcs
from dyno.daemon.tracing.table import TraceLimits
from dyno.daemon.tracing.usage import TraceDirUsage

__all__ = ["Tracing"]

log = logging.getLogger(__name__)


class Tracing:
    def __init__(
        self,
        config: DaemonConfig,
        hostname: str,
        *,
        housekeeping_s: float = 0.5,
        idle_housekeeping_s: float = 5.0,
        retention_every_s: float = 30.0,
        silent_timeout_s: float = 30.0,
        delivery_timeout_s: float = 30.0,
        instance_id: str = "",
        callers: CallerIdentity | None = None,
    ) -> None:
        self.config = config
        self.hostname = hostname
        self.instance_id = instance_id or new_instance_id()  # this dynod's (GetStatus, StartTrace, GetTrace)
        # with per-user rules, a process joins a job of other users' only when its user is an admin (job_users.py)
        job_admin = (lambda uid: callers.local(uid).admin) if callers is not None else None
        self.registry = ProcessRegistry(
            silent_timeout_s=silent_timeout_s,
            max_processes=config.max_processes,
            max_per_uid=config.max_processes_per_uid,
            job_admin=job_admin,
        )
        self._wake = threading.Event()  # set by stop() and by every started trace
        self.manager = TraceManager(
            self.registry,
            config.trace_dir,
            hostname,
            limits=TraceLimits(delivery_timeout_s=delivery_timeout_s),
            on_start=self._wake.set,
        )
        # who calls, for the per-user rules (dyno.daemon.callers; None: every caller may touch every process)
        self.callers = callers
        caller_of = callers.caller if callers is not None else None
        self.rpcs = TraceRpcs(self.manager, self.registry, hostname, self.instance_id, caller_of)
        peers = callers.peers if callers is not None else None  # registration by the process's own user only
        self.agent_servicer = AgentServicer(self.manager, self.registry, peers=peers)
        # a connection per registered agent: as many as the registry may hold, in all and of one user, and some for
        # those it refuses, which then hear the registry's reason (RESOURCE_EXHAUSTED), not a closed connection
        self.agent_server = AgentServer(
            self.agent_servicer,
            config.agent_socket_path,
            max_streams=config.max_processes + 64,
            peers=peers,
            max_connections=config.max_processes + 64,
            max_connections_per_uid=config.max_processes_per_uid + 64,
        )
        self.kineto: KinetoEndpoint | None = None
        if config.kineto_socket_dir is not None:
            self.kineto = KinetoEndpoint(self.manager, socket_dir=config.kineto_socket_dir)
        elif config.kineto_endpoint != "off":
            self.kineto = KinetoEndpoint(self.manager, name=config.kineto_endpoint)
        if self.kineto is not None:
            self.registry.add_removal_listener(self._on_process_removed)
        self._housekeeping_s = housekeeping_s
        self._idle_housekeeping_s = idle_housekeeping_s
        self._retention_every_s = retention_every_s
        # GetStatus' trace_dir_bytes: recorded by each retention pass, measured by the reader only when no pass has
        # recorded it for two retention periods (usage.py)
        self.usage = TraceDirUsage(config.trace_dir, max_age_s=2 * retention_every_s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Raises OSError when the kineto endpoint or the agent socket cannot be bound."""
        self.config.trace_dir.mkdir(parents=True, exist_ok=True)
        if any(c in str(self.config.trace_dir) for c in "=#\n"):
            log.warning(
                "trace dir %s contains '=', '#' or a newline: libkineto processes cannot be traced (their config "
                "format cannot express it); agent processes can",
                self.config.trace_dir,
            )
        self._retention()
        if self.kineto is not None:
            self.kineto.start()
        try:
            self.agent_server.start()
        except Exception:
            if self.kineto is not None:
                self.kineto.stop()
            raise
        self._thread = threading.Thread(target=self._housekeeping, name="trace-housekeeping", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self.agent_server.stop()
        if self.kineto is not None:
            self.kineto.stop()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _on_process_removed(self, record: RegisteredProcess, reason: str) -> None:
        if record.protocol == PROTOCOL_KINETO and self.kineto is not None:
            self.kineto.remove_stale_clients()  # its client socket file, in filesystem mode

    def process_count(self) -> int:
        return len(self.registry)

    def active_traces(self) -> int:
        return self.manager.active_traces()

    def trace_dir_bytes(self) -> int:
        """Bytes under the trace dir as the last retention pass found them (at most 2 x retention_every_s old)."""
        return self.usage.bytes()

    def _retention(self) -> None:
        result = enforce_retention(
            self.config.trace_dir,
            max_bytes=self.config.trace_retention_bytes,
            max_age_s=self.config.trace_retention_s,
            keep=self.manager.active_trace_ids(),
        )
        self.manager.forget(result.removed)  # their records went with the folders
        self.usage.record(result.dir_bytes)

    def _housekeeping(self) -> None:
        next_retention = time.monotonic() + self._retention_every_s
        # Timeouts need a prompt pass only while traces are in flight; otherwise a slow pace (dead pids, silent
        # clients, retention) keeps an idle daemon from waking twice a second.
        while True:
            self._wake.wait(self._housekeeping_s if self.manager.active_traces() else self._idle_housekeeping_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.manager.housekeeping()
                if time.monotonic() >= next_retention:
                    next_retention = time.monotonic() + self._retention_every_s
                    self._retention()
            except Exception:  # housekeeping must survive a bad file or a bug in one pass
                log.exception("trace housekeeping failed")
