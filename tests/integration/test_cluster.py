"""Cluster fan-out against real dynod processes and lightweight fake Dyno servers on loopback ports."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import Dynod, free_port, wait_for
from dyno.client.auth import ClientAuth
from dyno.client.cluster import Cluster, HostResult, failed, succeeded
from dyno.client.hosts import Host
from dyno.daemon.auth import UNAUTHENTICATED_MESSAGE, TokenAuthInterceptor
from dyno.daemon.fake_server import FakeServer, start_fake_servers
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.integration


@pytest.fixture
def fakes() -> Iterator[list[FakeServer]]:
    servers = start_fake_servers(4)
    yield servers
    for s in servers:
        s.stop()


def _host(target_port: int) -> Host:
    return Host("127.0.0.1", target_port)


def test_status_across_real_and_fake_daemons(dynod_factory: Callable[..., Dynod], fakes: list[FakeServer]) -> None:
    real = [dynod_factory(), dynod_factory()]
    hosts = [_host(real[0].port), *[_host(f.port) for f in fakes], _host(real[1].port)]
    with Cluster(hosts, deadline_s=10) as cluster:
        results = cluster.status()
        assert [r.host for r in results] == hosts  # input order
        assert all(r.ok and r.error is None for r in results), [r.error for r in failed(results)]
        assert results[0].value.pid == real[0].proc.pid and results[-1].value.pid == real[1].proc.pid
        assert [r.value.hostname for r in results[1:-1]] == [f"fake-{f.port}" for f in fakes]
        assert {s.name for s in results[0].value.samplers} >= {"host", "gpu"}

        # Metrics from the real daemons' history (they sample every 0.2 s).
        def all_sampled() -> list[HostResult[dyno_pb2.GetMetricsResponse]] | None:
            r = cluster.metrics(["gpu_*"], limit=1)
            return r if all(x.ok and x.value.samples for x in r) else None

        metrics = wait_for(all_sampled, timeout_s=20)
        names = {m.name for m in metrics[0].value.samples[-1].metrics}
        assert names and all(n.startswith("gpu_") for n in names)

        # The channels are cached: a second fan-out reuses them and still answers for everyone.
        assert len(succeeded(cluster.version())) == len(hosts)


def test_stopped_daemon_is_a_per_host_error(dynod_factory: Callable[..., Dynod], fakes: list[FakeServer]) -> None:
    real = [dynod_factory(), dynod_factory()]
    hosts = [_host(real[0].port), _host(real[1].port), *[_host(f.port) for f in fakes]]
    with Cluster(hosts, deadline_s=10, retries=1) as cluster:
        assert all(r.ok for r in cluster.status())
        assert real[1].stop() == 0
        fakes[0].stop()
        results = cluster.status()
    down = {r.host for r in failed(results)}
    assert down == {hosts[1], hosts[2]}
    for r in failed(results):
        assert r.error_type == "Unavailable" and "cannot reach dynod" in (r.error or "")
    assert [r.value.hostname for r in results if r.ok][1:] == [f"fake-{f.port}" for f in fakes[1:]]


def test_slow_host_does_not_hold_the_others(fakes: list[FakeServer]) -> None:
    (slow,) = start_fake_servers(1, delay_s=60)
    never = free_port()  # nothing listens here
    hosts = [_host(f.port) for f in fakes[:2]] + [_host(slow.port), _host(never)] + [_host(f.port) for f in fakes[2:]]
    try:
        with Cluster(hosts, deadline_s=1.0) as cluster:
            start = time.monotonic()
            results = cluster.status()
            took = time.monotonic() - start
    finally:
        slow.stop(grace=0)
    # Far below the slow host's 60 s: the fan-out gave up on it at its deadline.
    assert took < 30
    by_host = {r.host: r for r in results}
    assert by_host[_host(slow.port)].error_type == "DeadlineExceeded"
    assert by_host[_host(never)].error_type == "Unavailable"
    assert len(succeeded(results)) == 4


def test_concurrency_bound_still_answers_everyone(fakes: list[FakeServer]) -> None:
    with Cluster([f.target for f in fakes], max_concurrency=1, deadline_s=10) as cluster:
        results = cluster.list_processes("job1")
    assert [len(r.value.processes) for r in results] == [2, 2, 2, 2]
    assert results[0].host == Host("127.0.0.1", fakes[0].port)


def test_generic_call_and_errors_in_fn(fakes: list[FakeServer]) -> None:
    def fn(client):  # type: ignore[no-untyped-def]
        hostname = client.status().hostname
        if hostname == f"fake-{fakes[1].port}":
            raise RuntimeError("boom")
        return hostname

    with Cluster([f.target for f in fakes], deadline_s=10) as cluster:
        results = cluster.call(fn)
    assert [r.ok for r in results] == [True, False, True, True]
    assert results[1].error == "RuntimeError: boom"
    assert results[0].value == f"fake-{fakes[0].port}"


def test_token_auth_through_the_cluster(tmp_path: Path) -> None:
    token = "cluster-token-0123456789abcdef"
    servers = start_fake_servers(3, interceptors=[TokenAuthInterceptor(token)])
    request = dyno_pb2.TraceRequest(job_id="job1", trace_id="t-1")

    def start(client):  # type: ignore[no-untyped-def]
        return client.call(client.stub.StartTrace, request)

    try:
        targets = [s.target for s in servers]
        with Cluster(targets, deadline_s=10, auth=ClientAuth(token=token)) as cluster:
            assert [r.value.trace_id for r in cluster.call(start)] == ["t-1"] * 3
        with Cluster(targets, deadline_s=10) as cluster:
            results = cluster.call(start)
            assert {r.error_type for r in results} == {"Unauthenticated"}
            assert UNAUTHENTICATED_MESSAGE in (results[0].error or "")
            assert all(r.ok for r in cluster.status())  # read-only RPCs stay open
    finally:
        for s in servers:
            s.stop()
