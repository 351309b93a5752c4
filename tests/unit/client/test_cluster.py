"""Cluster's fan-out logic with injected clients (no network): order, errors, deadline, abandoned hosts."""

from __future__ import annotations

import threading
import time
from concurrent import futures
from typing import Any

import grpc
import pytest

from dyno.client.cli import main as cli_main
from dyno.client.cluster import Cluster, failed, succeeded
from dyno.client.errors import NotFound, Unavailable
from dyno.client.hosts import Host

pytestmark = pytest.mark.unit


class FakeClient:
    """Stands in for DynoClient: `behaviour` decides what status() does for this host."""

    def __init__(self, host: Host, behaviour: dict[str, Any]) -> None:
        self.host = host
        self.target = host.target
        self.timeout_s = 5.0
        self.behaviour = behaviour
        self.closed = False

    def status(self) -> str:
        action = self.behaviour.get(self.host.name, "ok")
        if action == "down":
            raise Unavailable("cannot reach dynod", self.target)
        if action == "missing":
            raise NotFound("no such thing", self.target)
        if action == "hang":
            self.behaviour["release"].wait(30)  # ignores its deadline, like a wedged call
        return f"status of {self.host.name} (timeout {self.timeout_s:.1f})"

    def close(self) -> None:
        self.closed = True


def _cluster(hosts: list[str], behaviour: dict[str, Any], **kw: Any) -> tuple[Cluster, list[FakeClient]]:
    made: list[FakeClient] = []

    def factory(host: Host) -> FakeClient:
        made.append(FakeClient(host, behaviour))
        return made[-1]

    return Cluster(hosts, client_factory=factory, **kw), made  # type: ignore[arg-type]


def test_results_in_host_order_with_per_host_errors() -> None:
    cluster, _ = _cluster(["a", "b", "c:1779", "d"], {"b": "down", "d": "missing"})
    results = cluster.status()  # type: ignore[var-annotated]
    assert [r.host for r in results] == [Host("a"), Host("b"), Host("c", 1779), Host("d")]
    assert [r.ok for r in results] == [True, False, True, False]
    assert results[1].error_type == "Unavailable" and results[1].error == "cannot reach dynod"
    assert results[3].error_type == "NotFound"
    assert [r.host.name for r in succeeded(results)] == ["a", "c"]
    assert [r.host.name for r in failed(results)] == ["b", "d"]
    assert results[0].answer == "status of a (timeout 5.0)"  # the typed value of an ok result
    with pytest.raises(ValueError, match="b:1778: no answer \\(cannot reach dynod\\)"):
        _ = results[1].answer  # a failed host has none: never a silent None


def test_hosts_are_deduplicated_and_clients_cached_and_closed() -> None:
    cluster, made = _cluster(["a", "b", "a", "a:1778"], {})
    assert cluster.hosts == [Host("a"), Host("b")]
    cluster.status()
    cluster.status()
    assert len(made) == 2  # one client per host, reused
    cluster.close()
    assert all(c.closed for c in made)


def test_each_call_gets_the_remaining_time_as_its_deadline() -> None:
    cluster, made = _cluster(["a"], {}, deadline_s=3.0)
    (r,) = cluster.status()
    assert r.ok and r.value.endswith("(timeout 3.0)")
    assert made[0].timeout_s == 5.0  # the cached client is not modified; calls use a per-call view


def test_a_wedged_host_is_abandoned_at_the_deadline() -> None:
    release = threading.Event()
    cluster, _ = _cluster(["a", "wedged", "b"], {"wedged": "hang", "release": release}, deadline_s=0.5)
    try:
        start = time.monotonic()
        results = cluster.status()
        took = time.monotonic() - start
    finally:
        release.set()
    assert [r.ok for r in results] == [True, False, True]
    assert results[1].error_type == "DeadlineExceeded" and "0.5 s deadline" in (results[1].error or "")
    assert took < 10  # far less than the 30 s the wedged call would take


def test_queued_hosts_that_cannot_start_before_the_deadline() -> None:
    release = threading.Event()
    cluster, _ = _cluster(
        ["wedged", "a", "b"], {"wedged": "hang", "release": release}, deadline_s=0.3, max_concurrency=1
    )
    try:
        results = cluster.status()
    finally:
        release.set()
    assert not any(r.ok for r in results)
    assert {r.error_type for r in results} == {"DeadlineExceeded"}


def test_generic_call_and_bugs_in_fn() -> None:
    cluster, _ = _cluster(["a", "b"], {})

    def fn(client: FakeClient) -> int:
        if client.host.name == "b":
            raise KeyError("oops")
        return 42

    results = cluster.call(fn)  # type: ignore[arg-type]
    assert results[0].value == 42 and results[1].error == "KeyError: 'oops'"


def test_empty_cluster_and_bad_arguments() -> None:
    assert Cluster([]).status() == []
    with pytest.raises(ValueError):
        Cluster(["a"], max_concurrency=0)
    with pytest.raises(ValueError):
        Cluster(["a"], deadline_s=0)


def test_concurrent_fan_outs_from_several_threads() -> None:
    cluster, made = _cluster([f"h{i}" for i in range(20)], {})
    outcomes: list[list[bool]] = []

    def run() -> None:
        outcomes.append([r.ok for r in cluster.status()])

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert outcomes == [[True] * 20] * 4
    assert len(made) == 20  # still one cached client per host


# A host never called because slow hosts held every --max-concurrency slot until the deadline says so, naming the
# CLI's option


class _Slow(grpc.GenericRpcHandler):
    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        def slow(request: bytes, context: grpc.ServicerContext) -> bytes:
            time.sleep(5)
            return b""

        return grpc.unary_unary_rpc_method_handler(slow)


def test_a_host_left_uncalled_names_max_concurrency(capsys: pytest.CaptureFixture[str]) -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((_Slow(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        hosts = f"127.0.0.1:{port},127.0.0.1:1"  # the second is never called: the first holds the only slot
        code = cli_main(["status", "--hosts", hosts, "--timeout-s", "1", "--max-concurrency", "1"])
    finally:
        server.stop(0)
    err = capsys.readouterr().err
    assert code == 1
    line = next(x for x in err.splitlines() if x.startswith("dyno-cli: error: 127.0.0.1:1:"))
    assert "--max-concurrency" in line and "not called before the deadline" in line, line
