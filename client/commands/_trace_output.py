"""Where a trace's files go: the checks of --output-dir and --html before anything is traced, and the trace
folder (OUTPUT_DIR/TRACE_ID), removed again when a failed run leaves it empty."""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from dyno.client.commands._hosts import usage_error
from dyno.trace_layout import MARKER_NAME, RECORD_NAME

__all__ = [
    "DAEMON_TRACE_FOLDER_FILES",
    "check_html",
    "check_not_a_daemon_trace_dir",
    "check_trace_folder",
    "check_writable",
    "trace_folder",
]

log = logging.getLogger(__name__)

# What dynod leaves in each folder of its trace dir: how an --output-dir that is a daemon's trace dir is recognised.
DAEMON_TRACE_FOLDER_FILES = (MARKER_NAME, RECORD_NAME)
_SCAN_ENTRIES = 200  # folders of OUTPUT_DIR looked at for them (a trace dir's are all alike)


def _is_daemon_trace_folder(folder: Path) -> bool:
    return any(os.path.lexists(folder / name) for name in DAEMON_TRACE_FOLDER_FILES)


def check_not_a_daemon_trace_dir(output_dir: Path) -> None:
    """Usage error (exit 2) when `output_dir` is a dynod's trace dir (/tmp/dyno-traces, the natural guess on one
    host) or one of its trace folders: the fetched copies and manifest.json went into the daemon's own folder of the
    trace, beside its files (read twice by `analyze`), where its retention deletes them."""
    if _is_daemon_trace_folder(output_dir):
        usage_error(
            f"--output-dir {output_dir}: is a dynod's trace folder (its retention deletes what is put there); "
            "choose a folder of your own"
        )
    try:
        with os.scandir(output_dir) as entries:
            for entry in itertools.islice(entries, _SCAN_ENTRIES):
                if entry.is_dir(follow_symlinks=False) and _is_daemon_trace_folder(Path(entry.path)):
                    usage_error(
                        f"--output-dir {output_dir}: is a dynod's trace dir ({entry.name} is one of its trace "
                        "folders): its retention deletes what is fetched there; choose a folder of your own"
                    )
    except OSError:  # missing (made later) or unreadable: check_writable says what matters
        pass


def check_writable(output_dir: Path) -> None:
    """Usage error (exit 2) unless files can be created in `output_dir`, and it is not a dynod's trace dir. Nothing
    is made here: the folders are made when the first file is written, so a run that records nothing (no host
    traced) leaves no folder behind."""
    check_not_a_daemon_trace_dir(output_dir)
    existing = output_dir
    while not os.path.lexists(existing) and existing.parent != existing:
        existing = existing.parent  # the folder that mkdir will create the missing ones in
    try:
        if not existing.is_dir():  # the path, or a folder on it, is a file (mkdir said "File exists" for the path)
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as e:
        usage_error(f"--output-dir {output_dir}: cannot write there: {e.strerror or e}")


def check_trace_folder(folder: Path, *, may_hold_files: bool) -> None:
    """Usage error (exit 2) unless OUTPUT_DIR/TRACE_ID is missing or a folder, and (for `trace`: a new trace must
    not mix with another's files) empty unless `may_hold_files` (`fetch` reuses what an earlier run fetched)."""
    if os.path.lexists(folder) and not folder.is_dir():
        usage_error(f"{folder} exists and is not a folder (choose another --trace-id or --output-dir)")
    if not may_hold_files and folder.is_dir() and any(folder.iterdir()):
        usage_error(f"{folder} already exists and is not empty (choose another --trace-id or --output-dir)")


def check_html(html: Path | None, *, no_analyze: bool = False) -> None:
    """Usage error (exit 2) unless the --html report can be written where asked: in an existing folder, not over
    a folder, and with the analysis on. Checked before anything is traced, not found out after the trace."""
    if html is None:
        return
    if html.is_dir():
        usage_error(f"--html {html}: is a folder (give a file name)")
    folder = html.parent
    if not folder.is_dir():
        usage_error(f"--html {html}: {folder} is not an existing folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        usage_error(f"--html {html}: cannot write in {folder}")
    if no_analyze:  # the report is the analysis': none was written, without a word
        usage_error("--html writes the analysis report: it cannot go with --no-analyze")


@contextlib.contextmanager
def trace_folder(folder: Path | None) -> Iterator[Path | None]:
    """The run's OUTPUT_DIR/TRACE_ID (None: a run that writes none, --summaries). When the run fails (an exception:
    a full disk when the manifest is written, any write failure) and the folder did not exist before it and holds
    no file, it is removed again, with the folders above it that the run made (a new OUTPUT_DIR): an empty folder
    records nothing and looks like a result. A folder that existed before, or that holds any file (a manifest, a
    trace, anything), is never touched: nothing is lost on failure."""
    if folder is None:
        yield None
        return
    existed = os.path.lexists(folder)
    top = folder  # the highest folder this run will have made
    while not os.path.lexists(top.parent) and top.parent != top:
        top = top.parent
    try:
        yield folder
    except BaseException:
        if not existed:
            _remove_if_empty(top)
        raise


def _remove_if_empty(folder: Path) -> None:
    """Remove `folder` and its subfolders when it holds nothing but empty folders (e.g. a host folder made for a
    fetch that failed); else leave all of it. rmdir only: it refuses a folder that is not empty, so a file that
    appears meanwhile is never removed."""
    dirs: list[Path] = []

    def only_folders(d: Path) -> bool:
        dirs.append(d)
        with os.scandir(d) as it:
            return all(e.is_dir(follow_symlinks=False) and only_folders(Path(e.path)) for e in it)

    try:
        if not folder.is_dir() or folder.is_symlink() or not only_folders(folder):
            return
        for d in reversed(dirs):  # children before their parents
            d.rmdir()
    except OSError as e:  # best effort: the run's own error is what the user must see
        log.debug("could not remove the empty folder %s: %s", folder, e)
