"""`dyno-cli fetch` in-process against fake daemons: exit codes, the manifest, the NOT_FOUND reason, a second
fetch into the same folder, --json, --timeout-s 0, usage errors and --help; fetch streams refused as busy are
waited out; a Ctrl-C while dyno-cli starts is one line and exit 130."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from fetch_cmd_fakes import FakeDaemons, KnownTraceServicer

from dyno.client.cli import main as cli_main
from dyno.client.commands._trace_options import default_wait_s
from dyno.daemon.fake_server import serve
from dyno.daemon.stream_slots import RETRY_AFTER_KEY
from dyno.filechunks import checksum_of, new_digest
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit

TID = "t-fetch-cli"


def _fetch(hosts: str, out: Path, *args: str) -> int:
    return cli_main(["fetch", "--hosts", hosts, "--trace-id", TID, "--output-dir", str(out), "--no-analyze", *args])


def _manifest(out: Path) -> dict:
    return json.loads((out / TID / "manifest.json").read_text())


def test_every_file_fetched_exit_0_with_the_daemons_request(
    daemons: FakeDaemons, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (a, sa), (b, sb) = daemons.start({TID}), daemons.start({TID})
    assert _fetch(f"{a},{b}", tmp_path) == 0
    out, err = capsys.readouterr()
    m = _manifest(tmp_path)
    assert m["status"] == "complete" and m["exit_code"] == 0 and m["errors"] == []
    assert m["job_id"] == "job1" and m["request"]["duration_ms"] == 500 and m["request"]["trace_id"] == TID
    assert m["timings"]["requested_ms"] == sa.created_ms  # when the trace was made, not when it was fetched
    assert m["summary"] == {"hosts": 2, "hosts_failed": 0, "processes": 4, "fetched": 4, "bytes": m["summary"]["bytes"]}
    for p in m["processes"]:
        servicer = sa if p["host"] == str(a) else sb
        data = (tmp_path / TID / p["file"]).read_bytes()
        assert data == servicer.content(p["pid"]) and p["checksum"] == checksum_of(new_digest(data))
    assert "PID" in out and "dyno-cli fetch: complete: 4 of 4" in err
    assert not sa.cancelled.is_set() and not sb.cancelled.is_set()


def test_a_host_that_does_not_know_the_trace_is_partial_with_its_reason(
    daemons: FakeDaemons, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (a, _), (restarted, _) = daemons.start({TID}), daemons.start(set())
    assert _fetch(f"{a},{restarted}", tmp_path) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"dyno-cli fetch: {restarted}: no trace {TID!r} on host node1" in err and "(NotFound)" in err
    m = _manifest(tmp_path)
    assert m["status"] == "partial" and m["exit_code"] == 3
    assert [h["state"] for h in m["hosts"]] == ["done", "failed"] and m["hosts"][1]["error_type"] == "NotFound"
    assert m["summary"]["fetched"] == 2


def test_no_host_knows_the_trace_exit_1_and_an_earlier_manifest_is_left_alone(
    daemons: FakeDaemons, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (a, _) = daemons.start(set())
    (tmp_path / TID).mkdir()
    (tmp_path / TID / "manifest.json").write_text('{"earlier": true}')
    assert _fetch(str(a), tmp_path) == 1
    err = capsys.readouterr().err
    assert "NotFound" in err and f"no host has trace {TID!r}" in err
    assert _manifest(tmp_path) == {"earlier": True}


def test_a_second_fetch_verifies_what_is_there_and_refetches_a_broken_file(
    daemons: FakeDaemons, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, servicer = daemons.start({TID})
    assert _fetch(str(a), tmp_path) == 0
    first = _manifest(tmp_path)
    broken = tmp_path / TID / first["processes"][1]["file"]
    broken.write_bytes(broken.read_bytes()[:-3])  # truncated: its size no longer matches the daemon's
    capsys.readouterr()
    assert _fetch(str(a), tmp_path, "--json") == 0
    result = json.loads(capsys.readouterr().out)
    assert [p["reused"] for p in result["processes"]] == [True, False]
    assert servicer.fetches == {1000: 1, 1001: 2}
    assert broken.read_bytes() == servicer.content(1001)
    assert [p["checksum"] for p in result["processes"]] == [p["checksum"] for p in first["processes"]]
    assert all(Path(p["path"]) == tmp_path / TID / p["file"] for p in result["processes"])
    assert result["ok"] and result["report"] is None


def test_timeout_0_fetches_what_is_done_and_leaves_the_trace_running(
    daemons: FakeDaemons, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (done, _), (running, servicer) = daemons.start({TID}), daemons.start({TID}, finish_after=None)
    assert _fetch(f"{done},{running}", tmp_path, "--timeout-s", "0") == 3
    err = capsys.readouterr().err
    assert "still tracing" in err and "not cancelled" in err
    assert not servicer.cancelled.is_set()
    m = _manifest(tmp_path)
    assert m["hosts"][1]["error_type"] == "Timeout" and m["summary"]["fetched"] == 2


def test_usage_errors_and_help(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli_main(["fetch", "--trace-id", "../x", "--output-dir", str(tmp_path)])
    assert e.value.code == 2 and "--trace-id" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli_main(["fetch", "--output-dir", str(tmp_path)])  # --trace-id is required
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        cli_main(["fetch", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert e.value.code == 0
    for words in ("--trace-id", "never starts or cancels", "checksum", "Exit codes: 0", "3 partial", "--slurm-job"):
        assert words in text
    assert list(tmp_path.iterdir()) == []


def test_default_wait_follows_the_traces_window() -> None:
    now = 1_000_000.0
    later = dyno_pb2.TraceRequest(duration_ms=2000, start_time_ms=int((now + 10) * 1000))
    assert default_wait_s(later, now) == pytest.approx(10 + 2 + 60)
    assert default_wait_s(dyno_pb2.TraceRequest(duration_ms=2000), now) == pytest.approx(62)
    assert default_wait_s(dyno_pb2.TraceRequest(iterations=3), now) == 300


# Ctrl-C while dyno-cli is still importing its modules: one line and exit 130, no traceback.


# A real SIGINT, delivered while build_parser() imports the `status` command module (deterministic: no sleeps).
_INTERRUPTED_WHILE_IMPORTING = """
import importlib, os, signal, sys
from dyno.client import cli

