"""The Dyno API on a Unix socket (config api_socket, default dyno.sock beside the agent socket): what dyno-cli uses
for the local host, and the way dynod learns a local caller's uid from the kernel.

The gRPC server listens on a private socket (a 0700 folder of dynod's own: nobody else can connect to it) and a
UnixFront relays the public socket (0666: every local user may call) to it, recording each caller's credentials
(dyno.daemon.unix_front, dyno.daemon.peer_identity).
"""

from __future__ import annotations

import errno
import logging
import shutil
import socket
import stat
import tempfile
from pathlib import Path

from dyno.daemon.peer_identity import PeerTable
from dyno.daemon.trusted_dirs import dir_problem
from dyno.daemon.unix_front import UnixFront

__all__ = ["ApiSocket", "prepare_public_socket"]

log = logging.getLogger(__name__)

_MAX_PATH = 107  # sockaddr_un.sun_path holds 108 bytes, the terminating NUL included


def prepare_public_socket(path: Path, *, what: str, key: str) -> None:
    """Make `path`'s folder (0755), remove a stale socket file there; OSError naming `what` when the folder can be
    changed by other users, the path is too long or not a socket, or another daemon answers on it."""
    if len(str(path).encode()) > _MAX_PATH:
        raise OSError(errno.ENAMETOOLONG, f"{what} {path} is too long for a Unix socket (> {_MAX_PATH} bytes)")
    # whoever could rename entries in its folder could put a socket of their own in its place
    problem = dir_problem(path.parent, what=f"the {what}'s folder", key=key, shared=True)
    if problem is not None:
        raise OSError(errno.EPERM, problem)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    except OSError as e:
        raise OSError(e.errno, f"cannot create the {what}'s directory {path.parent}: {e.strerror}") from None
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise OSError(errno.EEXIST, f"{what} path {path} exists and is not a socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink(missing_ok=True)  # nobody listens: stale from a crashed daemon
            return
    raise OSError(errno.EADDRINUSE, f"{what} {path} is in use by another live daemon")


class ApiSocket:
    """`internal` is the address to give grpc's add_insecure_port; start() once the server runs."""

    def __init__(self, path: Path, peers: PeerTable) -> None:
        self.path = path
        self._private = Path(tempfile.mkdtemp(prefix="dynod-api-"))  # 0700, ours
        self._front = UnixFront(path, self._private / "api.sock", peers)
        self._started = False

    @property
    def internal(self) -> str:
        return f"unix:{self._private / 'api.sock'}"

    def start(self) -> None:
        prepare_public_socket(self.path, what="API socket", key="api_socket")
        self._front.start()
        self._started = True
        log.info("Dyno API listening on unix:%s", self.path)

    def stop(self) -> None:
        if self._started:
            self._front.stop()
        shutil.rmtree(self._private, ignore_errors=True)
