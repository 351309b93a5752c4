"""Trace retention knows dynod's trace folders by a marker file as well as by their mode 1733, so a filesystem that
drops the sticky bit (or ignores chmod) does not keep traces forever; what others plant never makes a folder
look like dynod's, and folders left alone for looking foreign are reported."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from dyno import trace_layout
from dyno.daemon.tracing import retention, trust
from dyno.logthrottle import ThrottledLog

pytestmark = pytest.mark.unit

HOUR = 3600.0


@pytest.fixture(autouse=True)
def _fresh_warning_throttle(monkeypatch: pytest.MonkeyPatch) -> None:
    # the module's throttle is process-wide: another test's warning within the hour would turn these into DEBUG
    monkeypatch.setattr(retention, "_skipped", ThrottledLog(retention.log, every_s=3600.0, max_keys=4), raising=False)


def _age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def _retention(trace_dir: Path) -> retention.RetentionResult:
    return retention.enforce_retention(trace_dir, max_bytes=1 << 30, max_age_s=HOUR)


def test_an_old_trace_folder_that_lost_its_sticky_bit_is_still_deleted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = trust.make_trace_dir(tmp_path, "t-unsticky")
    (d / "h_7.pt.trace.json.gz").write_bytes(b"x" * 100)
    os.chmod(d, 0o733)  # what a filesystem without the sticky bit leaves
    _age(d, 2 * HOUR)
    with caplog.at_level(logging.WARNING, logger="dyno.daemon.tracing.retention"):
        assert _retention(tmp_path).removed == ("t-unsticky",)
    assert not d.exists()
    assert "lost their mode 1733" in caplog.text and "t-unsticky" in caplog.text


def test_a_trace_dir_where_chmod_does_nothing_keeps_no_trace_forever(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trust.os, "chmod", lambda *_a, **_kw: None)  # e.g. a mount that ignores modes
    d = trust.make_trace_dir(tmp_path, "t-nochmod")
    monkeypatch.undo()
    assert (os.stat(d).st_mode & 0o7777) != 0o1733
    _age(d, 2 * HOUR)
    assert _retention(tmp_path).removed == ("t-nochmod",)


def test_a_refused_chmod_leaves_no_half_made_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a: object, **_kw: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(trust.os, "chmod", refuse)
    with pytest.raises(PermissionError):
        trust.make_trace_dir(tmp_path, "t-refused")
    assert not (tmp_path / "t-refused").exists()  # StartTrace fails; nothing is left for retention to judge


def test_the_marker_is_written_before_the_folder_opens_to_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[int, bool]] = []
    chmod = os.chmod

    def watch(path: str | Path, mode: int) -> None:
        seen.append((os.stat(path).st_mode & 0o7777, (Path(path) / trace_layout.MARKER_NAME).is_file()))
        chmod(path, mode)

    monkeypatch.setattr(trust.os, "chmod", watch)
    d = trust.make_trace_dir(tmp_path, "t-order")
    assert seen == [(0o700, True)]  # private, marker already there, then the drop-box mode
    marker = d / trace_layout.MARKER_NAME
    assert marker.read_bytes() == b"dynod trace folder t-order\n" and marker.stat().st_uid == os.geteuid()
    assert [p.name for p in d.iterdir()] == [trace_layout.MARKER_NAME]  # no temp file left


def test_a_symlink_in_place_of_a_trace_folder_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "traces").mkdir()
    os.symlink(elsewhere, tmp_path / "traces" / "t-link")
    with pytest.raises(OSError, match="not a directory"):
        trust.make_trace_dir(tmp_path / "traces", "t-link")
    assert list(elsewhere.iterdir()) == [] and (elsewhere.stat().st_mode & 0o7777) != 0o1733


def _foreign_folder(trace_dir: Path, name: str) -> Path:
    d = trace_dir / name
    d.mkdir(mode=0o755)
    (d / "data").write_bytes(b"y" * 1000)
    return d


def test_planted_markers_do_not_make_a_folder_dynods(tmp_path: Path) -> None:
    """Markers believed only as a plain file of the daemon's uid, one link, naming its own folder."""
    real = trust.make_trace_dir(tmp_path, "t-real")
    _age(real, 60)  # young: kept, but its marker is what the others copy
    copied = _foreign_folder(tmp_path, "copied")
    (copied / trace_layout.MARKER_NAME).write_bytes(
        (real / trace_layout.MARKER_NAME).read_bytes()
    )  # names another folder
    linked = _foreign_folder(tmp_path, "linked")
    os.symlink(real / trace_layout.MARKER_NAME, linked / trace_layout.MARKER_NAME)
    hard = _foreign_folder(tmp_path, "hard")
    os.link(
        real / trace_layout.MARKER_NAME, hard / trace_layout.MARKER_NAME
    )  # also names another folder, and has two links
    fifo = _foreign_folder(tmp_path, "fifo")
    os.mkfifo(fifo / trace_layout.MARKER_NAME)  # must not block the retention pass
    planted = [copied, linked, hard, fifo]
    handed_over: tuple[str, ...] = ()
    if os.geteuid() == 0:  # another user's file with the right words; and a folder dynod handed over to a user
        other = _foreign_folder(tmp_path, "other")
        (other / trace_layout.MARKER_NAME).write_bytes(b"dynod trace folder other\n")
        os.chown(other / trace_layout.MARKER_NAME, 65534, 65534)
        planted.append(other)
        owned = trust.make_trace_dir(tmp_path, "owned", owner_uid=65534)
        assert (owned.stat().st_uid, owned.stat().st_mode & 0o7777) == (65534, 0o700)
        # its user may chmod it and delete dynod's marker: it is still dynod's (only dynod or root chowns)
        (owned / trace_layout.MARKER_NAME).unlink()
        owned.chmod(0o755)
        _age(owned, 2 * HOUR)
        handed_over = ("owned",)
    for d in planted:
        _age(d, 2 * HOUR)
    result = _retention(tmp_path)
    assert result.removed == handed_over
    assert all(d.is_dir() for d in planted) and real.is_dir()
    assert set(result.foreign) == {d.name for d in planted}


