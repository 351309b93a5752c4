"""`dyno-cli trace --summaries` and `dyno-cli fetch --summaries` end to end: two real dynods (one with
--auth-token-file), each with a real agent-instrumented CPU torch trainer behind it as rank 0 / 1 of one gloo DDP
job; each dynod analyses its own trace file (its analysis worker) and the CLI merges the two hosts' summaries into the
job's report, both ranks and the cross-rank rules in it, without fetching a raw file."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from two_host_job import Job, two_host_job

from conftest import run_cli

pytestmark = pytest.mark.integration
pytest.importorskip("torch")


@pytest.fixture(scope="module")
def job() -> Iterator[Job]:
    with two_host_job("sm", ddp=True) as j:
        yield j


def _cli(job: Job, command: str, *args: str) -> dict:
    res = run_cli(
        command,
        "--hosts",
        job.hosts,
        "--auth-token-file",
        str(job.token),
        *args,
        "--summaries",
        "--analysis-timeout-s",
        "120",
        timeout=300,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "no raw trace fetched" in res.stderr
    return json.loads(res.stdout) if "--json" in args else {"text": res.stdout}


def test_trace_then_fetch_summaries_merge_both_ranks(job: Job) -> None:
    trace_id = f"{job.job_id}-sum"
    doc = _cli(job, "trace", "--job-id", job.job_id, "--iterations", "3", "--iteration-roundup", "2",
               "--trace-id", trace_id, "--json")  # fmt: skip
    assert doc["status"] == "complete" and doc["output_dir"] is None and doc["analysis_error"] is None
    assert sorted(p["rank"] for p in doc["processes"]) == [0, 1]
    assert all(p["state"] == "done" and p["fetch"] == "" for p in doc["processes"])  # nothing fetched
    assert [(s["host"], s["state"], s["error"]) for s in doc["summaries"]] == [
        (job.open.target, "done", ""),
        (job.locked.target, "done", ""),
    ]
    assert [s["ranks"] for s in doc["summaries"]] == [[0], [1]]
    report = doc["report"]
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    assert [s.split(":")[:2] for s in report["sources"]] == [
        job.open.target.split(":"),
        job.locked.target.split(":"),
    ]
    # the cross-rank rules ran here, over both hosts' ranks
    (straggler,) = [o for o in report["rules"] if o["rule"] == "straggler"]
    assert straggler["reason"] == "compared 2 ranks" and straggler["status"] in ("clean", "findings")
    assert report["errors"] == []

    # the same trace again, joined: the analyses are done already
    text = _cli(job, "fetch", "--trace-id", trace_id)["text"]
    assert "rank 0 " in text and "rank 1 " in text
