"""trace_analysis native decoder (``_native.c``): its parse runs without the GIL, so another thread runs Python
meanwhile (the CLI's read-ahead decodes on a second thread while the main thread imports)."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import pytest

from dyno.trace_analysis import eventdecode

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(not eventdecode.native_available(), reason="native decoder not built (no C compiler)"),
]


def _batch(n: int) -> bytes:
    ev = b'{"ph":"X","cat":"kernel","name":"k%d","pid":1,"tid":2,"ts":%d.5,"dur":3,"args":{"stream":7}}'
    return b"[" + b",".join(ev % (i % 50, i) for i in range(n)) + b"]"


def test_parse_lets_another_thread_run() -> None:
    """With a switch interval far longer than the whole run, the main thread gets the GIL while the worker loops
    over decode_batch only if the call releases it (holding it, the worker would end before the main thread ran)."""
    native: Any = eventdecode._native
    batch = _batch(20000)
    assert native.decode_batch(batch)["x_n"] == 20000
    ran_meanwhile = threading.Event()
    calls = []

    def worker() -> None:
        for _ in range(500):
            native.decode_batch(batch)
            calls.append(1)
            if ran_meanwhile.is_set():
                return

    old = sys.getswitchinterval()
    sys.setswitchinterval(30.0)
    try:
        t = threading.Thread(target=worker)
        t.start()
        while t.is_alive():
            ran_meanwhile.set()  # Python bytecode on the main thread while the worker is inside its loop
            time.sleep(0.001)  # (gives the GIL back, so the worker's next call can start)
        t.join()
    finally:
        sys.setswitchinterval(old)
    # the main thread ran before the worker's 500 calls were done: it ran during one of them
    assert ran_meanwhile.is_set() and len(calls) < 500


def test_strings_keep_first_seen_order_and_decline_bad_ones() -> None:
    """The distinct strings, made after the parse, keep first-seen order (the columns' ids index them); a string
    that does not decode still declines the whole batch."""
    native: Any = eventdecode._native
    cols = native.decode_batch(b'[{"ph":"X","name":"b\\u00e9"},{"ph":"X","name":"a"},{"ph":"X","name":"b\\u00e9"}]')
    assert cols["x_name_u"] == ["bé", "a"]
    assert bytes(cols["x_name"]) == (0).to_bytes(4, "little") + (1).to_bytes(4, "little") + (0).to_bytes(4, "little")
    assert native.decode_batch(b'[{"ph":"X","name":"a"},{"ph":"X","name":"\\udc00"}]') is None
