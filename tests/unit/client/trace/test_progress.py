"""The progress views: before a trace's synchronized start they say the hosts are waiting for it and for how long;
their totals add up."""

from __future__ import annotations

import io

import pytest
from host_records import fetched_proc, host_record

from dyno.client.hosts import Host
from dyno.client.trace.progress import PlainProgress, RichProgress, SyncStart, counts, total_line
from dyno.client.trace.records import HostRecord, ProcRecord

pytestmark = pytest.mark.unit

START_MS = 1_796_000_007_000


def _hosts() -> list[HostRecord]:
    return [host_record("gpu1", "tracing", ProcRecord(pid=11, state="delivered"), ProcRecord(pid=12, state="running"))]


def _clock(now_ms: list[float]) -> SyncStart:
    return SyncStart(START_MS, wall_ms=lambda: now_ms[0])


def test_plain_lines_say_when_recording_starts() -> None:
    now = [START_MS - 6_800.0]
    out = io.StringIO()
    progress = PlainProgress(out, every_s=0, sync=_clock(now))
    progress.update(_hosts())
    text = out.getvalue()
    assert "waiting for the synchronized start at " in text and "(in 6.8 s)" in text
    assert "start in 6.8 s | hosts: 1 tracing" in text
    now[0] = START_MS + 500.0  # started: no more waiting lines
    out.seek(0)
    out.truncate()
    progress.update(_hosts())
    assert "start" not in out.getvalue() and "hosts: 1 tracing" in out.getvalue()


def test_the_live_table_shows_the_wait_instead_of_tracing() -> None:
    now = [START_MS - 6_200.0]
    out = io.StringIO()
    progress = RichProgress(out, "trace t1", _clock(now))
    progress.close(_hosts())
    table = out.getvalue()
    row = next(line for line in table.splitlines() if "gpu1:1778" in line)
    assert "starts in 7 s" in row and "tracing" not in row
    assert "waiting for the synchronized start at" in table and "(in 6.2 s)" in table

    now[0] = START_MS + 1.0
    after = io.StringIO()
    RichProgress(after, "trace t1", _clock(now)).close(_hosts())
    row = next(line for line in after.getvalue().splitlines() if "gpu1:1778" in line)
    assert "tracing" in row and "starts in" not in after.getvalue()


def test_without_a_synchronized_start_nothing_changes() -> None:
    assert SyncStart().left_s() == 0 and SyncStart().line() == ""


# The progress totals add up: a done process whose file did not arrive counts as failed only.


def test_a_done_process_whose_fetch_failed_counts_once() -> None:
    h = HostRecord(Host("gpu1", 1778), "gpu1_1778", state="done", matched_pids=[1, 2])
    h.processes = [
        ProcRecord(pid=1, state="done", fetch="fetched", fetched_bytes=10),
        ProcRecord(pid=2, state="done", fetch="failed", error="No space left on device"),
    ]
    c = counts(h)
    assert (c.matched, c.running, c.done, c.failed, c.fetched) == (2, 0, 1, 1, 1)
    assert "processes: 2 matched, 0 running, 1 done, 1 failed" in total_line([h])


# Host changes and totals, with and without the live table.


def test_plain_progress_prints_host_changes_and_periodic_totals() -> None:
    out = io.StringIO()
    now = [0.0]
    view = PlainProgress(out, every_s=2.0, clock=lambda: now[0])
    tracing = host_record("a", "tracing", ProcRecord(1, state="running"))
    view.update([tracing, host_record("b", "failed", error="cannot reach dynod")])
    now[0] = 1.0
    view.update([tracing])  # nothing changed, no total yet
    now[0] = 2.5
    view.close([host_record("a", "done", fetched_proc(1))])
    lines = out.getvalue().splitlines()
    assert lines[0] == "  a:1778: tracing 1 process(es), pids 1"
    assert lines[1] == "  b:1778: failed: cannot reach dynod"
    assert lines[2].startswith("[   0.0s] hosts: 1 tracing, 1 failed | processes: 1 matched, 1 running")
    assert lines[3].startswith("  a:1778: done, 1 file(s) fetched")
    assert lines[4].startswith("[   2.5s] hosts: 1 done") and "fetched 1 file(s), 10 B" in lines[4]
    assert len(lines) == 5


def test_rich_progress_draws_one_row_per_host() -> None:
    out = io.StringIO()
    view = RichProgress(out, "trace t1 (job j)")
    view._console.width = 150
    hosts = [host_record("a", "done", fetched_proc(1)), host_record("bad", "failed", error="cannot reach dynod")]
    view.update(hosts)
    view.close(hosts)
    text = out.getvalue()
    assert "trace t1 (job j)" in text and "REASON" in text
    row = next(line for line in text.splitlines() if "bad:1778" in line)
    assert "failed" in row and "cannot reach dynod" in row
