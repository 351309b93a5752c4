"""DynodProcess restart: the previous process's stderr pump must not wake or mark ready the new start."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from dyno.daemon.process import DynodProcess

pytestmark = pytest.mark.unit


def test_previous_process_pump_leaves_the_new_start_alone() -> None:
    p = DynodProcess([])
    old = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stderr.write('dynod 0.1.0 ready: grpc=127.0.0.1:1 metrics=off\\n')"],
        stderr=subprocess.PIPE,
        text=True,
    )
    old_ready = threading.Event()
    # restart: a new start has its own event and process before the old pump has drained the old stderr
    p._ready = threading.Event()
    p.proc = None
    pump = threading.Thread(target=p._pump, args=(old, old_ready))
    pump.start()
    pump.join(10)
    old.wait(10)
    assert old_ready.is_set()  # the old start's waiter is woken at EOF
    assert not p._ready.is_set() and not p.is_ready  # the new start keeps waiting for its own ready line
    assert "ready: grpc=127.0.0.1:1" in p.log
