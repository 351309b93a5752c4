"""dynod's log lines under systemd: journald keeps every stderr line at priority "info" unless the line starts
with a syslog priority prefix ("<3>"), so warnings and errors carry one for `journalctl -u dynod -p warning`."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from dyno.daemon.main import log_formatter

pytestmark = pytest.mark.unit


def _record(level: int, msg: str, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            import sys

            exc_info = sys.exc_info()
    return logging.LogRecord("dyno.daemon.loop", level, __file__, 1, msg, (), exc_info)


def test_on_the_journal_stream_every_line_carries_its_priority(tmp_path: Path) -> None:
    with open(tmp_path / "stderr", "w") as stream:
        st = os.fstat(stream.fileno())
        fmt = log_formatter(stream, {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
        assert fmt.format(_record(logging.WARNING, "disk full")) == "<4>WARNING dyno.daemon.loop: disk full"
        assert fmt.format(_record(logging.INFO, "ready")).startswith("<6>INFO ")
        assert fmt.format(_record(logging.DEBUG, "x")).startswith("<7>")
        lines = fmt.format(_record(logging.ERROR, "sampler failed", exc=True)).splitlines()
        assert len(lines) > 2 and all(line.startswith("<3>") for line in lines)  # the traceback too
        assert "RuntimeError: boom" in lines[-1]


def test_elsewhere_plain_lines_with_a_timestamp(tmp_path: Path) -> None:
    with open(tmp_path / "stderr", "w") as stream:
        st = os.fstat(stream.fileno())
        for env in ({}, {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino + 1}"}):  # inherited by a child: not ours
            line = log_formatter(stream, env).format(_record(logging.WARNING, "disk full"))
            assert not line.startswith("<") and line.endswith("WARNING dyno.daemon.loop: disk full")
            assert line[:4].isdigit()  # asctime first