real_import = importlib.import_module

def import_module(name, package=None):
    if name.endswith(".commands.status"):
        os.kill(os.getpid(), signal.SIGINT)
    return real_import(name, package)

importlib.import_module = import_module
sys.exit(cli.main(["status", "--host", "127.0.0.1:1"]))
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_ctrl_c_while_the_commands_are_imported_is_quiet_exit_130() -> None:
    r = _run(_INTERRUPTED_WHILE_IMPORTING)
    assert r.returncode == 130, r.stderr
    assert r.stderr == "dyno-cli: interrupted\n"


def test_the_entry_module_imports_nothing_heavy() -> None:
    """What runs before main() (the console script's `from dyno.client.cli import main`) stays unprotected: it must
    not load grpc, which takes most of the start-up time."""
    heavy = "('grpc', 'google.protobuf')"
    r = _run(f"import sys\nfrom dyno.client.cli import main\nprint(sorted(m for m in {heavy} if m in sys.modules))")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


# Fetch streams refused as busy (RESOURCE_EXHAUSTED with dynod's retry hint) are waited out; every file arrives, exit 0.


BUSY_TID = "t-fetch-busy"


_REFUSALS = 3  # per file, before the daemon has a stream free


class _BusyServicer(KnownTraceServicer):
    """Refuses each file's first _REFUSALS fetches as a busy dynod does."""

    def FetchTraceFile(self, request, context) -> Iterator[dyno_pb2.FileChunk]:  # noqa: N802 - grpc method name
        if self.fetches.get(request.pid, 0) < _REFUSALS:
            self.fetches[request.pid] = self.fetches.get(request.pid, 0) + 1
            context.set_trailing_metadata(((RETRY_AFTER_KEY, "10"),))
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "12 trace file streams are already open; retry shortly")
        yield from super().FetchTraceFile(request, context)


def test_busy_daemons_are_waited_out_and_every_file_arrives(tmp_path: Path) -> None:
    fakes = [serve(lambda _port, n=n: _BusyServicer(f"node{n}", {BUSY_TID})) for n in range(2)]
    try:
        hosts = ",".join(f"127.0.0.1:{f.port}" for f in fakes)
        rc = cli_main(
            ["fetch", "--hosts", hosts, "--trace-id", BUSY_TID, "--output-dir", str(tmp_path), "--no-analyze"]
        )
        manifest = json.loads((tmp_path / BUSY_TID / "manifest.json").read_text())
        assert rc == 0 and manifest["status"] == "complete" and manifest["errors"] == []
        assert manifest["summary"]["fetched"] == 4
        for f in fakes:
            assert f.servicer.fetches and all(n == _REFUSALS + 1 for n in f.servicer.fetches.values())
    finally:
        for f in fakes:
            f.server.stop(0)
