"""How long trace folders stay: the whole trace dir measured, and dynod's own folders deleted past the age or size
budget, oldest first, never an active one nor the newest."""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from dyno.daemon.tracing.trust import MARKER_NAME, OWNED_DIR_MODE, TRACE_DIR_MODE, made_by_dynod, trace_dir_problem
from dyno.daemon.tree_removal import remove_tree
from dyno.logthrottle import ThrottledLog
from dyno.trace_ids import is_trace_id

__all__ = ["RetentionResult", "enforce_retention", "tree_size"]

log = logging.getLogger(__name__)


def tree_size(path: Path) -> int:
    """Bytes of the regular files under `path` (symlinks not followed). A walk with a stack, not recursion: any
    trainer can nest folders in a trace folder (1733) deeper than Python's recursion limit."""
    total = 0
    todo = [path]
    while todo:
        try:
            entries = list(os.scandir(todo.pop()))
        except OSError:  # gone meanwhile, or a path past PATH_MAX: not counted
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    todo.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return total


@dataclass(frozen=True)
class RetentionResult:
    removed: tuple[str, ...]
    total_bytes: int  # what dynod's traces (and loose files) in the trace dir hold afterwards: the size limit's figure
    dir_bytes: int  # everything under the trace dir afterwards, others' folders too (GetStatus' trace_dir_bytes)
    foreign: tuple[str, ...] = ()  # trace-id-named folders skipped as not dynod's


# A WARNING per hour at most: the same foreign folders are found again at every pass (every 30 s)
_skipped = ThrottledLog(log, every_s=3600.0, max_keys=4)
# Once per trace: the same newest trace is found over the budget at every pass until a newer one exists
_over_budget = ThrottledLog(log, every_s=float("inf"), max_keys=16)


def _warn_skipped(trace_dir: Path, foreign: list[str], unsticky: list[str]) -> None:
    if foreign:
        _skipped.warning(
            "foreign",
            "trace retention leaves %d folder(s) in %s alone that dynod did not make (dynod's user's, with neither "
            "mode 1733 nor dynod's %s marker): they are neither deleted nor counted against trace_retention_bytes; "
            "remove them yourself if they are old traces: %s",
            len(foreign),
            trace_dir,
            MARKER_NAME,
            ", ".join(sorted(foreign)[:10]),
        )
    if unsticky:
        _skipped.warning(
            "mode",
            "%d trace folder(s) in %s lost their mode 1733 (does this filesystem drop the sticky bit?): retention "
            "still knows them by dynod's marker, but trainers of different users can delete each other's traces "
            "there: %s",
            len(unsticky),
            trace_dir,
            ", ".join(sorted(unsticky)[:10]),
        )


def enforce_retention(
    trace_dir: Path, *, max_bytes: int, max_age_s: float, keep: Collection[str] = (), now_s: float | None = None
) -> RetentionResult:
    """Delete whole trace directories, oldest first, past max_age_s or while the total exceeds max_bytes.

    Only the trace folders dynod made (``made_by_dynod``) are counted and deleted; `keep` (active traces) never
    is, nor is the newest other one for size: a trace larger than max_bytes on its own would otherwise be deleted
    at the first pass after it finished, before `dyno-cli fetch` could pull it (it goes at max_age_s or once a
    newer trace exists; a WARNING says so once). Other folders there are left alone and do not count: retention
    must not delete what it did not create. Trace-id-named folders skipped that way are logged (a throttled
    WARNING), since old traces that no longer look like dynod's would otherwise stay forever unnoticed. The pass
    walks everything anyway, so it also measures the whole trace dir (``dir_bytes``), which GetStatus reports
    from then on (see usage.py).
    """
    problem = trace_dir_problem(trace_dir)
    if problem is not None:  # its folders may be symlinks by now: nothing there is dynod's to delete or count
        _skipped.warning("untrusted", "trace retention deletes nothing: %s", problem)
        return RetentionResult((), 0, 0)
    now = time.time() if now_s is None else now_s
    dirs: list[tuple[float, str, int]] = []
    total = 0
    others = 0  # bytes in folders that are not dynod's
    foreign: list[str] = []
    unsticky: list[str] = []
    try:
        entries = list(os.scandir(trace_dir))
    except OSError:
        return RetentionResult((), 0, 0)
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                st = entry.stat(follow_symlinks=False)
                size = tree_size(Path(entry.path))
                if not made_by_dynod(Path(entry.path), st):
                    others += size
                    if is_trace_id(entry.name):
                        foreign.append(entry.name)
                    continue
                if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) not in (TRACE_DIR_MODE, OWNED_DIR_MODE):
                    unsticky.append(entry.name)
                dirs.append((st.st_mtime, entry.name, size))
                total += size
            elif entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    _warn_skipped(trace_dir, foreign, unsticky)
    removed: list[str] = []
    finished = sorted(d for d in dirs if d[1] not in keep)
    newest = finished[-1][1] if finished else None
    for mtime, name, size in finished:
        if now - mtime > max_age_s or (total > max_bytes and name != newest):
            try:
                remove_tree(trace_dir / name)
            except OSError as e:  # a trainer still writing there, say: the next pass tries again
                _skipped.warning("remove", "trace retention could not delete %s: %s", trace_dir / name, e)
                continue
            removed.append(name)
            total -= size
    if newest is not None and total > max_bytes and newest not in removed:
        _over_budget.warning(
            newest,
            "trace %s is kept although the trace dir holds %d bytes, more than trace_retention_bytes %d: the newest "
            "finished trace is deleted only at trace_retention_s or once a newer trace exists",
            newest,
            total,
            max_bytes,
        )
    if removed:
        log.info("trace retention removed %d trace dir(s): %s", len(removed), ", ".join(removed[:10]))
    return RetentionResult(tuple(removed), total, total + others, tuple(sorted(foreign)))
