"""Wires dynod together: samplers -> sampling loop -> history -> gRPC (Dyno, health, reflection) + Prometheus."""

from __future__ import annotations

import errno
import logging
import os
import socket
import threading
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from prometheus_client.core import Metric

import dyno
from dyno.daemon.analysis.analyses import Analyses
from dyno.daemon.analysis.prometheus import analysis_families
from dyno.daemon.analysis.rpc import GetTraceSummaryRpc
from dyno.daemon.analysis.runner import WorkerLimits, WorkerRunner
from dyno.daemon.analysis.store import AnalysisStore
from dyno.daemon.api_socket import ApiSocket
from dyno.daemon.auth import (
    AuthConfigError,
    TokenAuthInterceptor,
    build_server_credentials,
    build_server_interceptors,
    exposure_refusal,
    warn_if_exposed,
)
from dyno.daemon.bindcheck import bind_problem
from dyno.daemon.callers import CallerIdentity
from dyno.daemon.config import ConfigError, DaemonConfig, group_id
from dyno.daemon.connection_limits import server_options
from dyno.daemon.handler_slots import UNARY_THREADS, HandlerSlots
from dyno.daemon.health import HealthServicer
from dyno.daemon.history import History
from dyno.daemon.jobs.accounting import AccountingConfig, JobAccounting
from dyno.daemon.jobs.observe import trainers
from dyno.daemon.jobs.prometheus import job_families
from dyno.daemon.jobs.service import ListJobsRpc
from dyno.daemon.loop import SamplingLoop
from dyno.daemon.memlimit import history_memory_problem, memory_limits
from dyno.daemon.metrics_http import MetricsHTTPServer
from dyno.daemon.peer_identity import PeerTable
from dyno.daemon.profiling.periodic import PeriodicProfiler
from dyno.daemon.profiling.setup import periodic_profiler
from dyno.daemon.prometheus import DynoCollector, ExporterInfo, build_registry, daemon_gauges, serve_metrics
from dyno.daemon.request_decoding import RequestDecoding
from dyno.daemon.rpc_threads import RetiringThreadPool
from dyno.daemon.samplers.base import GpuDevice, Reading, Sampler
from dyno.daemon.samplers.gpu import make_gpu_sampler
from dyno.daemon.samplers.host import HostSampler
from dyno.daemon.sampling_pb import gpu_to_proto, sampler_state_to_proto
from dyno.daemon.server import DYNO_SERVICE, DynoServicer, add_reflection, add_to_server
from dyno.daemon.stream_slots import RPC_THREADS
from dyno.daemon.tracing.subsystem import Tracing
from dyno.netaddr import host_port
from dyno.v1 import dyno_pb2

__all__ = ["Daemon", "StartupError", "DYNO_SERVICE"]

log = logging.getLogger(__name__)


class StartupError(Exception):
    """The daemon cannot start for a reason the operator must fix (port in use, unwritable dir)."""


