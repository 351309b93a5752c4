"""Cluster fan-out against real dynod processes and lightweight fake Dyno servers on loopback ports."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tls_certs import have_openssl, make_test_certs, mtls_dynod_args

from dyno.client.auth import ClientAuth
from dyno.client.cluster import Cluster, HostResult, failed, succeeded
from dyno.client.hosts import Host
from dyno.daemon.auth import UNAUTHENTICATED_MESSAGE, TokenAuthInterceptor
from dyno.daemon.fake_server import FakeServer, start_fake_servers
from dyno.v1 import dyno_pb2

from conftest import Dynod, free_port, wait_for

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


# ---- auth on real dynods ---------------------------------------------------------------------------------------


def _token_file(d: Path, token: str) -> Path:
    p = d / "token"
    p.write_text(token + "\n")
    p.chmod(0o600)
    return p


def _start_trace(client):  # type: ignore[no-untyped-def]
    return client.call(client.stub.StartTrace, dyno_pb2.TraceRequest(job_id="no-such-job", duration_ms=100))


def test_real_dynods_with_and_without_token(dynod_factory: Callable[..., Dynod], tmp_path: Path) -> None:
    token = "real-token-0123456789abcdef"
    protected = dynod_factory("--auth-token-file", str(_token_file(tmp_path, token)))
    open_ = dynod_factory()
    hosts = [_host(protected.port), _host(open_.port)]
    with Cluster(hosts, deadline_s=10) as cluster:
        assert all(r.ok for r in cluster.status())  # read-only RPCs stay open everywhere
        no_token = cluster.call(_start_trace)
    assert no_token[0].error_type == "Unauthenticated" and UNAUTHENTICATED_MESSAGE in (no_token[0].error or "")
    assert no_token[1].error_type != "Unauthenticated"  # auth off: the call reaches the daemon
    with Cluster(hosts, deadline_s=10, auth=ClientAuth(token=token)) as cluster:
        with_token = cluster.call(_start_trace)
    # Past auth: the daemon answers (or says tracing is not there yet), never UNAUTHENTICATED.
    assert [r.error_type != "Unauthenticated" for r in with_token] == [True, True]


def test_real_dynod_mtls(dynod_factory: Callable[..., Dynod], tmp_path: Path) -> None:
    if not have_openssl():
        pytest.skip("openssl CLI not available to make test certificates")
    certs = make_test_certs(tmp_path)
    d = dynod_factory(*mtls_dynod_args(certs), start=False)
    d.start()
    good = ClientAuth.from_files(
        tls_ca=certs / "ca.pem",
        tls_cert=certs / "client.pem",
        tls_key=certs / "client.key",
        tls_server_name="localhost",
    )
    with Cluster([_host(d.port)], deadline_s=10, auth=good) as cluster:
        (ok,) = cluster.status()
    assert ok.ok and ok.value.pid == d.proc.pid
    for auth in (None, ClientAuth.from_files(tls_ca=certs / "ca.pem", tls_server_name="localhost")):
        with Cluster([_host(d.port)], deadline_s=3, retries=0, auth=auth) as cluster:
            (refused,) = cluster.status()
        assert not refused.ok and refused.error_type == "Unavailable"


def test_dynod_warns_when_exposed_without_auth(dynod_factory: Callable[..., Dynod], tmp_path: Path) -> None:
    exposed = dynod_factory("--listen", "0.0.0.0", "--insecure-allow-unauthenticated-remote")
    assert "SECURITY: listening on 0.0.0.0 without --auth-token-file or TLS" in exposed.log
    guarded = dynod_factory("--listen", "0.0.0.0", "--auth-token-file", str(_token_file(tmp_path, "t" * 32)))
    assert "SECURITY" not in guarded.log


def test_dynod_refuses_to_listen_beyond_loopback_without_auth(dynod_factory: Callable[..., Dynod]) -> None:
    d = dynod_factory("--listen", "0.0.0.0", start=False)
    with contextlib.suppress(RuntimeError):
        d.start()
    assert d.proc is not None and d.proc.wait(15) == 2  # a configuration error
    wait_for(lambda: "dynod: error: listen '0.0.0.0' is beyond loopback" in d.log)
    assert "--insecure-allow-unauthenticated-remote" in d.log and "Traceback" not in d.log


def test_dynod_refuses_a_missing_token_file(dynod_factory: Callable[..., Dynod], tmp_path: Path) -> None:
    d = dynod_factory("--auth-token-file", str(tmp_path / "missing"), start=False)
    # Dynod.start may or may not notice the exit (its stderr pump can end before the exit is reaped); the exit
    # code and the message are what matter.
    with contextlib.suppress(RuntimeError):
        d.start()
    assert d.proc is not None and d.proc.wait(15) == 2  # a config error, like any other unusable setting
    wait_for(lambda: f"dynod: error: auth token file {tmp_path / 'missing'} does not exist" in d.log)
