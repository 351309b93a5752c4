"""The analyses' table: rows come back whole, the latest per job, and the bounds (age, per job, bytes)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dyno.daemon.analysis.listed import listed_form
from dyno.daemon.analysis.outcome import Outcome
from dyno.daemon.analysis.store import AnalysisStore
from dyno.daemon.jobs.store import JobStore, StoreError
from dyno.trace_summary import AnalysisFailure, AnalysisState, RuleLoss, TraceSummary

pytestmark = pytest.mark.unit

DAY_MS = 86_400_000


def _outcome(
    tid: str, job: str = "j", user: str = "u", at: int = 10 * DAY_MS, parts: bytes = b"", traced: int = 0
) -> Outcome:
    """`traced`: the trace's trace_finished_ms."""
    s = TraceSummary(
        tid,
        job_id=job,
        user=user,
        hostname="h",
        state=AnalysisState.DONE,
        trace_finished_ms=traced,
        analyzed_ms=at,
        rules=(RuleLoss("r", "LOW", 0.1),),
    )
    return Outcome(s, parts, bool(parts))


def _store(tmp_path: Path, **kw: object) -> tuple[JobStore, AnalysisStore]:
    db = JobStore.in_dir(tmp_path)
    args: dict = {"retention_s": 5 * 86400.0, "max_bytes": 2**30, "per_job": 3, **kw}
    return db, AnalysisStore(lambda: db, **args)


def test_rows_come_back_whole_and_the_latest_of_each_job_is_found(tmp_path: Path) -> None:
    db, st = _store(tmp_path)
    a, b = _outcome("t1", parts=b"\x1f\x8bparts"), _outcome("t2")
    failed = Outcome(_outcome("t3", job="k").summary.failed(AnalysisFailure.CRASHED, "boom", 10 * DAY_MS))
    for o in (a, b, failed):
        st.save(o, listed_form(o.summary), now_ms=10 * DAY_MS)
    got = st.get("t1")
    assert got is not None and got.summary == a.summary and got.rank_parts == b"\x1f\x8bparts" and got.thinned
    assert st.get("nope") is None
    latest = st.latest_summaries({("j", "u"), ("k", "u"), ("x", "u")})
    assert latest == {("j", "u"): b.summary, ("k", "u"): failed.summary}
    assert st.latest_listed({("k", "u")}) == {("k", "u"): listed_form(failed.summary)}
    keys = {(f"job{i}", "u") for i in range(1000)} | {("j", "u")}  # past one query's chunk
    assert set(st.latest_listed(keys)) == {("j", "u")}
    db.close()


def test_a_jobs_latest_is_its_newest_traces_analysis_whatever_order_they_were_analysed_in(tmp_path: Path) -> None:
    db, st = _store(tmp_path)
    newer = _outcome("t-new", traced=9 * DAY_MS)
    older = _outcome("t-old", traced=8 * DAY_MS)  # analysed last (a restart's requeue, GetTraceSummary)
    other = Outcome(
        _outcome("t-k", job="k", traced=7 * DAY_MS).summary.failed(AnalysisFailure.CRASHED, "x", 10 * DAY_MS)
    )
    for o in (newer, other, older):
        st.save(o, listed_form(o.summary), now_ms=10 * DAY_MS)
    assert st.latest_summaries({("j", "u"), ("k", "u")}) == {("j", "u"): newer.summary, ("k", "u"): other.summary}
    assert st.latest_listed({("j", "u")}) == {("j", "u"): listed_form(newer.summary)}
    same = _outcome("t-same", traced=9 * DAY_MS)  # the same trace time: the one saved last
    st.save(same, listed_form(same.summary), now_ms=10 * DAY_MS)
    assert st.latest_summaries([("j", "u")]) == {("j", "u"): same.summary}
    assert st.get("t-old") is not None  # every trace's own analysis stays readable
    db.close()


def test_a_job_keeps_its_newest_traces_analyses_and_the_one_just_saved(tmp_path: Path) -> None:
    db, st = _store(tmp_path)  # per_job 3
    for t in (5, 4, 3, 2, 1):  # newest first, as the requeue queues them
        st.save(_outcome(f"t{t}", traced=t * DAY_MS), b"", now_ms=10 * DAY_MS)
        assert st.get(f"t{t}") is not None  # an older trace's analysis reads back once saved (GetTraceSummary's)
    assert [t for t in range(1, 6) if st.get(f"t{t}") is not None] == [1, 4, 5]
    assert st.latest_summaries([("j", "u")])[("j", "u")].trace_id == "t5"
    st.save(_outcome("t6", traced=6 * DAY_MS), b"", now_ms=10 * DAY_MS)
    assert [t for t in range(1, 7) if st.get(f"t{t}") is not None] == [4, 5, 6]  # the old one goes first
    db.close()


def test_analysed_names_the_trace_ids_with_a_stored_analysis(tmp_path: Path) -> None:
    db, st = _store(tmp_path, per_job=5000)
    for i in range(0, 500, 2):
        st.save(_outcome(f"t{i}"), b"", now_ms=10 * DAY_MS)
    asked = [f"t{i}" for i in range(500)] + ["nope"]  # past one query's chunk
    assert st.analysed(asked) == {f"t{i}" for i in range(0, 500, 2)}
    assert st.analysed([]) == set()
    db.close()
    with pytest.raises(StoreError):
        AnalysisStore(lambda: None, retention_s=1.0, max_bytes=1).analysed(["t0"])


