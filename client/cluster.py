"""Cluster: call many dynods at once, with a deadline, and get one result per host, failures included.

Each host gets a worker thread (up to `max_concurrency` at once; grpc's sync stubs release the GIL while they
wait, so hundreds of threads cost little), its own cached DynoClient, and the same absolute deadline: the
fan-out returns by `deadline_s` after it started, whatever a dead or slow host does. UNAVAILABLE (daemon down or
restarting) is retried by DynoClient with a short backoff while the deadline allows; the channels are created
with a short reconnect backoff so that a retry really reconnects instead of failing fast.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from dyno.client.client import DynoClient
from dyno.client.errors import DynoError
from dyno.client.hosts import DEFAULT_PORT, Host, dedupe, parse_host
from dyno.client.local_socket import local_target
from dyno.v1 import dyno_pb2

if TYPE_CHECKING:  # its values come from the callers that use auth (dyno.client.auth loads ssl, secretfiles)
    from dyno.client.auth import ClientAuth

__all__ = ["Cluster", "ClientFactory", "HostResult", "failed", "open_client", "succeeded"]

log = logging.getLogger(__name__)

T = TypeVar("T")
ClientFactory = Callable[[Host], DynoClient]

# Reconnect quickly: grpc's default first reconnect backoff is 1 s, during which every call on a channel that
# just failed to connect fails at once; a retry would then be pointless.
_CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


def open_client(
    host: Host,
    auth: ClientAuth | None = None,
    *,
    timeout_s: float = 5.0,
    retries: int = 2,
    options: Sequence[tuple[str, Any]] = (),
) -> DynoClient:
    """A DynoClient for `host` with `auth`'s TLS credentials, token metadata and channel options applied. The local
    host at dynod's default port is called on dynod's Unix socket when one answers there (unless TLS is asked for):
    the daemon then knows which user calls (dyno.client.local_socket)."""
    if auth is None:
        return DynoClient(host.target, timeout_s=timeout_s, retries=retries, options=options, via=local_target(host))
    return DynoClient(
        host.target,
        timeout_s=timeout_s,
        retries=retries,
        channel_credentials=auth.channel_credentials(),
        metadata=auth.metadata(),
        options=[*options, *auth.channel_options()],
        via=None if auth.secure else local_target(host),
    )


@dataclass(frozen=True)
class HostResult(Generic[T]):
    """The outcome of one host's call: `value` when ok, else `error` (one line) and `error_type` (the DynoError
    class name, e.g. "Unavailable", "DeadlineExceeded", "Unauthenticated")."""

    host: Host
    ok: bool
    value: T | None = None
    error: str | None = None
    error_type: str | None = None
    elapsed_s: float = 0.0
    reason: str = ""  # the daemon's ErrorInfo reason (dyno.error_reasons), "" when none

    @property
    def answer(self) -> T:
        """``value`` of an ok result, typed as the call's answer (``value`` is ``T | None`` for failed ones)."""
        if not self.ok:
            raise ValueError(f"{self.host}: no answer ({self.error})")
        return cast(T, self.value)


def succeeded(results: Sequence[HostResult[T]]) -> list[HostResult[T]]:
    return [r for r in results if r.ok]


def failed(results: Sequence[HostResult[T]]) -> list[HostResult[T]]:
    return [r for r in results if not r.ok]


