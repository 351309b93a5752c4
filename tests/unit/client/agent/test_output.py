"""A trace given up at exit (its export outlasting agent.EXIT_FINISH_S) leaves no file: abandon() removes the
temporaries and the final file, and the writer then creates and publishes nothing. A fake export stands in for the
profiler's."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from fake_run_trace import FakeRun, install_run_trace

from dyno.client import agent as agent_mod
from dyno.client.agent.output import OutputFiles, TraceAbandoned
from dyno.client.agent.trace import AgentTraceSpec, TraceFailed, TraceResult, _export, write_trace_file
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def test_temporaries_are_named_after_the_output(tmp_path: Path) -> None:
    files = OutputFiles(tmp_path / "h_1.pt.trace.json.gz")
    assert [p.name for p in files.temporaries()] == [
        "h_1.pt.trace.json.gz.raw.tmp",
        "h_1.pt.trace.json.gz.raw.tmp.tmp",  # libkineto's own temp file of the raw export
        "h_1.pt.trace.json.gz.tmp",
    ]


def test_abandon_removes_every_file_and_refuses_new_ones(tmp_path: Path) -> None:
    files = OutputFiles(tmp_path / "h_1.pt.trace.json.gz")
    for path in (*files.temporaries(), files.output):
        path.write_bytes(b"partial")
    files.abandon()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(TraceAbandoned), files.creating():
        pass
    files.abandon()  # again: harmless


def test_write_after_abandon_publishes_nothing(tmp_path: Path) -> None:
    raw = tmp_path / "raw.json"
    raw.write_bytes(b'{"traceEvents": []}')
    files = OutputFiles(tmp_path / "out.json.gz")
    files.abandon()
    with pytest.raises(TraceFailed, match="abandoned"):
        write_trace_file(raw, files.output, "t1", files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw.json"]


class _StallingProfiler:
    """Writes the raw export, then waits for `release`: abandon() runs meanwhile, as at a late exit."""

    def __init__(self, files: OutputFiles, release: threading.Event) -> None:
        self.files, self.release, self.exported = files, release, threading.Event()

    def export_chrome_trace(self, path: str) -> None:
        Path(path).write_bytes(b'{"traceEvents": []}')
        self.exported.set()
        self.release.wait(30)


def test_export_abandoned_midway_leaves_nothing(tmp_path: Path) -> None:
    spec = AgentTraceSpec(trace_id="t1", output_path=tmp_path / "h_1.pt.trace.json.gz", duration_ms=100)
    files, release = OutputFiles(spec.output_path), threading.Event()
    profiler = _StallingProfiler(files, release)
    errors: list[str] = []

    def export() -> None:
        try:
            _export(profiler, spec, files)
        except TraceFailed as e:
            errors.append(str(e))

    t = threading.Thread(target=export, daemon=True)
    t.start()
    assert profiler.exported.wait(30)
    assert files.raw.exists()
    files.abandon()  # the exit's cap passed
    assert not files.raw.exists()
    release.set()
    t.join(30)
    assert errors and "abandoned" in errors[0]
    assert list(tmp_path.iterdir()) == []


def test_agent_exit_past_the_cap_removes_the_partial_export(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The agent's exit path abandons the files of the trace it gives up: the raw export and a half-written copy
    go at once, and the export finishing later publishes nothing."""
    recording, release = threading.Event(), threading.Event()
    outcome: list[str] = []

    def stalled_export(run: FakeRun) -> TraceResult:
        files = run.files
        assert files is not None
        run.on_running()
        recording.set()
        run.cancel.wait(30)
        files.raw.write_bytes(b'{"traceEvents": [')  # mid-export when the exit stops waiting
        files.tmp.write_bytes(b"\x1f\x8b")
        release.wait(30)
        try:
            with files.creating():
                run.spec.output_path.write_bytes(b"{}")
        except TraceAbandoned:
            outcome.append("refused")
            raise TraceFailed("abandoned") from None
        return TraceResult(run.spec.output_path, 2)

    class Stub:
        def __init__(self) -> None:
            self.reports: list[tuple[str, str]] = []

        def ReportTrace(self, request: Any, timeout: float) -> None:  # noqa: N802 - the stub's name
            self.reports.append((dyno_pb2.TraceState.Name(request.state), request.error))

    install_run_trace(monkeypatch, stalled_export)
    monkeypatch.setattr(agent_mod.atexit, "register", lambda f: None)
    a = agent_mod.Agent(job_id="j1", socket_path=tmp_path / "agent.sock")
    a._conn._stub = stub = Stub()
    spec = AgentTraceSpec(trace_id="t1", output_path=tmp_path / "h_1.pt.trace.json.gz", duration_ms=60_000)
    a._submit(spec)
    t = threading.Thread(target=a._run_one, args=(a._queue.get_nowait(),), daemon=True)
    t.start()
    assert recording.wait(30)
    a.finish_at_exit(timeout_s=0.5)
    assert stub.reports[-1][0] == "TRACE_STATE_FAILED" and "took longer than 0.5 s; no file" in stub.reports[-1][1]
    assert list(tmp_path.iterdir()) == []  # the partial export and copy are gone at once
    release.set()
    t.join(30)
    assert outcome == ["refused"] and list(tmp_path.iterdir()) == []
    assert [r[0] for r in stub.reports] == ["TRACE_STATE_RUNNING", "TRACE_STATE_FAILED"]
