"""dynod's Prometheus endpoint over a real socket: idle and slow clients cannot grow its threads or keep a scrape out,
and every answer is the one prometheus_client's own server gives (its start_http_server starts one thread per
connection, with no bound and no timeout: 200 connections that send nothing would be 200 threads, for as long as the
clients like)."""

from __future__ import annotations

import gzip
import re
import socket
import threading
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import start_http_server
from prometheus_client.parser import text_string_to_metric_families

from dyno.daemon.metrics_http import MAX_CONNECTIONS, MetricsHTTPServer
from dyno.daemon.prometheus import serve_metrics

pytestmark = pytest.mark.unit


@pytest.fixture
def registry() -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    Counter("dyno_test_events", "events", registry=reg).inc(3)
    Gauge("dyno_test_power_watts", "power", ["gpu"], registry=reg).labels(gpu="0").set(250.0)
    return reg


@pytest.fixture
def server(registry: CollectorRegistry) -> Iterator[MetricsHTTPServer]:
    srv = serve_metrics(registry, "127.0.0.1", 0)
    try:
        yield srv
    finally:
        srv.close()


def _exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return re.sub(rb"\r\nDate: [^\r]*", b"\r\nDate: -", out)  # the only part that differs by the second


def _gunzipped(answer: bytes) -> bytes:
    """A gzipped answer with its body decompressed and no Content-Length: dynod compresses at level 1 (cheaper
    scrapes), prometheus_client at 9; what the body holds is the same."""
    head, _, body = answer.partition(b"\r\n\r\n")
    if b"\r\nContent-Encoding: gzip" not in head:
        return answer
    return re.sub(rb"\r\nContent-Length: \d+", b"", head) + b"\r\n\r\n" + gzip.decompress(body)


def _scrape(port: int) -> dict[str, object]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


_REQUESTS = [
    b"GET /metrics HTTP/1.1\r\nHost: node1\r\nUser-Agent: Prometheus/2.53\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nAccept-Encoding: gzip\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n",
    b"GET /anything?name[]=dyno_test_events_total HTTP/1.0\r\n\r\n",
    b"GET /favicon.ico HTTP/1.1\r\n\r\n",
    b"OPTIONS /metrics HTTP/1.1\r\n\r\n",
    b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
    b"HEAD /metrics HTTP/1.1\r\n\r\n",
    b"not http\r\n\r\n",
]


def test_every_answer_is_byte_for_byte_prometheus_clients_own(
    registry: CollectorRegistry, server: MetricsHTTPServer
) -> None:
    theirs, _thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        for request in _REQUESTS:
            assert _gunzipped(_exchange(server.port, request)) == _gunzipped(_exchange(theirs.server_port, request))
    finally:
        theirs.shutdown()
        theirs.server_close()
    gzipped = _exchange(server.port, _REQUESTS[1])
    assert b"\r\nContent-Encoding: gzip\r\n" in gzipped and gzipped.startswith(b"HTTP/1.0 200 OK\r\n")
    fams = _scrape(server.port)
    assert fams["dyno_test_events"].samples[0].value == 3.0  # type: ignore[attr-defined]
    assert fams["dyno_test_power_watts"].samples[0].labels == {"gpu": "0"}  # type: ignore[attr-defined]


def test_idle_and_slow_clients_neither_add_threads_nor_keep_a_scrape_out(server: MetricsHTTPServer) -> None:
    before = set(threading.enumerate())  # (other tests' pools may still be winding down: compare sets, not counts)
    idle = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(150)]
    slow = []
    for _ in range(50):  # slowloris: a head begun and never finished
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.sendall(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
        slow.append(s)
    try:
        for _ in range(3):
            fams = _scrape(server.port)
            assert fams["dyno_test_events"].samples[0].value == 3.0  # type: ignore[attr-defined]
        assert set(threading.enumerate()) - before == set()  # one server thread, whatever the clients do
        assert [t.name for t in threading.enumerate()].count("dyno-metrics-http") == 1
        assert server.open_connections <= MAX_CONNECTIONS
        # the oldest were closed to make room: the server's end of them is gone
        assert idle[0].recv(1) == b""
    finally:
        for s in idle + slow:
            s.close()


def test_a_silent_connection_is_dropped_after_the_request_timeout(registry: CollectorRegistry) -> None:
    from prometheus_client import make_wsgi_app

    srv = MetricsHTTPServer(make_wsgi_app(registry), "127.0.0.1", 0, request_timeout_s=0.2)
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\n")  # and nothing more
            assert s.recv(1) == b""  # closed by the server, without an answer
        assert srv.open_connections == 0
    finally:
        srv.close()


def test_a_head_past_the_bound_is_dropped_and_the_server_goes_on(server: MetricsHTTPServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * 64 * 1024)
        try:
            assert s.recv(1) == b""
        except ConnectionResetError:
            pass  # closed with our bytes unread: the kernel resets it
    assert "dyno_test_events" in _scrape(server.port)


def test_the_newest_connections_win_when_full(registry: CollectorRegistry) -> None:
    from prometheus_client import make_wsgi_app

    srv = MetricsHTTPServer(make_wsgi_app(registry), "127.0.0.1", 0, max_connections=4)
    try:
        held = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(4)]
        assert "dyno_test_events" in _scrape(srv.port)  # the fifth: served, the oldest closed for it
        assert held[0].recv(1) == b""
        for s in held:
            s.close()
    finally:
        srv.close()


def test_close_is_idempotent_and_frees_the_port(registry: CollectorRegistry) -> None:
    srv = serve_metrics(registry, "127.0.0.1", 0)
    port = srv.port
    srv.close()
    srv.close()
    assert not any(t.name == "dyno-metrics-http" for t in threading.enumerate())
    again = serve_metrics(registry, "127.0.0.1", port)  # rebinds at once (SO_REUSEADDR, as before)
    try:
        with pytest.raises(OSError):  # but a port in use is an error, as before (app.py: StartupError)
            serve_metrics(registry, "127.0.0.1", port)
    finally:
        again.close()
