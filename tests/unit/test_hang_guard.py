"""A hang ends the test run, with every thread's stack: CI's limit is 90 min and a hung run lands nothing. A run
once hung for good: pytest-timeout's "signal" method failed the hung test and left its teardown with no timer, and
after the last test nothing watched the interpreter's exit, which joins every RPC thread (pyproject.toml's
[tool.pytest.ini_options], tests/conftest.py). Each case runs pytest in a subprocess with the project's settings."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def _pytest(folder: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(REPO / "pyproject.toml"),
         "--rootdir", str(folder), *args, str(folder)],
        capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_a_test_whose_teardown_hangs_too_ends_the_run_with_every_stack(tmp_path: Path) -> None:
    (tmp_path / "test_stuck.py").write_text(
        textwrap.dedent(
            """
            import threading, pytest

            @pytest.fixture
            def server():
                yield
                threading.Event().wait()  # a stop that never returns, as grpc's server.stop().wait() did

            def test_stuck(server):
                threading.Event().wait()
            """
        )
    )
    r = _pytest(tmp_path, "-o", "timeout=2")
    assert r.returncode != 0
    assert "Stack of MainThread" in r.stdout + r.stderr
    # the run ended where the test hung (the signal method failed the test there, then hung in its teardown)
    assert "in test_stuck" in r.stdout + r.stderr


def test_a_stuck_thread_at_exit_ends_the_run_with_every_stack(tmp_path: Path) -> None:
    shutil.copy(REPO / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_leaves_a_worker.py").write_text(
        textwrap.dedent(
            """
            import threading
            from concurrent import futures

            POOL = futures.ThreadPoolExecutor(1)

            def test_passes_but_leaves_a_stuck_rpc_thread():
                POOL.submit(threading.Event().wait)
            """
        )
    )
    # the watchdog's time covers pytest's own wind-down after unconfigure too: 1 s fired before the interpreter's
    # exit on a loaded machine, and the dump then showed no join
    r = _pytest(tmp_path, env={"DYNO_TEST_EXIT_WATCHDOG_S": "5"})
    assert "1 passed" in r.stdout
    assert r.returncode != 0
    assert "_python_exit" in r.stderr  # the interpreter's exit, joining the stuck thread
