"""The ranks of one job analysed by a pool of processes (trace_analysis.rank_pool): the same report as in one
process, byte for byte in every format, the straggler and cross-rank findings included; layouts the loader must
sort out first (cycles, duplicate or missing ranks) are left to the one-process path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder
from multirank_jobs import gpu_rank

from dyno.trace_analysis import analyze
from dyno.trace_analysis.api import analyze_rank
from dyno.trace_analysis.loader import load_trace
from dyno.trace_analysis.rank_pool import analyze_in_pool
from dyno.trace_analysis.report import Report, render_html, render_json, render_text
from dyno.trace_analysis.rules import select_rules
from dyno.trace_analysis.rules.engine import resolve_rule_thresholds

pytestmark = pytest.mark.unit

RESOLVED = resolve_rule_thresholds(None)


def _rank(folder: Path, rank: int, world: int, step_us: float, *, name: str | None = None) -> Path:
    """A rank of 3 steps of ``step_us``: a GEMM, a NCCL all-reduce and a device-wide synchronize (per-rank
    findings to carry over)."""
    return gpu_rank(folder / (name or f"rank-{rank}.json"), rank, world, step_us)


def _job(folder: Path, steps_us: list[float]) -> Path:
    for r, s in enumerate(steps_us):
        _rank(folder, r, len(steps_us), s)
    return folder


def _same(a: Report, b: Report) -> None:
    assert render_json(a) == render_json(b)
    assert render_text(a) == render_text(b)
    assert render_html(a) == render_html(b)


def test_pool_gives_the_one_process_report_with_the_straggler(tmp_path: Path) -> None:
    folder = _job(tmp_path / "job", [100_000, 101_000, 99_500, 100_500, 160_000, 100_200])
    alone = analyze(folder, workers=1)
    pooled = analyze_in_pool([str(folder)], select_rules(None), RESOLVED, workers=2)
    assert pooled is not None  # the pool did it
    _same(alone, pooled)
    (f,) = pooled.findings_of("straggler")
    assert f.rank == 4 and "straggler among 6 ranks" in f.title
    assert len(pooled.ranks) == 6 and {f.rule_id for f in pooled.findings} - {"straggler"}  # per-rank findings too


def test_analyze_with_workers_uses_the_pool_and_agrees(tmp_path: Path) -> None:
    folder = _job(tmp_path / "job", [100_000, 100_000, 150_000])
    _same(analyze(folder, workers=1), analyze(folder, workers=3))
    _same(
        analyze(folder, rules=["straggler", "sync-calls"], thresholds={"straggler.mad_factor": 1.5}, workers=1),
        analyze(folder, rules=["straggler", "sync-calls"], thresholds={"straggler.mad_factor": 1.5}, workers=2),
    )


def test_a_file_that_fails_to_load_is_reported_as_in_one_process(tmp_path: Path) -> None:
    folder = _job(tmp_path / "job", [100_000, 100_000, 100_000])
    (folder / "rank-3.json").write_text('{"traceEvents": [{"ph": "X", ')
    pooled = analyze_in_pool([str(folder)], select_rules(None), RESOLVED, workers=2)
    assert pooled is not None
    _same(analyze(folder, workers=1), pooled)
    assert [Path(e.path).name for e in pooled.errors] == ["rank-3.json"]


def _unranked(path: Path) -> None:
    doc = json.loads(path.read_text())
    del doc["distributedInfo"]
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("layout", ["duplicate rank", "no rank", "cycles"])
def test_layouts_the_loader_sorts_out_are_left_to_one_process(tmp_path: Path, layout: str) -> None:
    folder = _job(tmp_path / "job", [100_000, 100_000])
    if layout == "duplicate rank":
        _rank(folder, 1, 2, 120_000, name="copy-of-rank1.json")
    elif layout == "no rank":
        for p in folder.iterdir():
            _unranked(p.rename(p.with_name(p.name.replace("rank-", "worker"))))
    else:  # a second profiling cycle of rank 0, later in time
        b = TraceBuilder(rank=0, world_size=2)
        b.step(5, 10_000_000.0, 100_000.0)
        b.busy_gpu(10_000_000.0, 5)
        b.write(folder / "rank-0.later.json")
    assert analyze_in_pool([str(folder)], select_rules(None), RESOLVED, workers=2) is None
    _same(analyze(folder, workers=1), analyze(folder, workers=2))


def test_one_rank_or_one_worker_stays_in_this_process(tmp_path: Path) -> None:
    one = _rank(tmp_path, 0, 1, 100_000)
    assert analyze_in_pool([str(one)], select_rules(None), RESOLVED, workers=4) is None
    folder = _job(tmp_path / "job", [100_000, 100_000])
    assert analyze_in_pool([str(folder)], select_rules(None), RESOLVED, workers=1) is None


def test_a_rank_part_holds_no_trace(tmp_path: Path) -> None:
    # what the parent keeps per rank is a summary, rule outcomes and a digest: no event table
    part = analyze_rank(load_trace(_rank(tmp_path, 0, 2, 100_000)), select_rules(None), RESOLVED)
    seen: set[int] = set()

    def walk(v: object) -> None:
        if id(v) in seen or isinstance(v, str | bytes | int | float | bool | type(None)):
            return
        seen.add(id(v))
        assert type(v).__name__ not in ("Trace", "Events", "RuleContext", "ndarray"), type(v)
        children = v.values() if isinstance(v, dict) else v if isinstance(v, list | tuple | set | frozenset) else ()
        for c in children:
            walk(c)
        for name in getattr(type(v), "__struct_fields__", ()):
            walk(getattr(v, name))

    walk(part)


def test_a_rank_whose_figures_fail_gives_the_cross_rank_rule_an_error_outcome(tmp_path: Path, monkeypatch) -> None:
    # as a failing rule: the straggler comparison reports the error, the per-rank rules and the report go on
    import dyno.trace_analysis.rules.digest as digest

    def broken(trace):  # noqa: ANN001, ANN202
        raise ValueError(f"no figures for rank {trace.rank}")

    monkeypatch.setattr(digest, "rank_timing", broken)
    report = analyze(_job(tmp_path / "job", [100_000, 100_000, 150_000]), workers=1)
    (outcome,) = [o for o in report.rules if o.rule_id == "straggler"]
    assert (outcome.status, outcome.reason) == ("error", "ValueError: no figures for rank 0")
    assert report.findings_of("straggler") == [] and report.findings


def test_beside_grpc_the_workers_come_from_forkserver_and_agree(tmp_path: Path) -> None:
    # dyno-cli trace analyses in a process holding gRPC channels: no fork of it, and the same report
    import subprocess
    import sys

    folder = _job(tmp_path / "job", [100_000, 100_000, 150_000])
    code = (
        "import sys, grpc\n"
        "from dyno.trace_analysis import analyze\n"
        "from dyno.trace_analysis.rank_pool import _start_method\n"
        "from dyno.trace_analysis.report import render_json\n"
        "pooled = render_json(analyze(sys.argv[1], workers=2))\n"
        "print(_start_method(), pooled == render_json(analyze(sys.argv[1], workers=1)))\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["forkserver", "True"]


def test_dyno_cli_jobs_sets_the_processes_and_keeps_the_report(tmp_path: Path) -> None:
    import subprocess
    import sys

    folder = _job(tmp_path / "job", [100_000, 100_000, 150_000])

    def run(*words: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "dyno.client", "analyze", "--json", *words]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    one, pooled = run("--jobs", "1", str(folder)), run("--jobs", "3", str(folder))
    assert one.returncode == pooled.returncode == 0, one.stderr + pooled.stderr
    assert one.stdout == pooled.stdout and '"straggler"' in one.stdout
    bad = run("--jobs", "0", str(folder))
    assert bad.returncode == 2 and "--jobs: must be 1-1024" in bad.stderr


def _killed(path: Path) -> None:
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's OOM killer ends a worker


def test_a_worker_killed_is_an_analysis_error_not_a_traceback(tmp_path: Path, monkeypatch) -> None:
    from dyno.trace_analysis import AnalysisError, rank_pool

    monkeypatch.setattr(rank_pool, "_analyze_file", _killed)
    with pytest.raises(AnalysisError, match="ended abruptly"):
        analyze(_job(tmp_path / "job", [100_000, 100_000]), workers=2)
