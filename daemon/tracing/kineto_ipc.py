"""libkineto's daemon protocol (what unmodified PyTorch with KINETO_USE_DAEMON=1 speaks), byte-exact.

See ../shared/KINETO_IPC.md: AF_UNIX SOCK_DGRAM, one message per datagram, a 40-byte header
(`uint64 size`, `char type[32]`) then the payload. The daemon answers each `req` poll from the datagram's source
address within the client's ~90 ms receive window, with a config string or an empty (size 0) message.
The kernel-reported sender pid (SO_PASSCRED / SCM_CREDENTIALS) is the one registered; a payload claiming
another pid is rejected.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import stat
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from dyno.daemon.trusted_dirs import dir_problem
from dyno.logthrottle import ThrottledLog

__all__ = [
    "HEADER_SIZE",
    "ACTIVITY_PROFILER",
    "FramingError",
    "KinetoPoll",
    "KinetoHandler",
    "KinetoEndpoint",
    "encode_message",
    "decode_message",
    "parse_req",
    "parse_ctxt",
    "encode_req",
]

log = logging.getLogger(__name__)

_HEADER = struct.Struct("<Q32s")
HEADER_SIZE = _HEADER.size  # 40
_REQ_HEAD = struct.Struct("<iiq")  # type bitmask, n pids, job id
_CTXT = struct.Struct("<iiq")  # gpu, pid, job id
_UCRED = struct.Struct("<iII")  # pid_t, uid_t, gid_t
ACTIVITY_PROFILER = 2  # `type & 2`: the client accepts an activity (trace) config
MAX_PIDS = 64  # kineto sends own pid + up to 10 ancestors
MAX_DATAGRAM = 64 * 1024
DAEMON_SOCKET_NAME = "dynolog"  # libkineto's hard-coded destination in filesystem mode
CLIENT_SOCKET_PREFIX = "dynoconfigclient"  # libkineto's client sockets: dynoconfigclient<uuid>, never unlinked


class FramingError(ValueError):
    """A datagram that is not a well-formed libkineto message."""


def encode_message(kind: str, payload: bytes) -> bytes:
    raw = kind.encode("ascii")
    if len(raw) >= 32:
        raise FramingError(f"message type too long: {kind!r}")
    return _HEADER.pack(len(payload), raw) + payload


def decode_message(data: bytes) -> tuple[str, bytes]:
    if len(data) < HEADER_SIZE:
        raise FramingError(f"datagram of {len(data)} bytes is shorter than the {HEADER_SIZE}-byte header")
    size, raw_type = _HEADER.unpack_from(data)
    payload = data[HEADER_SIZE:]
    if size != len(payload):
        raise FramingError(f"header says {size} payload bytes, datagram carries {len(payload)}")
    kind = raw_type.split(b"\0", 1)[0].decode("ascii", "replace")
    return kind, payload


@dataclass(frozen=True)
class KinetoPoll:
    """One `req` poll, with the kernel's word on who sent it."""

    pid: int
    ancestry: tuple[int, ...]
    job_id: str  # decimal string of kineto's int64 job id
    type_mask: int
    uid: int = -1

    @property
    def wants_activities(self) -> bool:
        return bool(self.type_mask & ACTIVITY_PROFILER)


def parse_req(payload: bytes) -> tuple[int, list[int], int]:
    """-> (type bitmask, pids (own first), job id)."""
    if len(payload) < _REQ_HEAD.size:
        raise FramingError(f"req payload of {len(payload)} bytes, need at least {_REQ_HEAD.size}")
    type_mask, n, job_id = _REQ_HEAD.unpack_from(payload)
    if not 1 <= n <= MAX_PIDS:
        raise FramingError(f"req carries {n} pids")
    if len(payload) != _REQ_HEAD.size + 4 * n:
        raise FramingError(f"req with {n} pids must be {_REQ_HEAD.size + 4 * n} bytes, not {len(payload)}")
    pids = list(struct.unpack_from(f"<{n}i", payload, _REQ_HEAD.size))
    return type_mask, pids, job_id


def encode_req(type_mask: int, pids: list[int], job_id: int) -> bytes:
    """The client side of `req` (tests and the benchmark speak it like libkineto does)."""
    payload = _REQ_HEAD.pack(type_mask, len(pids), job_id) + struct.pack(f"<{len(pids)}i", *pids)
    return encode_message("req", payload)


def parse_ctxt(payload: bytes) -> tuple[int, int, int]:
    """-> (gpu, pid, job id)."""
    if len(payload) != _CTXT.size:
        raise FramingError(f"ctxt payload must be {_CTXT.size} bytes, not {len(payload)}")
    return _CTXT.unpack(payload)


