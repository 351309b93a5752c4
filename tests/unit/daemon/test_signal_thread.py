"""dynod stops on a SIGTERM that the kernel gave to one of its other threads. The kernel may give a process-directed
signal to any thread that does not block it (grpc's, the sampler's); Python runs the handler only on the main
thread, whose wait such a signal must still end. signal.pthread_kill gives the signal to a chosen thread here, which
makes the case certain instead of occasional."""

from __future__ import annotations

import shutil
import signal
import socket
import threading

import pytest

from dyno.daemon.main import main

from conftest import short_tmpdir

pytestmark = pytest.mark.unit


def test_dynod_stops_on_a_sigterm_another_thread_received(monkeypatch: pytest.MonkeyPatch) -> None:
    d = short_tmpdir("dyno-sigthr-")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(d / "notify"))
    notify.settimeout(30)
    monkeypatch.setenv("NOTIFY_SOCKET", str(d / "notify"))
    got: list[bytes] = []
    rescued = threading.Event()
    main_thread = threading.main_thread().ident
    assert main_thread is not None

    def systemd() -> None:  # READY=1, then `systemctl stop`, whose SIGTERM lands on this (not the main) thread
        try:
            got.append(notify.recv(256))
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
            got.append(notify.recv(256))  # STOPPING=1, or nothing within 30 s: dynod did not wake
        except OSError:
            rescued.set()  # end the test instead of hanging it: the same signal on the main thread
            signal.pthread_kill(main_thread, signal.SIGTERM)

    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    wakeup_fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(wakeup_fd)
    watcher = threading.Thread(target=systemd, daemon=True)
    watcher.start()
    args = ["--port", "0", "--metrics-port", "0", "--kineto-endpoint", "off", "--gpu-backend", "none"]
    args += ["--state-dir", str(d / "s"), "--trace-dir", str(d / "t"), "--agent-socket", str(d / "a.sock")]
    try:
        rc = main(args)
        watcher.join(30)
        assert not rescued.is_set(), "dynod slept through a SIGTERM given to another thread"
        assert rc == 0
        assert got == [b"READY=1", b"STOPPING=1"]
        assert signal.set_wakeup_fd(wakeup_fd) == wakeup_fd  # main() put back the wakeup fd it found
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
        notify.close()
        shutil.rmtree(d, ignore_errors=True)