def test_old_rows_go_a_job_keeps_its_newest_and_the_oldest_go_past_the_byte_budget(tmp_path: Path) -> None:
    db, st = _store(tmp_path, max_bytes=16_000)
    st.save(_outcome("old", at=1 * DAY_MS), b"", now_ms=1 * DAY_MS)
    for i in range(5):
        st.save(_outcome(f"t{i}"), b"", now_ms=10 * DAY_MS)
    assert st.get("old") is None  # past retention_s
    assert [st.get(f"t{i}") is not None for i in range(5)] == [False, False, True, True, True]  # per_job 3
    st.save(_outcome("big", job="other", parts=b"\x1f\x8b" + b"p" * 15_000), b"", now_ms=10 * DAY_MS)
    kept = [t for t in ("t2", "t3", "t4", "big") if st.get(t) is not None]
    assert "big" in kept and len(kept) < 4  # the oldest went to fit 16,000 bytes
    db.close()


def test_a_database_that_is_not_open_is_a_store_error(tmp_path: Path) -> None:
    st = AnalysisStore(lambda: None, retention_s=1.0, max_bytes=1)
    with pytest.raises(StoreError, match="not open"):
        st.get("t")
    with pytest.raises(StoreError):
        st.save(_outcome("t"), b"", now_ms=1)


def test_a_summary_row_that_does_not_read_back_is_a_store_error(tmp_path: Path) -> None:
    db, st = _store(tmp_path)
    o = _outcome("t1")
    st.save(replace(o), b"", now_ms=10 * DAY_MS)
    db.write(lambda c: c.execute("UPDATE analyses SET summary = '{\"schema\": 1}'"))
    with pytest.raises(StoreError, match="does not read back"):
        st.get("t1")
    db.close()


def _bytes(db: JobStore) -> tuple[int, int]:
    """(the byte budget's running total, the SUM over every row): they must agree."""
    return db.read(
        lambda c: (
            c.execute("SELECT total FROM analyses_bytes").fetchone()[0],
            c.execute("SELECT COALESCE(SUM(bytes), 0) FROM analyses").fetchone()[0],
        )
    )


def _traced(day: int) -> int:
    """A trace time `day` days on, of the same number of digits for every day below."""
    return 10**12 + day * DAY_MS


def test_past_the_byte_budget_the_oldest_traces_go_whatever_order_they_were_saved_in(tmp_path: Path) -> None:
    (tmp_path / "probe").mkdir()
    probe_db, probe = _store(tmp_path / "probe")
    probe.save(_outcome("t0", traced=_traced(0)), b"", now_ms=10 * DAY_MS)
    row = _bytes(probe_db)[0]  # every row below has this size (ids and times of one length)
    probe_db.close()
    db, st = _store(tmp_path, per_job=20, max_bytes=3 * row)
    for t in (5, 4, 3, 2, 1):  # newest first, as a restart's requeue saves them
        st.save(_outcome(f"t{t}", traced=_traced(t)), b"", now_ms=10 * DAY_MS)
        assert st.get(f"t{t}") is not None  # the row just saved stays, however old its trace
    # t2 and t3 went (the oldest traces but the one just saved), not t5 and t4 (the first saved)
    assert [t for t in range(1, 6) if st.get(f"t{t}") is not None] == [1, 4, 5]
    st.save(_outcome("t6", traced=_traced(6)), b"", now_ms=10 * DAY_MS)
    assert [t for t in range(1, 7) if st.get(f"t{t}") is not None] == [4, 5, 6]
    assert _bytes(db) == (3 * row, 3 * row)
    db.close()


def test_the_byte_total_follows_every_insert_and_every_trim(tmp_path: Path) -> None:
    db, st = _store(tmp_path, per_job=2, max_bytes=9_000)
    assert _bytes(db) == (0, 0)
    st.save(_outcome("old", at=1 * DAY_MS), b"", now_ms=1 * DAY_MS)
    for i in range(6):  # per_job trims, then the retention's
        st.save(_outcome(f"t{i}", job=f"j{i % 3}", traced=i), b"", now_ms=10 * DAY_MS)
        total, summed = _bytes(db)
        assert total == summed > 0
    st.save(_outcome("big", job="k", parts=b"\x1f\x8b" + b"p" * 8_000), b"", now_ms=10 * DAY_MS)  # the budget's
    total, summed = _bytes(db)
    assert total == summed <= 9_000 and st.get("big") is not None and st.get("old") is None
    db.close()


def test_a_reused_trace_id_reads_back_its_newest_traces_analysis(tmp_path: Path) -> None:
    db, st = _store(tmp_path)
    st.save(_outcome("t", traced=9 * DAY_MS), b"", now_ms=10 * DAY_MS)
    st.save(_outcome("t", traced=8 * DAY_MS), b"", now_ms=10 * DAY_MS)  # an older trace of the id, analysed later
    got = st.get("t")
    assert got is not None and got.summary.trace_finished_ms == 9 * DAY_MS
    db.close()