def test_folders_left_alone_are_reported_once_an_hour_not_every_pass(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A user's folder (or old traces that no longer look like dynod's) stays forever: say so, but not every 30 s."""
    _foreign_folder(tmp_path, "projects")
    _age(tmp_path / "projects", 2 * HOUR)
    (tmp_path / "not a trace id").mkdir()
    with caplog.at_level(logging.WARNING, logger="dyno.daemon.tracing.retention"):
        _retention(tmp_path)
        _retention(tmp_path)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "1 folder(s)" in warnings[0] and warnings[0].endswith(": projects")
    assert (tmp_path / "projects" / "data").exists()


def test_retention_by_age_and_size_keeps_active(tmp_path: Path) -> None:
    now = time.time()
    for i, name in enumerate(["old", "mid", "new", "active"]):
        d = trust.make_trace_dir(tmp_path, name)
        (d / "f").write_bytes(b"x" * 100)
        os.utime(d, (now - 1000 + i * 100, now - 1000 + i * 100))
    os.utime(tmp_path / "active", (now - 5000, now - 5000))
    (tmp_path / "not a trace id").mkdir()
    # someone else's folder, named like a trace id and older than everything: not dynod's to delete or count
    foreign = tmp_path / "projects"
    foreign.mkdir()
    (foreign / "data").write_bytes(b"y" * 10_000)
    os.utime(foreign, (now - 9000, now - 9000))
    r = retention.enforce_retention(tmp_path, max_bytes=10_000, max_age_s=950, keep={"active"}, now_s=now)
    assert r.removed == ("old",)
    r = retention.enforce_retention(tmp_path, max_bytes=250, max_age_s=1e9, keep={"active"}, now_s=now)
    markers = sum((tmp_path / name / trace_layout.MARKER_NAME).stat().st_size for name in ("new", "active"))
    assert r.removed == ("mid",) and r.total_bytes == 200 + markers
    assert sorted(p.name for p in tmp_path.iterdir()) == ["active", "new", "not a trace id", "projects"]


def test_retention_keeps_the_newest_finished_trace_even_over_the_size_limit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A trace bigger than trace_retention_bytes on its own survives the passes after it finished (until it ages
    out or a newer trace exists), so a later `dyno-cli fetch` still finds it; older ones still go for size."""
    now = time.time()
    for i, name in enumerate(["older", "big"]):
        d = trust.make_trace_dir(tmp_path, name)
        (d / "f").write_bytes(b"x" * (100 if name == "older" else 5000))
        os.utime(d, (now - 100 + i * 10, now - 100 + i * 10))
    with caplog.at_level(logging.WARNING, logger=retention.log.name):
        r = retention.enforce_retention(tmp_path, max_bytes=1000, max_age_s=1e9, now_s=now)
        again = retention.enforce_retention(tmp_path, max_bytes=1000, max_age_s=1e9, now_s=now)
    assert r.removed == ("older",) and again.removed == ()
    assert (tmp_path / "big" / "f").exists() and r.total_bytes > 1000
    warned = [rec.getMessage() for rec in caplog.records if "trace big is kept" in rec.getMessage()]
    assert len(warned) == 1 and "trace_retention_bytes 1000" in warned[0]  # once, not at every pass
    # a newer trace makes it an ordinary old one; age still removes the newest
    newer = trust.make_trace_dir(tmp_path, "newer")
    os.utime(newer, (now, now))
    assert retention.enforce_retention(tmp_path, max_bytes=1000, max_age_s=1e9, now_s=now).removed == ("big",)
    assert retention.enforce_retention(tmp_path, max_bytes=10**9, max_age_s=5, now_s=now + 60).removed == ("newer",)
