"""Any local user can send datagrams to the kineto endpoint (an abstract socket has no permissions): a burst of
malformed or spoofed ones must not turn into one WARNING line each in the daemon's journal."""

from __future__ import annotations

import logging
import math
import shutil
import socket
import struct

import pytest

from dyno.daemon.tracing.kineto_ipc import KinetoEndpoint
from dyno.logthrottle import ThrottledLog

from conftest import short_tmpdir, wait_for

pytestmark = pytest.mark.unit


class NoTraces:
    def kineto_poll(self, poll):  # noqa: ANN001, ANN201 - KinetoHandler
        return None

    def kineto_context(self, *args):  # noqa: ANN002, ANN201
        return None


def test_a_burst_of_malformed_datagrams_logs_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    d = short_tmpdir("dyno-e2k-")
    endpoint = KinetoEndpoint(NoTraces(), socket_dir=d)  # type: ignore[arg-type]
    endpoint.start()
    sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        caplog.set_level(logging.WARNING, logger="dyno.daemon.tracing.kineto_ipc")
        for i in range(50):
            sender.sendto(b"\x01" * (i % 30) + struct.pack("<Q", 2**63), str(d / "dynolog"))
        wait_for(lambda: endpoint.rejected == 50)
    finally:
        sender.close()
        endpoint.stop()
        shutil.rmtree(d, ignore_errors=True)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "dropped malformed datagram" in warnings[0].getMessage()


def test_throttled_log_counts_what_it_held_back(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    log = ThrottledLog(logging.getLogger("explore2.throttle"), every_s=60, clock=lambda: now[0])
    caplog.set_level(logging.DEBUG, logger="explore2.throttle")
    for _ in range(3):
        log.warning("bad", "bad thing %d", 1)
    log.warning("other", "other thing")
    now[0] += 61
    log.warning("bad", "bad thing %d", 2)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["bad thing 1", "other thing", "bad thing 2 (and 2 more like it in the last 61 s)"]
    assert sum(r.levelno == logging.DEBUG for r in caplog.records) == 2


def test_throttled_log_once_per_key_remembers_a_bounded_number_of_keys(caplog: pytest.LogCaptureFixture) -> None:
    log = ThrottledLog(logging.getLogger("explore2.throttle.bounded"), every_s=math.inf, max_keys=2)
    caplog.set_level(logging.DEBUG, logger="explore2.throttle.bounded")
    for key in ("a", "a", "b", "c", "a"):  # "a" is forgotten once "b" and "c" came after it
        log.warning(key, "bad %s", key)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, "bad a"),
        (logging.DEBUG, "bad a"),
        (logging.WARNING, "bad b"),
        (logging.WARNING, "bad c"),
        (logging.WARNING, "bad a"),
    ]