class Cluster:
    """Concurrent calls to many daemons.

    hosts: Host values or "name[:port]" strings (duplicates dropped, order kept). deadline_s: the most any
    fan-out call takes, counted from its start, for every host. retries: UNAVAILABLE retries per RPC (within
    the deadline). auth: token / TLS for every host. client_factory: how to make a host's DynoClient (tests).
    Results come back in the order of `hosts`.
    """

    def __init__(
        self,
        hosts: Sequence[Host | str],
        *,
        max_concurrency: int = 256,
        deadline_s: float = 5.0,
        retries: int = 2,
        auth: ClientAuth | None = None,
        default_port: int = DEFAULT_PORT,
        client_factory: ClientFactory | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        if not deadline_s > 0:
            raise ValueError("deadline_s must be > 0")
        self.hosts: list[Host] = dedupe(h if isinstance(h, Host) else parse_host(h, default_port) for h in hosts)
        self.max_concurrency = max_concurrency
        self.deadline_s = deadline_s
        self.retries = retries
        self.auth = auth
        self._factory = client_factory or self._make_client
        self._clients: dict[Host, DynoClient] = {}
        self._clients_lock = threading.Lock()

    # -- clients ----------------------------------------------------------------------------------------------
    def _make_client(self, host: Host) -> DynoClient:
        return open_client(host, self.auth, timeout_s=self.deadline_s, retries=self.retries, options=_CHANNEL_OPTIONS)

    def client(self, host: Host) -> DynoClient:
        """The cached client of `host` (made on first use; channels are reused across fan-outs)."""
        with self._clients_lock:
            c = self._clients.get(host)
            if c is None:
                c = self._clients[host] = self._factory(host)
            return c

    def close(self) -> None:
        with self._clients_lock:
            clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            c.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self.hosts)

    def __iter__(self) -> Iterator[Host]:
        return iter(self.hosts)

    # -- fan-out ----------------------------------------------------------------------------------------------
    def _one(self, host: Host, fn: Callable[[DynoClient], T], end: float) -> HostResult[T]:
        start = time.monotonic()
        budget = end - start
        if budget <= 0.01:
            return HostResult(
                host,
                False,
                # not this host's fault: slow hosts held every slot (the CLI's option is --max-concurrency)
                error="not called before the deadline: the hosts called first held all --max-concurrency "
                "(max_concurrency) slots until then (raise it, or the deadline)",
                error_type="DeadlineExceeded",
            )
        try:
            # A per-call view of the cached client: same channel, this fan-out's remaining time as its deadline.
            view = copy.copy(self.client(host))
            view.timeout_s = budget
            value = fn(view)
        except DynoError as e:
            return HostResult(
                host,
                False,
                error=e.message,
                error_type=type(e).__name__,
                elapsed_s=time.monotonic() - start,
                reason=e.reason,
            )
        except Exception as e:  # a bug in fn must not hide the other hosts' results
            log.debug("call to %s raised", host, exc_info=True)
            return HostResult(
                host,
                False,
                error=f"{type(e).__name__}: {e}",
                error_type=type(e).__name__,
                elapsed_s=time.monotonic() - start,
            )
        return HostResult(host, True, value=value, elapsed_s=time.monotonic() - start)

    def call(
        self, fn: Callable[[DynoClient], T], *, deadline_s: float | None = None, hosts: Sequence[Host] | None = None
    ) -> list[HostResult[T]]:
        """Run `fn(client)` for every host (or only `hosts`, some of this cluster's) concurrently; one HostResult per
        host, in that order. Returns within the deadline (+ a few ms): a host still running then is reported as
        DeadlineExceeded and abandoned.

        `fn` gets a view of the host's cached client whose `timeout_s` is the time left; it must not close it.
        A DynoError from `fn` is that host's error; so is any other exception (as "Type: message"). Several
        fan-outs may run at once from different threads (e.g. progress polling while files are fetched)."""
        deadline = self.deadline_s if deadline_s is None else deadline_s
        todo = self.hosts if hosts is None else list(hosts)
        if not todo:
            return []
        start = time.monotonic()
        end = start + deadline
        pool = futures.ThreadPoolExecutor(
            max_workers=min(self.max_concurrency, len(todo)), thread_name_prefix="dyno-cluster"
        )
        try:
            futs = [pool.submit(self._one, h, fn, end) for h in todo]
            # A little grace past the deadline for calls whose grpc deadline fires right at it.
            futures.wait(futs, timeout=max(0.0, end - time.monotonic()) + 0.25)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        results: list[HostResult[T]] = []
        for host, fut in zip(todo, futs, strict=True):
            if fut.done() and not fut.cancelled():
                results.append(fut.result())
            else:
                results.append(
                    HostResult(
                        host,
                        False,
                        error=f"no answer within the {deadline:g} s deadline",
                        error_type="DeadlineExceeded",
                        elapsed_s=time.monotonic() - start,
                    )
                )
        return results

    def status(self) -> list[HostResult[dyno_pb2.Status]]:
        return self.call(lambda c: c.status())

    def version(self) -> list[HostResult[dyno_pb2.VersionInfo]]:
        return self.call(lambda c: c.version())

    def list_processes(self, job_id: str = "") -> list[HostResult[dyno_pb2.ListProcessesResponse]]:
        return self.call(lambda c: c.list_processes(job_id))

    def list_jobs(self, request: dyno_pb2.ListJobsRequest) -> list[HostResult[dyno_pb2.ListJobsResponse]]:
        return self.call(lambda c: c.list_jobs(request))

    def list_job_pages(self, request: dyno_pb2.ListJobsRequest) -> list[HostResult[list[dyno_pb2.ListJobsResponse]]]:
        """DynoClient.list_job_pages on every host."""
        return self.call(lambda c: c.list_job_pages(request))

    def metrics(
        self, names: Sequence[str] = (), since_ms: int = 0, limit: int = 0
    ) -> list[HostResult[dyno_pb2.GetMetricsResponse]]:
        return self.call(lambda c: c.metrics(names, since_ms=since_ms, limit=limit))
