"""`dyno-cli analyze` on paths that are not regular files, as real processes: a device (a symlink to /dev/zero, or
/dev/urandom, which never end) is refused by its kind at once, exit 1; a pipe is streamed as a file is, so SIGTERM
stops an endless one promptly (exit 130) and one endless value in it is refused at the element cap."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

_ANALYZE = [sys.executable, "-m", "dyno.client", "analyze"]

# writes an endless trace into the FIFO argv[1]: the array's opening, then (argv[2] "events") batches of complete
# events, or ("string") one event whose string never ends; counts the bytes written in the file argv[3]
_WRITER = r"""
import sys
mode, counter = sys.argv[2], sys.argv[3]
ev = b'{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":%d,"dur":5},'
written = 0
with open(sys.argv[1], "wb") as fh:
    fh.write(b'{"traceEvents":[' + (b'{"ph":"X","ts":1,"args":{"s":"' if mode == "string" else b""))
    i = 0
    try:
        while True:
            chunk = b"a" * 65536 if mode == "string" else b"".join(ev % (i + j) for j in range(1000))
            i += 1000
            fh.write(chunk)
            written += len(chunk)
            if written % (1 << 20) < len(chunk):
                open(counter, "w").write(str(written))
    except (BrokenPipeError, OSError):
        pass
"""


@contextmanager
def _endless_fifo(tmp_path: Path, mode: str) -> Iterator[tuple[Path, Path]]:
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    counter = tmp_path / "written"
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(fifo), mode, str(counter)])
    try:
        yield fifo, counter
    finally:
        writer.kill()
        writer.wait(timeout=30)


def _written(counter: Path) -> int:
    try:
        return int(counter.read_text() or 0)
    except (FileNotFoundError, ValueError):
        return 0


@pytest.mark.parametrize("device", ["symlink-to-zero", "/dev/urandom"])
def test_a_device_is_refused_by_its_kind(tmp_path: Path, device: str) -> None:
    path = tmp_path / "devzero.json"
    if device == "symlink-to-zero":
        path.symlink_to("/dev/zero")
    else:
        path = Path(device)
    # (read as a file, it never ends: a timeout here is that failure)
    proc = subprocess.run([*_ANALYZE, str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert f"{path}: is a character device (such as /dev/zero or a terminal), not a trace file" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_sigterm_stops_the_load_of_an_endless_pipe(tmp_path: Path) -> None:
    with _endless_fifo(tmp_path, "events") as (fifo, counter):
        proc = subprocess.Popen([*_ANALYZE, str(fifo)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while _written(counter) < (4 << 20) and time.monotonic() < deadline:  # well past a pipe's buffer: loading
            time.sleep(0.05)
        assert _written(counter) >= (4 << 20), "the command never read the pipe"
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail("SIGTERM did not stop the load of the pipe")
    assert proc.returncode == 130, err.decode()
    assert b"Traceback" not in err


def test_one_endless_value_in_a_pipe_is_refused_at_the_cap(tmp_path: Path) -> None:
    with _endless_fifo(tmp_path, "string") as (fifo, _):
        try:
            proc = subprocess.run([*_ANALYZE, str(fifo)], capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("the endless value was read on past the cap")
    assert proc.returncode == 1, proc.stderr
    assert "a traceEvents element larger than 64 MiB" in proc.stderr