class Daemon:
    def __init__(self, config: DaemonConfig, samplers: list[Sampler] | None = None) -> None:
        self.config = config
        self.hostname = socket.gethostname()
        self.started_at = time.monotonic()
        self.history = History(config.history_len, max_bytes=config.history_max_bytes)
        if samplers is None:
            samplers = [HostSampler(), make_gpu_sampler(config.gpu_backend, config.sim_gpus)]
        self.samplers = samplers
        self.gpu_sampler = next((s for s in samplers if s.name == "gpu"), None)
        self.loop = SamplingLoop(samplers, self.history, config.interval_s)
        self.health = HealthServicer()  # not grpc_health's: it deadlocks the server (dyno.daemon.health)
        # who calls, for the per-user rules (dyno.daemon.callers): the Unix sockets' relays record their peers in
        # `peers`; _start_grpc sets the token check and the TCP port once the server is bound
        self.peers = PeerTable()
        self.callers = CallerIdentity(
            peers=self.peers,
            admin_gid=group_id(config.admin_group) if config.admin_group else None,
            trust_unidentified=config.insecure_allow_unauthenticated_remote,
        )
        self.tracing = Tracing(config, self.hostname, callers=self.callers)
        self.jobs = self._job_accounting()
        # None when periodic_interval_s is 0 (off)
        self.periodic: PeriodicProfiler | None = periodic_profiler(
            config, self.tracing.manager, self.tracing.registry, self.jobs.book.records
        )
        self.analyses = self._analyses()
        self.server: grpc.Server | None = None
        self.servicer: DynoServicer | None = None
        self.metrics_server: MetricsHTTPServer | None = None
        self.api_socket: ApiSocket | None = None
        self.port = 0
        self.metrics_port = 0
        self._stopped = threading.Event()

    def _job_accounting(self) -> JobAccounting:
        cfg, gpu = self.config, self.gpu_sampler
        hold_loads = getattr(gpu, "hold_loads", None)  # the sim backend: trainers' CPU share drives its GPUs' load
        inventory = getattr(gpu, "inventory", None)
        sim_gpus = len(inventory()) if hold_loads is not None and inventory is not None else 0
        accounting = JobAccounting(
            AccountingConfig(
                state_dir=cfg.state_dir,
                hostname=self.hostname,
                interval_s=cfg.interval_s,
                flush_s=cfg.job_flush_s,
                grace_s=cfg.job_grace_s,
                retention_s=cfg.job_retention_s,
                retention_bytes=cfg.job_retention_bytes,
                sim_gpus=sim_gpus,
            ),
            lambda: trainers(self.tracing.registry.list()),
            getattr(gpu, "processes", list),
            set_sim_loads=hold_loads,
        )
        self.loop.add_tick_listener(accounting.on_tick)
        self.tracing.manager.trace_listener = accounting.trace_taken
        return accounting

    def _analyses(self) -> Analyses | None:
        """Host-side analysis of every finished trace (None: analysis_enabled is false)."""
        cfg = self.config
        if not cfg.analysis_enabled:
            return None
        store = AnalysisStore(self.jobs.store, retention_s=cfg.job_retention_s, max_bytes=cfg.job_retention_bytes // 2)
        limits = WorkerLimits(timeout_s=cfg.analysis_timeout_s, memory_mb=cfg.analysis_memory_mb)
        analyses = Analyses(
            self.hostname, store, WorkerRunner(limits), max_queued=cfg.analysis_queue, trace_dir=cfg.trace_dir
        )
        self.tracing.manager.table.finished_listener = analyses.trace_finished
        self.jobs.latest_analyses = analyses.latest_listed
        return analyses

    # -- status -----------------------------------------------------------------------------------------------
    def status(self) -> dyno_pb2.Status:
        cfg = self.config
        gpus = self._gpu_inventory()
        return dyno_pb2.Status(
            hostname=self.hostname,
            version=dyno.__version__,
            uptime_s=time.monotonic() - self.started_at,
            samplers=[sampler_state_to_proto(s) for s in self.loop.sampler_states()],
            gpus=[gpu_to_proto(g) for g in gpus],
            trace_dir=str(cfg.trace_dir),
            trace_dir_bytes=self.tracing.trace_dir_bytes(),
            registered_processes=self.tracing.process_count(),
            active_traces=self.tracing.active_traces(),
            interval_s=cfg.interval_s,
            history_s=self.history_window_s(),
            samples_in_history=len(self.history),
            pid=os.getpid(),
            agent_socket=str(cfg.agent_socket_path),
            kineto_endpoint=self.tracing.kineto.describe() if self.tracing.kineto is not None else "off",
            instance_id=self.tracing.instance_id,
            job_store=self.jobs.problem() or "ok",
            periodic_profiling=self.periodic.describe() if self.periodic is not None else "off",
        )

    # -- lifecycle --------------------------------------------------------------------------------------------
    def _prepare_dirs(self) -> None:
        d = self.config.trace_dir
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StartupError(f"cannot create directory {d}: {e.strerror or e}") from None
        if not os.access(d, os.W_OK):
            raise StartupError(f"directory {d} is not writable by uid {os.geteuid()}")
        # The state dir holds only the job database: without it dynod samples and serves, keeps job records in memory
        # and says so in status (job_store), rather than not starting at all
        try:
            self.config.state_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            log.warning("cannot create state dir %s: %s", self.config.state_dir, e.strerror or e)

    def _start_grpc(self) -> None:
        cfg = self.config
        # token interceptor and TLS credentials (dyno.daemon.auth; none when not configured). Their AuthConfigError
        # is a ConfigError: the operator's files are wrong, exit 2 like any other config mistake.
        credentials = build_server_credentials(cfg)
        # request bodies are decoded in the handlers, after the token check (request_decoding.py), and at most
        # HANDLER_SLOTS unary handlers run at once (handler_slots.py)
        unary_pool = RetiringThreadPool(UNARY_THREADS, "dyno-unary")  # unary calls' own threads (handler_slots.py)
        interceptors = [*build_server_interceptors(cfg), HandlerSlots(pool=unary_pool), RequestDecoding()]
        address = host_port(cfg.listen, cfg.port)
        # a plain socket first: a failed gRPC bind prints gRPC's own C-core log lines before dynod's (bindcheck.py)
        problem = bind_problem(cfg.listen, cfg.port)
        if problem is not None:
            raise StartupError(f"cannot listen on {address}: {problem}")
        # so_reuseport off: a second daemon on the same port must fail loudly, not share the port. Connections,
        # streams per connection, idle and dead peers are bounded (connection_limits.py).
        server = grpc.server(
            RetiringThreadPool(RPC_THREADS, "dyno-grpc"),  # threads end when idle (rpc_threads.py)
            options=[("grpc.so_reuseport", 0), *server_options()],
            maximum_concurrent_rpcs=256,
            interceptors=interceptors,
        )
        self.servicer = DynoServicer(
            self.status,
            self.history,
            self.hostname,
            trace_rpcs=self.tracing.rpcs,
            list_jobs=ListJobsRpc(lambda: self.jobs, self.hostname, self.callers.caller).encoded,
            trace_summary=GetTraceSummaryRpc(
                self.analyses, self.tracing.manager.get, self.hostname, self.callers.caller
            ),
        )
        add_to_server(self.servicer, server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        add_reflection(  # capped: each session holds an RPC thread (dyno.daemon.stream_slots)
            server, (DYNO_SERVICE, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME)
        )
        try:
            port = server.add_secure_port(address, credentials) if credentials else server.add_insecure_port(address)
        except RuntimeError as e:
            raise StartupError(f"cannot listen on {address}: {e} (address in use or not available?)") from None
        if port == 0:
            raise StartupError(f"cannot listen on {address}: address in use or not available")
        # local callers on the Unix socket, identified by the kernel (api_socket.py); TCP ones by their socket's owner
        self.api_socket = api = ApiSocket(cfg.api_socket_path, self.peers)
        server.add_insecure_port(api.internal)
        callers = self.callers
        callers.token_ok = next((i.authorized for i in interceptors if isinstance(i, TokenAuthInterceptor)), None)
        callers.server_port = port
        callers.server_addresses = ("127.0.0.1", "::1") if cfg.listen.lower() == "localhost" else (cfg.listen,)
        warn_if_exposed(cfg, log)
        server.start()
        self.server, self.port = server, port
        try:
            api.start()
        except OSError as e:
            raise StartupError(f"{e.strerror or e}") from None

    def _start_metrics(self) -> None:
        cfg = self.config
        if cfg.metrics_port == 0:
            return
        collector = DynoCollector(
            self.history,
            ExporterInfo(self.hostname, dyno.__version__),
            self.loop.sampler_states,
            extra=self._daemon_metrics,
            stalled=lambda: self.loop.stall() is not None,
            totals=self._sampler_totals,
            dcgm_devices=self._gpu_inventory if cfg.dcgm_metrics else None,
            gpu_holders=self.jobs.gpu_holders,
        )
        addr = cfg.metrics_listen or cfg.listen
        try:
            server = serve_metrics(build_registry(collector), addr, cfg.metrics_port)
        except OSError as e:
            raise StartupError(f"cannot serve metrics on {addr}:{cfg.metrics_port}: {e.strerror or e}") from None
        self.metrics_server = server
        self.metrics_port = server.port

    def _gpu_inventory(self) -> list[GpuDevice]:
        gpu = self.gpu_sampler
        return gpu.inventory() if gpu is not None and hasattr(gpu, "inventory") else []

    def _sampler_totals(self) -> list[Reading]:
        """The host's cumulative counters as the last tick read them (exported as Prometheus counters)."""
        return [r for s in self.samplers if isinstance(s, HostSampler) for r in s.totals()]

    def _daemon_metrics(self) -> list[Metric]:
        """The tracing side's state for Prometheus (only GetStatus had it): processes against the registry's cap,
        traces in flight, the trace dir's size against its retention limit."""
        t, c = self.tracing, self.config
        values = {
            "registered_processes": t.process_count(),
            "max_processes": c.max_processes,
            "active_traces": t.active_traces(),
            "trace_dir_bytes": t.trace_dir_bytes(),
            "trace_retention_bytes": c.trace_retention_bytes,
        }
        records = self.jobs.exported_records()
        out = [*daemon_gauges(self.hostname, values), *job_families(self.hostname, records)]
        if self.analyses is not None:
            out += analysis_families(self.hostname, records, self.analyses.latest([r.key for r in records]))
        return out

    def start(self) -> None:
        refusal = exposure_refusal(self.config)  # before anything is bound or sampled: exit 2, one line
        if refusal is not None:
            raise AuthConfigError(refusal)
        self._prepare_dirs()
        for s in self.samplers:
            state = s.state()
            if state.ok:
                log.info("sampler %s: ok (%s%s)", s.name, state.backend, ", simulated" if state.simulated else "")
            elif state.backend == "none":  # the operator's choice (--gpu-backend none), nothing to warn about
                log.info("sampler %s: %s", s.name, state.reason)
            else:
                log.warning("sampler %s: unavailable: %s", s.name, state.reason)
        # The first sample primes rate counters and gives the first queries data at once. Taken on the loop's thread
        # under its watchdog: a hung NVML call in it is logged, reported in status, and delays start-up by at most the
        # stall limit (it hung start-up silently, with no READY=1 for systemd, when the main thread took it).
        self.jobs.start()  # before the first tick: a restarted dynod resumes its running job records
        if self.analyses is not None:
            self.analyses.start()
        self.loop.prime(on_first_tick=self._first_sample_checks)
        try:
            try:
                self.tracing.start()
            except OSError as e:
                hint = ""
                if e.errno == errno.EADDRINUSE:
                    hint = " (another dynod or dynolog on this host? give this one its own --kineto-endpoint, "
                    hint += "--kineto-socket-dir or --agent-socket, or --kineto-endpoint off)"
                raise StartupError(f"{e.strerror or e}{hint}") from None
            self._start_grpc()
            self._start_metrics()
            if self.periodic is not None:
                self.periodic.start()
        except (StartupError, ConfigError):
            self.stop(grace_s=0)
            raise
        self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        self.health.set(DYNO_SERVICE, health_pb2.HealthCheckResponse.SERVING)

    def history_window_s(self) -> float:
        """The seconds of samples the history keeps: history_s, or less where its byte budget ends first."""
        return min(self.config.history_s, self.history.fitting_len() * self.config.interval_s)

    def _first_sample_checks(self) -> None:
        self._warn_if_history_cut()
        self._warn_if_history_exceeds_memory_limit()

    def _warn_if_history_cut(self) -> None:
        """Once, after the first sample: the byte budget (history_max_bytes) keeps less than history_s."""
        cfg = self.config
        kept = self.history.fitting_len()
        if kept >= self.history.capacity:
            return
        log.warning(
            "history: keeping the last %g s (%d samples), not history_s %g s: %d values per sample at interval_s %g "
            "would take ~%d MiB, more than the history's %d MiB budget (history_max_bytes)",
            self.history_window_s(),
            kept,
            cfg.history_s,
            len(latest.readings) if (latest := self.history.latest()) is not None else 0,
            cfg.interval_s,
            self.history.sample_bytes * self.history.capacity / 2**20,
            self.history.max_bytes / 2**20,
        )

    def _warn_if_history_exceeds_memory_limit(self) -> None:
        """Once, after the first sample: a full history that cannot fit under the service's MemoryHigh/MemoryMax
        would be throttled, then OOM-killed hours from now; say so while the operator is watching the start."""
        full = min(self.history.max_bytes, self.history.sample_bytes * self.history.capacity)
        problem = history_memory_problem(full, memory_limits())
        if problem is not None:
            log.warning("history: %s", problem)

    def stop(self, grace_s: float = 5.0) -> None:
        """Health NOT_SERVING, drain in-flight RPCs for up to `grace_s`, then stop everything. Idempotent."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.health.enter_graceful_shutdown()
        if self.servicer is not None:
            self.servicer.shutdown()
        if self.server is not None:
            self.server.stop(grace_s).wait()
        if self.api_socket is not None:  # after the drain: calls on it in flight end as the TCP ones do
            self.api_socket.stop()
        if self.metrics_server is not None:
            self.metrics_server.close()
        if self.periodic is not None:
            self.periodic.stop()
        self.tracing.stop()
        if self.analyses is not None:  # its worker's process group is killed
            self.analyses.stop()
        stall = self.loop.stall()
        self.loop.stop(timeout=5.0 if stall is None else 0.0)  # a stuck sample() never ends
        self.jobs.stop()  # after the last tick: its records are flushed, the running ones left running
        # a sample() still running after the join (stalled, or hung for less than the stall limit yet, e.g. a stop
        # during start-up's first sample): its close() would wait on the same hung call
        busy = stall.sampler if stall is not None else self.loop.in_flight()
        for s in self.samplers:
            if s.name == busy:
                seconds = f"for {stall.seconds:.0f} s" if stall is not None else "yet"
                log.warning("not closing sampler %s: its sample() has not returned %s", s.name, seconds)
                continue
            try:
                s.close()
            except Exception:
                log.exception("closing sampler %s", s.name)
