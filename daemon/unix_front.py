"""A Unix socket whose callers a gRPC server can identify: dynod accepts each connection itself, reads the
kernel's SO_PEERCRED, and relays the bytes to the gRPC server's private socket from a socket bound to a fresh
abstract name, recorded in a PeerTable (dyno.daemon.peer_identity). grpc tells a servicer nothing of a Unix
socket's peer (grpc/grpc#15511) but reports that name as the call's peer.

One thread relays every connection (a selector, non-blocking sockets, a bounded buffer each way), so an idle
connection costs two file descriptors and no thread.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import selectors
import socket
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path

from dyno.daemon.peer_identity import PeerCred, PeerTable
from dyno.logthrottle import ThrottledLog

__all__ = ["BUFFER_BYTES", "UnixFront", "MAX_FRONT_CONNECTIONS", "MAX_FRONT_CONNECTIONS_PER_UID"]

log = logging.getLogger(__name__)

MAX_FRONT_CONNECTIONS = 512  # the gRPC servers behind bound connections too (connection_limits.py)
# Of one user: any local user may connect (0666), and one holding every place would lock the others out
MAX_FRONT_CONNECTIONS_PER_UID = 128
# Read at most this much ahead of a slow reader, each way: a connection holds at most twice it (a local user's 128
# connections that never read 64 MiB); the API socket's default (a fetch streams 1 MiB chunks through it)
BUFFER_BYTES = 256 * 1024
_UCRED = struct.Struct("3i")  # pid_t, uid_t, gid_t


class _Buffer:
    """Bytes on their way one direction: the chunks as received (no copy into one buffer, no shifting it down as it
    drains), and how far into the first one has been sent."""

    def __init__(self) -> None:
        self._chunks: collections.deque[bytes] = collections.deque()
        self._offset = 0
        self.size = 0

    def __bool__(self) -> bool:
        return self.size > 0

    def add(self, data: bytes) -> None:
        self._chunks.append(data)
        self.size += len(data)

    def send_to(self, sock: socket.socket) -> None:
        """Send what the socket takes now (non-blocking: BlockingIOError once it takes no more)."""
        while self._chunks:
            head = self._chunks[0]
            sent = sock.send(memoryview(head)[self._offset :])
            self._offset += sent
            self.size -= sent
            if self._offset < len(head):
                return
            self._chunks.popleft()
            self._offset = 0


@dataclass(eq=False)
class _Pipe:
    """One relayed connection: `client` (accepted) and `upstream` (to the gRPC server), a buffer each way."""

    client: socket.socket
    upstream: socket.socket
    name: str
    uid: int
    to_upstream: _Buffer = field(default_factory=_Buffer)
    to_client: _Buffer = field(default_factory=_Buffer)
    client_eof: bool = False
    upstream_eof: bool = False


def _peer_cred(sock: socket.socket) -> PeerCred:
    pid, uid, gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return PeerCred(pid, uid, gid)


def _end_writes(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # again, or the peer gone: nothing more to tell it
        sock.shutdown(socket.SHUT_WR)


class UnixFront:
    """Listens on `path` (mode `mode`) and relays to the Unix socket `upstream`, recording each relayed
    connection's credentials in `peers` for as long as it lasts."""

    def __init__(
        self,
        path: Path,
        upstream: Path,
        peers: PeerTable,
        *,
        mode: int = 0o666,
        max_connections: int = MAX_FRONT_CONNECTIONS,
        max_per_uid: int = MAX_FRONT_CONNECTIONS_PER_UID,
        buffer_bytes: int = BUFFER_BYTES,
    ) -> None:
        self.path = path
        self._upstream = upstream
        self._peers = peers
        self._mode = mode
        self._max = max_connections
        self._max_per_uid = max_per_uid
        self._buffer = buffer_bytes
        self._per_uid: collections.Counter[int] = collections.Counter()
        self._refusals = ThrottledLog(log, every_s=600.0)  # any local user can cause them at will
        self._sel = selectors.DefaultSelector()
        self._pipes: set[_Pipe] = set()
        self._listener: socket.socket | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind `path` (its folder must exist; a stale socket file there is the caller's to remove)."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(self.path))
            os.chmod(self.path, self._mode)
            listener.listen(128)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self._sel.register(listener, selectors.EVENT_READ, None)
        self._wake_r.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._run, name=f"unix-front:{self.path.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Close the listener and every relayed connection, and remove the socket file. Idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._thread is not None:
            self._thread.join(5.0)
        for pipe in list(self._pipes):
            self._close(pipe)
        if self._listener is not None:
            self._listener.close()
            with contextlib.suppress(OSError):
                self.path.unlink()
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()

    def connections(self) -> int:
        return len(self._pipes)

    # -- the relay thread -------------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                events = self._sel.select(timeout=1.0)
            except OSError:  # closed under us by stop()
                return
            for key, mask in events:
                if key.fileobj is self._listener:
                    self._accept()
                elif key.fileobj is self._wake_r:
                    return
                else:
                    pipe: _Pipe = key.data
                    if pipe in self._pipes:
                        self._pump(pipe, key.fileobj, mask)  # type: ignore[arg-type]

    def _accept(self) -> None:
        assert self._listener is not None
        try:
            client, _ = self._listener.accept()
        except OSError:
            return
        try:
            cred = _peer_cred(client)
        except OSError:
            client.close()
            return
        refusal = None
        if len(self._pipes) >= self._max:
            refusal = f"{len(self._pipes)} connections open, its limit"
        elif self._per_uid[cred.uid] >= self._max_per_uid:
            refusal = f"{self._per_uid[cred.uid]} connections of uid {cred.uid} open, the limit per user"
        if refusal is not None:
            self._refusals.warning("full", "%s: %s: refusing one", self.path, refusal)
            client.close()
            return
        name = self._peers.new_name()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.bind(b"\0" + name.encode())
            # recorded before the connect: grpc may read the first call off the connection at once
            self._peers.add(name, cred)
            upstream.connect(str(self._upstream))
        except OSError as e:
            self._peers.remove(name)
            client.close()
            upstream.close()
            if not self._stop.is_set():
                self._refusals.warning("relay", "%s: cannot relay a connection: %s", self.path, e.strerror or e)
            return
        client.setblocking(False)
        upstream.setblocking(False)
        pipe = _Pipe(client, upstream, name, cred.uid)
        self._pipes.add(pipe)
        self._per_uid[cred.uid] += 1
        self._sel.register(client, selectors.EVENT_READ, pipe)
        self._sel.register(upstream, selectors.EVENT_READ, pipe)

    def _pump(self, pipe: _Pipe, sock: socket.socket, mask: int) -> None:
        try:
            if mask & selectors.EVENT_READ:
                from_client = sock is pipe.client
                inbound = pipe.to_upstream if from_client else pipe.to_client
                data = sock.recv(self._buffer - inbound.size)
                if data:
                    inbound.add(data)
                elif from_client:
                    pipe.client_eof = True
                else:
                    pipe.upstream_eof = True
            # both ways at once, not at the next select: a write waits for the selector only when a socket is full
            for dst, out, eof in (
                (pipe.upstream, pipe.to_upstream, pipe.client_eof),
                (pipe.client, pipe.to_client, pipe.upstream_eof),
            ):
                try:
                    out.send_to(dst)
                except (BlockingIOError, InterruptedError):
                    continue
                if eof and not out:  # a side that ended, its bytes all delivered: pass the end on
                    _end_writes(dst)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:  # reset by either side: the connection is over
            self._close(pipe)
            return
        if pipe.client_eof and pipe.upstream_eof and not pipe.to_client and not pipe.to_upstream:
            self._close(pipe)
            return
        self._interest(pipe)

    def _interest(self, pipe: _Pipe) -> None:
        """Watch each socket for what it can do next: read while its side has not ended and the buffer it fills has
        room, write while the buffer it drains has bytes."""
        for sock, inbound, outbound, eof in (
            (pipe.client, pipe.to_upstream, pipe.to_client, pipe.client_eof),
            (pipe.upstream, pipe.to_client, pipe.to_upstream, pipe.upstream_eof),
        ):
            mask = (selectors.EVENT_READ if not eof and inbound.size < self._buffer else 0) | (
                selectors.EVENT_WRITE if outbound else 0
            )
            try:
                registered = self._sel.get_key(sock).events
            except KeyError:
                registered = 0
            if mask == registered:
                continue
            if not mask:
                self._sel.unregister(sock)
            elif registered:
                self._sel.modify(sock, mask, pipe)
            else:
                self._sel.register(sock, mask, pipe)

    def _unwatch(self, sock: socket.socket) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(sock)

    def _close(self, pipe: _Pipe) -> None:
        if pipe in self._pipes:
            self._pipes.discard(pipe)
            self._per_uid[pipe.uid] -= 1
            if self._per_uid[pipe.uid] <= 0:
                del self._per_uid[pipe.uid]
        self._peers.remove(pipe.name)
        for sock in (pipe.client, pipe.upstream):
            self._unwatch(sock)
            sock.close()
