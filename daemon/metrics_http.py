"""The HTTP server of the Prometheus endpoint: one thread for any number of clients.

Why not prometheus_client's `start_http_server`: it is a ThreadingWSGIServer, one new thread per connection with no
bound, and each thread waits as long as its client wants (no socket timeout). A scrape storm or slow clients
(slowloris: connect, send nothing or a byte at a time) grew dynod by a thread each, without limit.

Here one asyncio loop thread reads every request head (at most MAX_HEAD_BYTES, within REQUEST_TIMEOUT_S, else the
connection is dropped), and at most MAX_CONNECTIONS are open: a new one past it closes the oldest, so idle
connections can never keep a real scrape out. A complete request is answered by the WSGI app it is given (dynod's:
dyno.daemon.exposition.make_app) through wsgiref's WSGIRequestHandler, run on the loop thread: a scrape is about a
millisecond of work. The answer (status line, headers, gzip negotiation, OpenMetrics, `name[]`, /favicon.ico,
OPTIONS, 405) is what prometheus_client's own server sends (a gzipped body compressed at another level).
"""

from __future__ import annotations

import asyncio
import io
import logging
import socket
import threading
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler

__all__ = ["MAX_CONNECTIONS", "MAX_HEAD_BYTES", "REQUEST_TIMEOUT_S", "MetricsHTTPServer"]

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 64  # open at once; Prometheus uses one per target and scrape
MAX_HEAD_BYTES = 16 * 1024  # request line + headers (a scrape's are ~200 bytes)
REQUEST_TIMEOUT_S = 10.0  # the whole exchange, head to last byte sent (Prometheus' default scrape timeout)

WsgiApp = Callable[..., Any]


class _Environ:
    """What WSGIRequestHandler asks of its server: the base environ and the app (wsgiref.simple_server.WSGIServer
    sets the same keys at bind time)."""

    def __init__(self, app: WsgiApp, host: str, port: int) -> None:
        self._app = app
        self.base_environ = {
            "SERVER_NAME": host,
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PORT": str(port),
            "REMOTE_HOST": "",
            "CONTENT_LENGTH": "",
            "SCRIPT_NAME": "",
        }

    def get_app(self) -> WsgiApp:
        return self._app


class _BufferedHandler(WSGIRequestHandler):
    """wsgiref's request handler over a request already read (`request` is its bytes); the answer goes to
    `self.wfile` (a BytesIO), which the loop then sends."""

    def setup(self) -> None:
        self.rfile = io.BytesIO(self.request)
        self.wfile = self.answer = io.BytesIO()

    def finish(self) -> None:  # keeps wfile's bytes for the caller (StreamRequestHandler.finish closes it)
        pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class' name)
        pass  # a scrape every few seconds is not news (prometheus_client's _SilentHandler logs nothing either)


def _bind(addr: str, port: int) -> socket.socket:
    """A listening TCP socket of the address family `addr` resolves to (as prometheus_client picks it)."""
    family, _, _, _, sockaddr = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as http.server does: restarts rebind at once
        sock.bind(sockaddr)
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class MetricsHTTPServer:
    """Serves `app` on addr:port from one daemon thread until close(). Raises OSError when it cannot bind."""

    def __init__(
        self,
        app: WsgiApp,
        addr: str,
        port: int,
        *,
        max_connections: int = MAX_CONNECTIONS,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self._sock = _bind(addr, port)
        self.port: int = self._sock.getsockname()[1]
        self._environ = _Environ(app, addr, self.port)
        self._max_connections = max_connections
        self._timeout_s = request_timeout_s
        self._conns: dict[asyncio.Task[None], None] = {}  # open connections, oldest first
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="dyno-metrics-http", daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._start(), self._loop).result()
        except BaseException:
            self.close()
            raise

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._client, sock=self._sock, limit=MAX_HEAD_BYTES)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # a connection callback always runs in a task
        self._conns[task] = None
        if len(self._conns) > self._max_connections:
            # the oldest: idle, slow or stuck, never worth more than a new one. Out of the count at once: its task
            # ends at its next step, and the next connection of the same accept batch must pick another.
            oldest = next(iter(self._conns))
            del self._conns[oldest]
            oldest.cancel()
        try:
            await asyncio.wait_for(self._exchange(reader, writer), self._timeout_s)
            writer.close()  # all sent (see _exchange): closes at once
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass  # dropped: too slow, too long, or gone
        except asyncio.CancelledError:
            pass  # evicted, or the server is closing
        finally:
            self._conns.pop(task, None)
            if not writer.is_closing():
                writer.transport.abort()  # nothing it still wants to send is worth keeping the socket for

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        peer = writer.get_extra_info("peername") or ("", 0)
        handler = _BufferedHandler(head, peer, self._environ)  # type: ignore[arg-type]
        writer.transport.set_write_buffer_limits(high=0)  # drain() returns once all of it is with the kernel
        writer.write(handler.answer.getvalue())
        await writer.drain()

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._conns):
            task.cancel()
        while self._conns:
            await asyncio.sleep(0)

    def close(self) -> None:
        """Stop serving, drop open connections, end the thread. Idempotent."""
        if self._loop.is_closed():
            return
        if self._thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=5)
            except Exception:
                log.exception("closing the metrics HTTP server")
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        self._sock.close()
        if not self._thread.is_alive():
            self._loop.close()
