"""Find the trace files of a job: the files given, and the ``*.json`` / ``*.json.gz`` files in the folders given.

Without numpy (nor anything that imports it): ``dyno-cli analyze`` asks which file it will load before it imports
the analysis stack, to start reading that file meanwhile (``readahead``). ``loader`` wraps it for the library.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from dyno.trace_analysis.traceopen import TraceLoadError

__all__ = ["find_trace_files", "single_trace_file", "trace_paths"]

# written by `dyno-cli trace` beside the per-host folders; by dynod in each trace's folder (analysing the daemon's
# trace dir directly)
_NOT_TRACES = {"manifest.json", "dynod-record.json"}


def find_trace_files(folder: str | os.PathLike[str]) -> list[Path]:
    """Trace files (``*.json`` / ``*.json.gz``) in ``folder`` and its subfolders (``dyno-cli trace`` lays files out
    as ``<trace_id>/<host>/<file>``), sorted by path; hidden files and folders (partial downloads) and manifests
    skipped, symlinked folders not followed (as ``Path.rglob``), unreadable folders skipped."""
    found: list[Path] = []
    _collect_trace_files(Path(folder), found)
    return sorted(found)


def _collect_trace_files(folder: Path, found: list[Path], limit: int | None = None) -> None:
    """Append the trace files under ``folder`` to ``found``, in walk order, stopping once it holds ``limit``."""
    # os.scandir rather than Path.rglob: same files, a tenth of the time (rglob compiles a pattern and builds a
    # Path per entry; a fixed cost that showed in the load of small traces)
    try:
        with os.scandir(folder) as it:
            entries = list(it)
    except OSError:
        return
    for e in entries:
        if limit is not None and len(found) >= limit:
            return
        name = e.name
        if name.startswith("."):
            continue
        if e.is_dir(follow_symlinks=False):
            _collect_trace_files(folder / name, found, limit)
        elif name.endswith((".json", ".json.gz")) and name not in _NOT_TRACES and e.is_file():
            found.append(folder / name)


def _refuse_several_traces(folder: Path, files: list[Path]) -> None:
    """Raise ``TraceLoadError`` when ``folder`` holds several dyno traces (``dyno-cli trace``'s output dir, or
    dynod's trace dir: one subfolder per trace id, each with its manifest or record): their files are not ranks
    of one job, and analysed together they were reported as ranks 0, 1, ... of one.

    Trace folders are told apart by their name, the trace id: a cluster trace has one id on every host, so the
    dynod folders of one trace collected from several hosts (``h1/<id>/``, ``h2/<id>/``) are its ranks."""
    roots: dict[str, Path] = {}  # by trace id (folder name; "." for files outside any trace folder): the first
    known: dict[Path, Path | None] = {}
    for f in files:
        root = _trace_root(f.parent, folder, known)
        roots.setdefault("." if root is None or root == folder else root.name, root or folder)
    if len(roots) > 1:
        names = sorted(str(r.relative_to(folder)) if r != folder else "." for r in roots.values())
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise TraceLoadError(
            folder,
            f"holds {len(names)} traces ({shown}), not the ranks of one: analyse one of them, "
            f"e.g. {folder / names[-1]}",
        )


def _trace_root(d: Path, top: Path, known: dict[Path, Path | None]) -> Path | None:
    """The outermost folder from ``top`` down to ``d`` that holds a dyno manifest or dynod record, else None
    (outermost: a daemon's trace folder copied into a host folder of a fetched trace is still that one trace)."""
    if d in known:
        return known[d]
    above = None if d == top or d.parent == d else _trace_root(d.parent, top, known)
    root = above if above is not None else (d if any((d / n).is_file() for n in _NOT_TRACES) else None)
    known[d] = root
    return root


def _distinct(files: list[Path]) -> list[Path]:
    """``files`` without repeats of one file (a folder and a file in it both given), first occurrence kept."""
    if len(files) < 2:  # (realpath costs a system call per path component)
        return files
    seen: set[str] = set()
    out = []
    for f in files:
        key = os.path.realpath(f)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def single_trace_file(items: Sequence[str | os.PathLike[str]]) -> Path | None:
    """The one trace file ``items`` name as ``trace_paths`` would give it (a file, or a folder holding one), cheaply
    (a folder walked up to its second trace file; no other check); None for anything else (the load finds what it
    is)."""
    if len(items) != 1:
        return None
    p = Path(items[0])
    try:
        if not p.is_dir():
            return p
    except OSError:
        return None
    found: list[Path] = []
    _collect_trace_files(p, found, limit=2)  # a second one is enough to know
    return found[0] if len(found) == 1 else None


def trace_paths(items: Sequence[str | os.PathLike[str]]) -> tuple[list[Path], list[Path]]:
    """The trace files ``load_traces`` loads from ``items`` (files, folders), each once, in order; and the folders
    given that hold none. Raises ``TraceLoadError`` for a folder of several dyno traces."""
    files: list[Path] = []
    empty: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = find_trace_files(p)
            if not found:
                empty.append(p)
            _refuse_several_traces(p, found)
            files.extend(found)
        else:
            files.append(p)
    return _distinct(files), empty
