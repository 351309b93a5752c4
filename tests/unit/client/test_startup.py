"""dyno-cli start-up: commands that do not analyse traces load neither numpy nor the analysis stack; the analyse
path imports numpy with one OpenBLAS thread and leaves the environment as it found it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dyno.client.commands._catalog import COMMANDS

pytestmark = pytest.mark.unit


def _run(code: str, env: dict[str, str] | None = None) -> str:
    base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**base, **(env or {})}, timeout=60
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_building_the_cli_parser_loads_no_numpy() -> None:
    out = _run(
        "import sys\n"
        "from dyno.client.cli import build_parser\n"
        "build_parser().format_help()\n"
        "heavy = ('numpy', 'dyno.trace_analysis.api', 'dyno.trace_analysis.rules')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    assert out == "[]"


def test_library_names_still_resolve_lazily() -> None:
    out = _run(
        "import dyno.trace_analysis as ta\n"
        "from dyno.trace_analysis import AnalysisError, analyze\n"
        "assert analyze is ta.analyze and issubclass(AnalysisError, Exception)\n"
        "try:\n    ta.no_such_name\nexcept AttributeError as e:\n    print(e)"
    )
    assert "no_such_name" in out


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="thread count read from /proc")
def test_numpy_imported_single_threaded_and_environment_restored() -> None:
    code = (
        "import os\n"
        "from dyno.numpy_import import import_numpy_single_threaded\n"
        "import_numpy_single_threaded()\n"
        "import sys\n"
        "print('numpy' in sys.modules, len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'))"
    )
    assert _run(code) == "True 1 None"
    # the user's own setting wins and stays
    loaded, _, value = _run(code, {"OPENBLAS_NUM_THREADS": "3"}).split()
    assert (loaded, value) == ("True", "3")


def test_analyze_list_rules_and_help_work_without_preloading(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "dyno.client", "analyze", "--list-rules"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert "straggler" in r.stdout and "sync-calls" in r.stdout
    h = subprocess.run(
        [sys.executable, "-m", "dyno.client", "analyze", "--help"], capture_output=True, text=True, timeout=60
    )
    assert h.returncode == 0 and "--list-rules" in h.stdout


def _modules_after_main(argv: list[str]) -> set[str]:
    """The modules loaded once dyno-cli's main has run ``argv`` in a fresh interpreter (its output discarded)."""
    out = _run(
        "import contextlib, io, sys\n"
        "from dyno.client.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "    try:\n"
        f"        main({argv!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    return set(out.split())


_DAEMON_STACK = {"grpc", "google.protobuf", "dyno.v1.dyno_pb2", "dyno.client.client", "dyno.client.auth"}
_OTHER_COMMANDS = {f"dyno.client.commands.{n}" for n in ("status", "ps", "metrics", "trace", "fetch", "version")}
_EVERY_COMMAND = {f"dyno.client.commands.{n}" for n in COMMANDS}
_ANALYSIS = {"numpy", "dyno.trace_analysis.api"}


def test_analyze_loads_no_grpc_and_no_other_command(tmp_path: Path) -> None:
    from analysis_trace_builder import TraceBuilder

    b = TraceBuilder()
    b.step(0, 0.0, 1000.0)
    b.busy_gpu(0.0, 5)
    trace = b.write(tmp_path / "rank-0.json")
    loaded = _modules_after_main(["analyze", "--json", str(trace)])
    assert "dyno.trace_analysis.api" in loaded  # the command ran
    assert loaded & (_DAEMON_STACK | _OTHER_COMMANDS) == set()


def test_a_daemon_commands_help_loads_only_its_own_module_and_no_grpc() -> None:
    loaded = _modules_after_main(["status", "--help"])
    assert "dyno.client.commands.status" in loaded
    others = _EVERY_COMMAND - {"dyno.client.commands.status"}
    assert loaded & (others | _ANALYSIS | _DAEMON_STACK) == set()


def test_a_daemon_command_run_loads_the_client_stack_and_nothing_else() -> None:
    # no daemon listens there (the port is refused at once): status runs, fails, and returns
    loaded = _modules_after_main(["status", "--host", "127.0.0.1:1", "--timeout-s", "5"])
    assert {"dyno.client.commands.status", "grpc", "dyno.client.cluster"} <= loaded
    others = _EVERY_COMMAND - {"dyno.client.commands.status"}
    assert loaded & (others | _ANALYSIS) == set()


def test_top_level_help_still_lists_every_command() -> None:
    r = subprocess.run([sys.executable, "-m", "dyno.client", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for name in ("status", "version", "metrics", "ps", "trace", "fetch", "analyze"):
        assert f"    {name} " in r.stdout, name


@pytest.mark.parametrize("argv", [["--help"], ["--version"], [], ["no-such-command"], ["--json"]])
def test_no_command_run_loads_no_command_module(argv: list[str]) -> None:
    loaded = _modules_after_main(argv)
    assert "dyno.client.commands._catalog" in loaded  # the parser was built
    assert loaded & (_DAEMON_STACK | _EVERY_COMMAND | _ANALYSIS) == set()
