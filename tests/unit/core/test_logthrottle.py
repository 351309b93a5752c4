"""dyno.logthrottle.ThrottledLog: repeated warnings of one key become one line per period, saying how many were held
back; once-per-key logs remember a bounded number of keys."""

from __future__ import annotations

import logging
import math

import pytest

from dyno.logthrottle import ThrottledLog

pytestmark = pytest.mark.unit


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


def test_a_throttled_log_at_another_level_logs_there(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    log = ThrottledLog(logging.getLogger("throttle.info"), every_s=600, clock=lambda: now[0], level=logging.INFO)
    caplog.set_level(logging.DEBUG, logger="throttle.info")
    log.emit("job\0busy", "skipped %s", "a")
    log.emit("job\0busy", "skipped %s", "b")
    now[0] += 600
    log.emit("job\0busy", "skipped %s", "c")
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert infos == ["skipped a", "skipped c (and 1 more like it in the last 600 s)"]
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_built_args_are_built_only_for_a_line_that_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    log = ThrottledLog(logging.getLogger("throttle.built"), every_s=600, clock=lambda: now[0], level=logging.INFO)
    built: list[str] = []

    def args(text: str) -> tuple[str]:
        built.append(text)
        return (text,)

    caplog.set_level(logging.INFO, logger="throttle.built")
    log.emit_built("k", "skipped %s", lambda: args("a"))
    log.emit_built("k", "skipped %s", lambda: args("b"))  # held back, DEBUG off: never built
    assert built == ["a"]
    caplog.set_level(logging.DEBUG, logger="throttle.built")
    log.emit_built("k", "skipped %s", lambda: args("c"))  # held back, logged at DEBUG
    now[0] += 600
    log.emit_built("k", "skipped %s", lambda: args("d"))
    assert built == ["a", "c", "d"]
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "skipped a"),
        (logging.DEBUG, "skipped c"),
        (logging.INFO, "skipped d (and 2 more like it in the last 600 s)"),
    ]
    caplog.set_level(logging.WARNING, logger="throttle.built")
    now[0] += 600
    log.emit_built("k", "skipped %s", lambda: args("e"))  # below the logger's level: not built
    assert built == ["a", "c", "d"]
