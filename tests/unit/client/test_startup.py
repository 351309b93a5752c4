"""dyno-cli start-up: commands that do not analyse traces load neither numpy nor the analysis stack; the analyse
path imports numpy with one OpenBLAS thread and leaves the environment as it found it."""

from __future__ import annotations

import json
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


def test_gathering_pages_of_job_records_loads_no_numpy() -> None:
    """DynoClient.list_jobs (pages of records) checks no columns: only a columnar page loads numpy to check it."""
    out = _run(
        "import sys\n"
        "from dyno.client import pages\n"
        "from dyno.v1 import dyno_pb2\n"
        "answers = iter([dyno_pb2.ListJobsResponse(jobs=[dyno_pb2.JobRecord(job_id='a')], next_page_token='1'),\n"
        "                dyno_pb2.ListJobsResponse(jobs=[dyno_pb2.JobRecord(job_id='b')])])\n"
        "got = pages.gather_jobs(lambda r: next(answers), dyno_pb2.ListJobsRequest())\n"
        "print([j.job_id for j in got.jobs], 'numpy' in sys.modules)"
    )
    assert out == "['a', 'b'] False"


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


def test_main_on_the_process_command_line_spares_the_exit_collections() -> None:
    code = (
        "import gc, sys\n"
        "from dyno.client.cli import main\n"
        "sys.argv = ['dyno-cli', 'analyze', '--list-rules']\n"
        "ARGV\n"
        "print(gc.get_freeze_count() > 0, file=sys.stderr)"
    )

    def frozen(call: str) -> str:  # the answer on stderr: the rules listed on stdout
        cmd = [sys.executable, "-c", code.replace("ARGV", call)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stderr.strip()

    assert frozen("main()") == "True"  # as the console script calls it: the process ends next
    assert frozen("main(sys.argv[1:])") == "False"  # an embedding caller's collector untouched


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


# One interpreter imports dyno-cli's main, then forks a child per case, which runs main(argv) and sends back the
# modules it then holds: each case starts from the same clean state (nothing one case loads hides another's), and
# the whole table costs one interpreter start.
_FORKED_MAINS = """
import contextlib, io, json, os, sys
from dyno.client.cli import main
children = {}
for key, argv in json.loads(CASES).items():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:  # a child never returns into the loop; one that failed sends nothing
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                try:
                    main(argv)
                except SystemExit:
                    pass
            with os.fdopen(w, "w") as f:
                f.write(json.dumps(sorted(sys.modules)))
        finally:
            os._exit(0)
    os.close(w)
    children[key] = (pid, os.fdopen(r))
loaded = {}
for key, (pid, f) in children.items():
    loaded[key] = f.read()
    os.waitpid(pid, 0)
print(json.dumps(loaded))
"""

_REFUSED = ["--host", "127.0.0.1:1", "--call-timeout-s", "10"]  # nothing listens there: the call fails at once
_DAEMON_COMMANDS = [name for name in COMMANDS if name != "analyze"]
_RUNS = {
    "status": ["status"],
    "version": ["version"],
    "ps": ["ps"],
    "metrics": ["metrics"],
    "jobs": ["jobs"],
    "opportunities": ["opportunities"],
    "trace": ["trace", "--job-id", "j", "--duration-ms", "100", "--start-delay-s", "0", "--output-dir", "{out}"],
    "fetch": ["fetch", "--trace-id", "t1", "--output-dir", "{out}"],
}
_NO_COMMAND = {
    "top --help": ["--help"],
    "--version": ["--version"],
    "none": [],
    "unknown": ["no-such-command"],
    "top --json": ["--json"],
}
_DAEMON_STACK = {"grpc", "google.protobuf", "dyno.v1.dyno_pb2", "dyno.client.client", "dyno.client.auth"}
_EVERY_COMMAND = {f"dyno.client.commands.{n}" for n in COMMANDS}
_ANALYSIS = {"numpy", "dyno.trace_analysis.api"}


def _prefixed(loaded: set[str], *prefixes: str) -> set[str]:
    return {m for m in loaded if m.startswith(prefixes)}


@pytest.fixture(scope="module")
def loaded_after(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Case -> the modules loaded once dyno-cli's main has run it (in a fresh interpreter, output discarded)."""
    from analysis_trace_builder import TraceBuilder

    tmp = tmp_path_factory.mktemp("startup")
    b = TraceBuilder()
    b.step(0, 0.0, 1000.0)
    b.busy_gpu(0.0, 5)
    trace = b.write(tmp / "rank-0.json")
    cases = {f"{name} --help": [name, "--help"] for name in COMMANDS}
    for name, argv in _RUNS.items():
        cases[f"{name} run"] = [a.replace("{out}", str(tmp / name)) for a in argv] + _REFUSED
    cases["analyze run"] = ["analyze", "--json", str(trace)]
    cases["analyze text run"] = ["analyze", str(trace)]
    cases.update(_NO_COMMAND)
    sent = json.loads(_run(_FORKED_MAINS.replace("CASES", repr(json.dumps(cases)))))
    assert all(sent.values()), f"main() raised in: {[key for key, mods in sent.items() if not mods]}"
    return {key: set(json.loads(mods)) for key, mods in sent.items()}


def test_every_command_is_in_the_run_table() -> None:
    assert set(_RUNS) == set(_DAEMON_COMMANDS)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_commands_help_loads_only_its_own_module_and_no_client_stack(
    loaded_after: dict[str, set[str]], name: str
) -> None:
    loaded = loaded_after[f"{name} --help"]
    assert f"dyno.client.commands.{name}" in loaded  # its parser was built
    others = _EVERY_COMMAND - {f"dyno.client.commands.{name}"}
    assert loaded & (others | _ANALYSIS | _DAEMON_STACK) == set()
    assert _prefixed(loaded, "dyno.client.agent", "dyno.client.trace.", "numpy", "rich") == set()
    if name != "analyze":  # analyze's parser is dyno.trace_analysis.cli's
        assert _prefixed(loaded, "dyno.trace_analysis") == set()


@pytest.mark.parametrize("name", _DAEMON_COMMANDS)
def test_a_daemon_command_run_loads_the_client_stack_and_nothing_else(
    loaded_after: dict[str, set[str]], name: str
) -> None:
    loaded = loaded_after[f"{name} run"]
    assert {f"dyno.client.commands.{name}", "grpc", "dyno.client.cluster"} <= loaded  # it called the daemon
    others = _EVERY_COMMAND - {f"dyno.client.commands.{name}"}
    # jobs joins its hosts' columnar pages with numpy (dyno.client.jobs_columns), opportunities ranks them so
    # (dyno.client.opportunities.column_ranking)
    joins = {"numpy"} if name in ("jobs", "opportunities") else set()
    assert loaded & (others | _ANALYSIS) == joins
    # no trainer agent, no analysis (nothing was fetched to analyse), no auth module (no auth option given);
    # opportunities names each rule's fix from the rules' texts (dyno.trace_analysis.rule_texts, not the analysis stack)
    texts = {"dyno.trace_analysis", "dyno.trace_analysis.rule_texts"} if name == "opportunities" else set()
    allowed = texts | (_prefixed(loaded, "numpy") if joins else set())
    assert _prefixed(loaded, "dyno.client.agent", "dyno.trace_analysis", "numpy", "dyno.client.auth") <= allowed


def test_analyze_loads_no_grpc_and_no_other_command(loaded_after: dict[str, set[str]]) -> None:
    loaded = loaded_after["analyze run"]
    assert "dyno.trace_analysis.api" in loaded  # the command ran
    assert loaded & (_DAEMON_STACK | (_EVERY_COMMAND - {"dyno.client.commands.analyze"})) == set()
    assert _prefixed(loaded, "dyno.client.agent", "google", "grpc") == set()


# what `analyze --json` does not use: the text and HTML renderers (and the many-rank grouping only they print), the
# analyses no rule or summary calls, the rank-parts codec of `trace --summaries`
_NOT_FOR_JSON = {
    "dyno.trace_analysis.report.html",
    "dyno.trace_analysis.report.text",
    "dyno.trace_analysis.report.phrases",
    "dyno.trace_analysis.report.rank_groups",
    "dyno.trace_analysis.analyses.memcpy",
    "dyno.trace_analysis.part_codec",
    "dyno.trace_analysis.part_checks",
}


def test_analyze_json_loads_only_the_json_renderer(loaded_after: dict[str, set[str]]) -> None:
    json_run = loaded_after["analyze run"]
    assert {"dyno.trace_analysis.report.jsonout", "dyno.trace_analysis.report.summary"} <= json_run
    assert json_run & _NOT_FOR_JSON == set()
    text_run = loaded_after["analyze text run"]  # the text report loads its renderer, not the JSON or HTML one
    assert {"dyno.trace_analysis.report.text", "dyno.trace_analysis.report.rank_groups"} <= text_run
    assert text_run & {"dyno.trace_analysis.report.jsonout", "dyno.trace_analysis.report.html"} == set()


def test_top_level_help_still_lists_every_command() -> None:
    r = subprocess.run([sys.executable, "-m", "dyno.client", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for name in ("status", "version", "metrics", "ps", "trace", "fetch", "analyze"):
        assert f"    {name} " in r.stdout, name


@pytest.mark.parametrize("case", list(_NO_COMMAND))
def test_no_command_run_loads_no_command_module(loaded_after: dict[str, set[str]], case: str) -> None:
    loaded = loaded_after[case]
    assert "dyno.client.commands._catalog" in loaded  # the parser was built
    assert loaded & (_DAEMON_STACK | _EVERY_COMMAND | _ANALYSIS) == set()
    assert _prefixed(loaded, "dyno.trace_analysis", "dyno.client.agent") == set()