class KinetoHandler(Protocol):
    def kineto_poll(self, poll: KinetoPoll) -> str | None:
        """Register/refresh the sender; return the config to hand over, or None. Must be fast (90 ms window)."""

    def kineto_context_count(self, gpu: int, pid: int, job_id: str) -> int: ...


class KinetoEndpoint:
    """Serves libkineto's datagrams on a background thread.

    name: abstract socket name (`b"\\0<name>\\0"`); socket_dir: filesystem mode (`<dir>/dynolog`) instead.
    """

    def __init__(self, handler: KinetoHandler, *, name: str = "dynolog", socket_dir: Path | None = None) -> None:
        self._handler = handler
        self._name = name
        self._socket_dir = socket_dir
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.rejected = 0  # datagrams dropped (malformed or pid mismatch), for tests and status
        # Any local user can send datagrams here: one WARNING per kind a minute, not one per datagram.
        self._warn = ThrottledLog(log)

    @property
    def address(self) -> str | bytes:
        if self._socket_dir is not None:
            return str(self._socket_dir / DAEMON_SOCKET_NAME)
        return b"\0" + self._name.encode() + b"\0"

    def describe(self) -> str:
        return str(self.address) if self._socket_dir is not None else self._name

    def start(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
            if self._socket_dir is not None:
                _make_socket_dir(self._socket_dir)
                path = Path(str(self.address))
                _remove_stale_socket(path)
                sock.bind(str(path))
                # Senders need write permission on the file; who they are is proven by SCM_CREDENTIALS anyway,
                # exactly as in the abstract namespace (which has no permissions at all).
                os.chmod(path, 0o666)
            else:
                sock.bind(self.address)
        except OSError as e:
            sock.close()
            holder = _abstract_holder(self._name) if e.errno == errno.EADDRINUSE and self._socket_dir is None else ""
            # str(e): "AF_UNIX path too long" and the like come without an errno or strerror
            why = f"{e.strerror or e}{holder}"
            raise OSError(e.errno, f"cannot bind kineto endpoint {self.describe()}: {why}") from None
        # Blocking receive, no timeout: an idle daemon must not wake up 4x a second; stop() wakes the loop with
        # shutdown(), which makes a blocked recvmsg return at once on Linux.
        self._sock = sock
        self._thread = threading.Thread(target=self._serve, name="kineto-ipc", daemon=True)
        self._thread.start()
        log.info("kineto endpoint listening on %s", self.describe())
        self.remove_stale_clients()

    def remove_stale_clients(self) -> int:
        """Filesystem mode: unlink the client socket files of exited trainers (libkineto leaves one per process
        that imported torch, DataLoader workers included, so the directory would grow without bound). Only
        sockets no process is bound to go. Returns how many were removed."""
        if self._socket_dir is None:
            return 0
        removed = 0
        try:
            names = [n for n in os.listdir(self._socket_dir) if n.startswith(CLIENT_SOCKET_PREFIX)]
        except OSError as e:
            log.debug("kineto endpoint: cannot list %s: %s", self._socket_dir, e)
            return 0
        for name in names:
            path = self._socket_dir / name
            try:
                if stat.S_ISSOCK(path.lstat().st_mode) and not _socket_in_use(path):
                    path.unlink()
                    removed += 1
            except OSError as e:  # gone meanwhile, or not ours to remove
                log.debug("kineto endpoint: cannot remove %s: %s", path, e)
        if removed:
            log.debug("kineto endpoint: removed %d stale client socket(s) from %s", removed, self._socket_dir)
        return removed

    def stop(self) -> None:
        self._stop.set()
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._sock is None:
            return  # never bound: the socket file (if any) is not ours
        self._sock.close()
        self._sock = None
        if self._socket_dir is not None:
            try:
                os.unlink(str(self.address))
            except OSError:
                pass

    def _serve(self) -> None:
        assert self._sock is not None
        sock = self._sock
        cmsg_space = socket.CMSG_SPACE(_UCRED.size)
        while not self._stop.is_set():
            try:
                data, ancdata, _flags, addr = sock.recvmsg(MAX_DATAGRAM, cmsg_space)
            except OSError as e:
                if self._stop.is_set():
                    return
                log.warning("kineto endpoint receive failed: %s", e)
                continue
            if self._stop.is_set():
                return
            try:
                reply = self._handle(data, ancdata)
            except FramingError as e:
                self.rejected += 1
                self._warn.warning("malformed", "kineto endpoint: dropped malformed datagram: %s", e)
                continue
            except Exception:
                log.exception("kineto endpoint: handler failed")
                continue
            if reply is None:
                continue
            if not addr:
                log.debug("kineto endpoint: unbound sender, cannot reply")
                continue
            try:
                # MSG_DONTWAIT: a sender whose receive queue is full (any local user can send polls and never
                # read the replies) made a blocking sendto wait forever, and every trainer's poll with it. A
                # libkineto client reads its reply at once; one that cannot take it now misses one poll.
                sock.sendto(reply, socket.MSG_DONTWAIT, addr)
            except OSError as e:  # the client went away between its send and our reply, or its queue is full
                log.debug("kineto endpoint: reply to %r failed: %s", addr, e)

    def _handle(self, data: bytes, ancdata: list[tuple[int, int, bytes]]) -> bytes | None:
        kind, payload = decode_message(data)
        cred = _credentials(ancdata)
        if kind == "req":
            type_mask, pids, job_id = parse_req(payload)
            if cred is None or cred[0] != pids[0]:
                self.rejected += 1
                self._warn.warning(
                    "spoofed",
                    "kineto endpoint: rejected req claiming pid %d from kernel pid %s (pid namespaces differ or "
                    "a spoofed sender)",
                    pids[0],
                    cred[0] if cred else "unknown",
                )
                return None
            poll = KinetoPoll(
                pid=cred[0], ancestry=tuple(pids[1:]), job_id=str(job_id), type_mask=type_mask, uid=cred[1]
            )
            config = self._handler.kineto_poll(poll) or ""
            return encode_message("req", config.encode())
        if kind == "ctxt":
            gpu, pid, job_id = parse_ctxt(payload)
            if cred is None or cred[0] != pid:
                self.rejected += 1
                self._warn.warning(
                    "spoofed",
                    "kineto endpoint: rejected ctxt claiming pid %d from kernel pid %s",
                    pid,
                    cred[0] if cred else "unknown",
                )
                return None
            count = self._handler.kineto_context_count(gpu, pid, str(job_id))
            return encode_message("ctxt", struct.pack("<i", count))
        raise FramingError(f"unknown message type {kind!r}")


def _make_socket_dir(path: Path) -> None:
    """The filesystem-mode socket folder. Made here, it is 1777 like /tmp: each trainer creates its own client
    socket file in it (``dynoconfigclient<uuid>``), whatever its user, and the sticky bit keeps users from removing
    each other's (0755 from the umask let only dynod's own user trace). A folder that exists keeps its mode: the
    admin chose who may use it. Checked first (dyno.daemon.trusted_dirs), as it and the folders above it are before
    this makes or chmods anything: a folder another user made, or one where others may rename entries, would let
    them replace dynod's socket with theirs and hand every trainer a config of their own."""
    problem = dir_problem(path, what="the kineto socket dir", key="kineto_socket_dir", shared=True)
    if problem is not None:
        raise OSError(errno.EPERM, problem)
    try:
        path.mkdir(parents=True)
    except FileExistsError:
        return
    os.chmod(path, 0o1777)


def _abstract_holder(name: str) -> str:
    """' (bound by pid P, uid U: ...)' for the process holding the abstract socket `name`, else ''. An abstract name
    has no permissions: any local user can bind libkineto's `dynolog` while dynod is not bound to it and answer every
    trainer's polls, so the start-up error says who holds it (another daemon, or someone else)."""
    shown = "@" + name + "@"  # /proc/net/unix shows the leading and trailing NUL as '@'
    try:
        with open("/proc/net/unix") as f:
            inodes = {fields[6] for line in f if len(fields := line.split()) >= 8 and fields[7] == shown}
    except OSError:
        return ""
    targets = {f"socket:[{inode}]" for inode in inodes}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()) if targets else ():
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in targets for fd in fds):
                uid = os.stat(f"/proc/{pid}").st_uid
                with open(f"/proc/{pid}/comm") as f:
                    return f" (bound by pid {pid}, uid {uid}: {f.read().strip()})"
        except OSError:
            continue
    return ""


def _credentials(ancdata: list[tuple[int, int, bytes]]) -> tuple[int, int, int] | None:
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(data) >= _UCRED.size:
            pid, uid, gid = _UCRED.unpack_from(data)
            return pid, uid, gid
    return None


def _remove_stale_socket(path: Path) -> None:
    """Unlink a socket file left by a dead daemon; refuse one a live daemon is bound to (unlinking it would
    silently cut that daemon off from its trainers)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise OSError(errno.EEXIST, f"{path} exists and is not a socket")
    if not _socket_in_use(path):
        path.unlink(missing_ok=True)
        return
    raise OSError(errno.EADDRINUSE, os.strerror(errno.EADDRINUSE))


def _socket_in_use(path: Path) -> bool:
    """Whether some process is bound to the datagram socket file at path."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        probe.connect(str(path))  # succeeds only while some socket is bound to the path
    except OSError:
        return False
    finally:
        probe.close()
    return True
