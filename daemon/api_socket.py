"""The Dyno API on a Unix socket (config api_socket, default dyno.sock beside the agent socket): what dyno-cli uses
for the local host, and the way dynod learns a local caller's uid from the kernel.

The gRPC server listens on a private socket (a 0700 folder of dynod's own: nobody else can connect to it) and a
UnixFront relays the public socket (0666: every local user may call) to it, recording each caller's credentials
(dyno.daemon.unix_front, dyno.daemon.peer_identity).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

from dyno.daemon.bindcheck import prepare_public_socket
from dyno.daemon.peer_identity import PeerTable
from dyno.daemon.unix_front import UnixFront

__all__ = ["ApiSocket"]

log = logging.getLogger(__name__)


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
