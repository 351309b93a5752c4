"""What trace/fetch print: with --html on a full disk the text report is still printed, no truncated FILE is left and
the error names FILE; an HTML rendering error is an analysis error, not a traceback.

A full disk is played by an fsync that fails with ENOSPC after the data went to the temp file (not RLIMIT_FSIZE:
it limits the whole test process, pytest's own log writes included)."""

from __future__ import annotations

import argparse
import errno
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dyno.trace_analysis
from dyno.client.commands import _trace_render
from dyno.client.commands._trace_render import analyze_files as _analyze
from dyno.client.trace import manifest as trace_manifest
from dyno.trace_analysis.report import html as html_mod
from dyno.trace_analysis.report import jsonout as json_mod
from dyno.trace_analysis.report import text as text_mod

pytestmark = pytest.mark.unit

_LIMIT = 4096


@pytest.fixture
def fake_report(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_trace_render, "import_numpy_single_threaded", lambda: None)
    monkeypatch.setattr(dyno.trace_analysis, "analyze", lambda paths: {"paths": paths})
    monkeypatch.setattr(text_mod, "render_text", lambda report, **_: "== the text report ==")
    monkeypatch.setattr(json_mod, "render_json", lambda report, indent=False: '{"schema": "r"}')
    monkeypatch.setattr(html_mod, "render_html", lambda report, **_: "<p>" + "x" * (4 * _LIMIT))


@pytest.fixture
def small_disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(trace_manifest.os, "fsync", full)  # the os module itself: restored after the test
    yield


def test_html_on_a_full_disk_keeps_the_text_report_and_leaves_no_partial_file(
    fake_report: None, small_disk: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html = tmp_path / "report.html"
    args = argparse.Namespace(html=html, json=False)
    report, error = _trace_render.analyze_files(args, [tmp_path / "a.pt.trace.json"])
    assert "== the text report ==" in capsys.readouterr().out
    assert report is None  # the JSON report is made for --json only
    assert error is not None and error.startswith(f"cannot write --html {html}:"), error
    assert list(tmp_path.iterdir()) == []  # neither a truncated report.html nor a temp file


def test_html_is_written_whole_and_named(fake_report: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = tmp_path / "report.html"
    report, error = _trace_render.analyze_files(argparse.Namespace(html=html, json=False), [tmp_path / "a.json"])
    assert error is None and report is None
    assert html.read_text() == "<p>" + "x" * (4 * _LIMIT)
    assert f"HTML report written to {html}" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


@pytest.mark.parametrize(
    "argv",
    [
        ["trace", "--job-id", "j", "--duration-ms", "100"],
        ["fetch", "--trace-id", "t"],
    ],
)
def test_html_with_no_analyze_is_a_usage_error(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--html` with `--no-analyze` is a usage error before anything is traced."""
    from dyno.client.cli import main

    out = tmp_path / "out"
    html = str(tmp_path / "r.html")
    with pytest.raises(SystemExit) as e:
        main([*argv, "--host", "127.0.0.1:1", "--output-dir", str(out), "--no-analyze", "--html", html])
    assert e.value.code == 2
    assert "--html" in capsys.readouterr().err and not out.exists()


# An exception from render_html is an analysis error ("analysis failed (the traces are fine): ..."), never a
# traceback; the rest of the run's output is printed.


def test_an_html_rendering_error_is_an_analysis_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken_html(_report: Any, **_: object) -> str:
        raise ValueError("a renderer bug")

    monkeypatch.setattr(dyno.trace_analysis, "analyze", lambda files: {"files": files})
    monkeypatch.setattr(json_mod, "render_json", lambda report, indent=False: '{"schema": "x"}')
    monkeypatch.setattr(html_mod, "render_html", broken_html)
    html = tmp_path / "report.html"
    args = argparse.Namespace(json=True, html=html)
    result, error = _analyze(args, [tmp_path / "rank0.json"])
    assert result == '{"schema": "x"}'  # the JSON report is kept
    assert error is not None and "ValueError: a renderer bug" in error
    assert not html.exists()


def test_all_ranks_reaches_both_renderers_and_json_is_made_for_json_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--all-ranks asks the text and HTML renderers for a section per rank; without --json no JSON is rendered (a
    1,024-rank report is ~30 MB of it, longer to make than the merge and the text together)."""
    calls: list[str] = []
    monkeypatch.setattr(_trace_render, "import_numpy_single_threaded", lambda: None)
    monkeypatch.setattr(dyno.trace_analysis, "analyze", lambda paths: {"paths": paths})
    monkeypatch.setattr(text_mod, "render_text", lambda report, all_ranks=False: f"text all_ranks={all_ranks}")
    monkeypatch.setattr(html_mod, "render_html", lambda report, all_ranks=False: f"html all_ranks={all_ranks}")
    monkeypatch.setattr(json_mod, "render_json", lambda report, indent=False: calls.append("json") or "{}")
    html = tmp_path / "r.html"
    for all_ranks in (False, True):
        args = argparse.Namespace(html=html, json=False, all_ranks=all_ranks)
        assert _analyze(args, [tmp_path / "a.json"]) == (None, None)
        assert f"text all_ranks={all_ranks}" in capsys.readouterr().out
        assert html.read_text() == f"html all_ranks={all_ranks}"
    assert calls == []
    assert _analyze(argparse.Namespace(html=None, json=True, all_ranks=True), [tmp_path / "a.json"]) == ("{}", None)
    assert calls == ["json"]


@pytest.mark.parametrize("command", [["trace", "--job-id", "j", "--duration-ms", "100"], ["fetch", "--trace-id", "t"]])
def test_trace_and_fetch_take_all_ranks(command: list[str]) -> None:
    from dyno.client.cli import build_parser

    args = build_parser(command[:1]).parse_args([*command, "--summaries", "--all-ranks"])
    assert args.all_ranks is True
    assert build_parser(command[:1]).parse_args([*command, "--summaries"]).all_ranks is False
