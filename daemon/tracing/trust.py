"""Where trace files live under the daemon's trace dir, how they are streamed out, and how long they stay.

Every path is derived here from the daemon's trace dir, a validated trace id, the host name and a pid: a remote
request never names a path.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from dyno.daemon.tree_removal import remove_tree
from dyno.daemon.trusted_dirs import dir_problem
from dyno.diskspace import free_space_note
from dyno.filechunks import checksum_of, new_digest
from dyno.logthrottle import ThrottledLog
from dyno.trace_ids import is_trace_id, safe_host, validate_trace_id

__all__ = [
    "MAX_CHUNK",
    "Chunk",
    "ChecksumCache",
    "RetentionResult",
    "kineto_log_file",
    "kineto_output",
    "agent_output",
    "reported_agent_output",
    "FILE_NAME_RE",
    "MARKER_NAME",
    "UntrustedFileError",
    "UntrustedTraceDirError",
    "make_trace_dir",
    "require_trusted_trace_dir",
    "trace_dir_problem",
    "find_trace_file",
    "iter_chunks",
    "tree_size",
    "trainer_file_check",
    "trainer_file_stat",
    "enforce_retention",
    "discard_unfinished_kineto_file",
    "forgotten_trace_hint",
]

log = logging.getLogger(__name__)

MAX_CHUNK = 1024 * 1024
KINETO_SUFFIX = ".pt.trace.json"
AGENT_SUFFIX = ".pt.trace.json.gz"


def kineto_log_file(trace_dir: Path, trace_id: str, hostname: str) -> Path:
    """What ACTIVITIES_LOG_FILE says; libkineto writes it with `_<pid>` inserted before `.pt.trace.json`."""
    return trace_dir / trace_id / f"{safe_host(hostname)}{KINETO_SUFFIX}"


def kineto_output(trace_dir: Path, trace_id: str, hostname: str, pid: int) -> Path:
    return trace_dir / trace_id / f"{safe_host(hostname)}_{pid}{KINETO_SUFFIX}"


def agent_output(trace_dir: Path, trace_id: str, hostname: str, pid: int) -> Path:
    return trace_dir / trace_id / f"{safe_host(hostname)}_{pid}{AGENT_SUFFIX}"


# A trace file's base name as the daemon makes them (kineto_output, agent_output), under any host name
FILE_NAME_RE = re.compile(
    r"\A[A-Za-z0-9_.-]{1,255}_(?P<pid>[0-9]{1,10})(?P<suffix>"
    + re.escape(KINETO_SUFFIX)
    + "|"
    + re.escape(AGENT_SUFFIX)
    + r")\Z"
)


def reported_agent_output(trace_dir: Path, trace_id: str, pid: int, reported: str) -> Path | None:
    """The path an agent reported its file at, when it is where a daemon names that pid's agent file in the trace's
    folder, whatever the host name in it (the daemon that gave the agent its path ran under the host name of
    then: dynod may have restarted since, after a host name change); else None. Lexically: no "..", no other
    folder, nothing but the daemon's naming."""
    path = Path(reported)
    m = FILE_NAME_RE.match(path.name)
    if not reported or path.parent != trace_dir / trace_id or m is None or m.group("suffix") != AGENT_SUFFIX:
        return None
    return path if int(m.group("pid")) == pid else None


_TRACE_DIR_MODE = 0o1733
# A trace of one user's processes: that user's folder, which no other user may enter (make_trace_dir)
_OWNED_DIR_MODE = 0o700
# In every folder make_trace_dir makes, before anyone else can write there: what tells retention the folder is
# dynod's when the mode cannot (a filesystem that drops the sticky bit, or ignores chmod). Believed only as a plain
# file (no symlink, one link) owned by the daemon's uid and naming its own folder: the sticky bit keeps trainers
# from replacing it, and another user's file, or a hard link to one in another folder, does not pass.
MARKER_NAME = ".dynod-trace"
_MARKER_MAX = 256


def _marker_bytes(trace_id: str) -> bytes:
    return f"dynod trace folder {trace_id}\n".encode()


def _write_marker(folder: Path, trace_id: str) -> None:
    # mkstemp (O_EXCL, a random name) + rename: nothing planted in a folder that existed already is followed
    fd, tmp = tempfile.mkstemp(prefix=f"{MARKER_NAME}.", suffix=".writing", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_marker_bytes(trace_id))
        os.replace(tmp, folder / MARKER_NAME)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class UntrustedTraceDirError(PermissionError):
    """The trace dir (or a folder above it) can be changed by a user other than root and the daemon's own."""


def trace_dir_problem(trace_dir: Path) -> str | None:
    """Why nobody should trust `trace_dir`, or None (dyno.daemon.trusted_dirs): dynod makes folders there, chmods them
    1733, writes records in them and deletes them, so a user who could rename its entries could swap a trace folder
    for a symlink between dynod's mkdir and chmod (a root chmod 1733 of any folder), or its record write."""
    return dir_problem(trace_dir, what="the trace dir", key="trace_dir")


def require_trusted_trace_dir(trace_dir: Path) -> None:
    """Raises UntrustedTraceDirError (naming the trace dir, the reason in strerror) when trace_dir_problem finds one."""
    problem = trace_dir_problem(trace_dir)
    if problem is not None:
        raise UntrustedTraceDirError(errno.EPERM, problem, str(trace_dir))


def make_trace_dir(trace_dir: Path, trace_id: str, owner_uid: int | None = None) -> Path:
    """<trace-dir>/<trace_id> with dynod's marker file (MARKER_NAME) written while the folder is still private; then
    either the folder of `owner_uid` (mode 0700, chowned to them: the trainers of that one user write their files
    there and no other user may enter it, to read them or to plant files at their names), when dynod may hand it over
    (it runs as root, or as that user), or else a folder writable by trainers of any user (1733: sticky and not
    listable, like a drop box). A folder this call made is removed again when it cannot be finished (chmod or chown
    refused), so no half-made folder is left behind. The trace dir is dynod's (require_trusted_trace_dir): nobody
    else can swap the new folder for a symlink before the chown."""
    trace_dir.mkdir(parents=True, exist_ok=True)
    require_trusted_trace_dir(trace_dir)
    path = trace_dir / validate_trace_id(trace_id)
    try:
        path.mkdir(mode=0o700)
        made = True
    except FileExistsError:
        made = False
        if not stat.S_ISDIR(os.lstat(path).st_mode):  # a symlink (or file) in its place is not followed
            raise OSError(errno.EEXIST, "exists and is not a directory", str(path)) from None
    euid = os.geteuid()
    owned = owner_uid is not None and owner_uid >= 0 and euid in (0, owner_uid)
    try:
        _write_marker(path, trace_id)
        os.chmod(path, _OWNED_DIR_MODE if owned else _TRACE_DIR_MODE)
        if owned and owner_uid != euid:
            os.chown(path, owner_uid, -1, follow_symlinks=False)  # type: ignore[arg-type]
    except OSError as e:
        if made:
            shutil.rmtree(path, ignore_errors=True)
        if e.filename is None:  # mkstemp's and write's errors name no file: "No space left on device", where?
            raise OSError(e.errno, e.strerror, str(path)) from None
        raise
    return path


def _has_marker(folder: Path, trace_id: str) -> bool:
    try:
        f = open_trace_file(folder / MARKER_NAME)  # no symlink, a plain file, one link
    except OSError:
        return False
    with f:
        st = os.fstat(f.fileno())
        return st.st_uid == os.geteuid() and f.read(_MARKER_MAX) == _marker_bytes(trace_id)


def _made_by_dynod(path: Path, st: os.stat_result) -> bool:
    """A folder make_trace_dir made: a trace-id name, and this daemon's owner with the drop-box mode, or dynod's
    marker (folders from before the marker have only the mode; a filesystem dropping the sticky bit leaves only the
    marker), or another owner: a folder dynod handed over to the traced processes' user (only dynod and root can
    make anything in the trace dir, and only they can chown; that user may chmod it and delete the marker, which
    must not let their traces escape retention). Anything else in the trace dir (another tool's, an admin's folder
    of dynod's user) is not dynod's to delete."""
    if not is_trace_id(path.name):
        return False
    if st.st_uid != os.geteuid():
        return True
    return stat.S_IMODE(st.st_mode) == _TRACE_DIR_MODE or _has_marker(path, path.name)


def find_trace_file(trace_dir: Path, trace_id: str, hostname: str, pid: int, known: Path | None = None) -> Path | None:
    """The completed file of (trace_id, pid) on disk: `known` (the path the trace manager has for it, used only when
    it lies directly in the trace's folder), else agent or kineto naming; None if there is none."""
    validate_trace_id(trace_id)
    candidates = [agent_output(trace_dir, trace_id, hostname, pid), kineto_output(trace_dir, trace_id, hostname, pid)]
    if known is not None and known.parent == trace_dir / trace_id and known.name not in ("", ".", ".."):
        candidates.insert(0, known)
    for path in candidates:
        try:
            st = os.lstat(path)  # lstat: a symlink planted in the world-writable trace dir is not a trace
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            return path
    return None


def open_trace_file(path: Path) -> BinaryIO:
    """Open a trace file for streaming, refusing what a local user could plant in the world-writable per-trace
    directory to make the (root) daemon serve another file: symlinks (O_NOFOLLOW), non-regular files, and hard
    links (a second name for someone else's file)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise OSError(errno.EPERM, "not a plain trace file (symlink, special file or hard link)", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class UntrustedFileError(OSError):
    """A file at a trace file's name that cannot be the traced process's (its reason is the strerror)."""


def trainer_file_stat(path: Path, uid: int = -1) -> os.stat_result:
    """The lstat of a trainer's finished trace file, when it can be believed to be the traced process's: a plain file
    (lstat: a symlink is never followed; no FIFO, whose open would block the reader), one link (no second name of
    someone else's file), owned by `uid` (the traced process's user, a kernel fact; -1: unknown, not checked).

    Any local user can create a file at a trace file's name (the folder is 1733 and the names predictable) before the
    trainer publishes its own, whose rename over it then fails (the sticky bit): to pass their data off as that
    process's trace, or to stall or mislead the daemon reading it. Raises FileNotFoundError when nothing is there yet,
    UntrustedFileError otherwise."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise UntrustedFileError(errno.EPERM, "is not a plain file (a symlink, FIFO or device put there)", str(path))
    if st.st_nlink != 1:
        raise UntrustedFileError(errno.EPERM, f"has {st.st_nlink} links (a hard link to another file?)", str(path))
    if uid >= 0 and st.st_uid != uid:
        raise UntrustedFileError(
            errno.EPERM,
            f"is owned by uid {st.st_uid}, not by the traced process's uid {uid} (put there by another user?)",
            str(path),
        )
    return st


def trainer_file_check(path: Path, uid: int = -1) -> tuple[os.stat_result | None, str]:
    """trainer_file_stat as a value: (its stat, "") when the file can be believed the traced process's; else (None,
    why not, "PATH is missing" or "PATH <UntrustedFileError's reason>"), for callers that say it or only ask."""
    try:
        return trainer_file_stat(path, uid), ""
    except UntrustedFileError as e:
        return None, f"{path} {e.strerror}"
    except OSError:
        return None, f"{path} is missing"


@dataclass(frozen=True)
class Chunk:
    data: bytes
    offset: int
    last: bool
    checksum: str = ""  # "xxh3_128:<hex>" (dyno.filechunks), on the last chunk
    total_size: int = 0  # on the first chunk
    filename: str = ""  # base name, on the first chunk


class ChecksumCache:
    """Checksums of complete (immutable) trace files, keyed by inode, size and mtime so a changed file misses.

    The first stream of a file hashes as it reads; later streams of the same file skip the hashing.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[int, int, int, int], str] = OrderedDict()
        self._max = max_entries

    @staticmethod
    def key(st: os.stat_result) -> tuple[int, int, int, int]:
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def get(self, st: os.stat_result) -> str:
        with self._lock:
            return self._entries.get(self.key(st), "")

    def put(self, st: os.stat_result, checksum: str) -> None:
        with self._lock:
            self._entries[self.key(st)] = checksum
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)


def iter_chunks(path: Path, chunk_size: int = MAX_CHUNK, cache: ChecksumCache | None = None) -> Iterator[Chunk]:
    """Stream a file in chunks of at most chunk_size (capped at 1 MiB), one chunk of look-ahead in memory."""
    chunk_size = max(1, min(chunk_size or MAX_CHUNK, MAX_CHUNK))
    with open_trace_file(path) as f:
        st = os.fstat(f.fileno())
        known = cache.get(st) if cache is not None else ""
        digest = None if known else new_digest()
        total = st.st_size
        offset = 0
        cur = f.read(chunk_size)
        first = True
        while True:
            nxt = f.read(chunk_size) if cur else b""
            if digest is not None:
                digest.update(cur)
            last = not nxt
            checksum = ""
            if last:
                checksum = known or checksum_of(digest)  # type: ignore[arg-type]
                if cache is not None and not known and offset + len(cur) == total:
                    cache.put(st, checksum)
            yield Chunk(
                data=cur,
                offset=offset,
                last=last,
                checksum=checksum,
                total_size=total if first else 0,
                filename=path.name if first else "",
            )
            if last:
                return
            offset += len(cur)
            cur, first = nxt, False


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

    Only the trace folders dynod made (``_made_by_dynod``) are counted and deleted; `keep` (active traces) never
    is, nor is the newest other one for size: a trace larger than max_bytes on its own would otherwise be deleted
    at the first pass after it finished, before `dyno-cli fetch` could pull it (it goes at max_age_s or once a
    newer trace exists; a WARNING says so once). Other folders there are left alone and do not count: retention
    must not delete what it did not create. Trace-id-named folders skipped that way are logged (a throttled
    WARNING), since old traces that no longer look like dynod's would otherwise stay forever unnoticed. The pass
    walks everything anyway, so it also measures the whole trace dir (``dir_bytes``), which GetStatus reports
    from then on (see trace_usage).
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
                if not _made_by_dynod(Path(entry.path), st):
                    others += size
                    if is_trace_id(entry.name):
                        foreign.append(entry.name)
                    continue
                if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) not in (_TRACE_DIR_MODE, _OWNED_DIR_MODE):
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


# Why libkineto leaves `<file>.tmp` unfinished, read in pytorch/kineto libkineto/src (and seen with torch 2.13 CPU):
# - output_json.cpp, ChromeTraceLogger::ChromeTraceLogger() calls openTraceFile(), which opens `fileName_ + ".tmp"`
#   (`traceOf_.open(tempFileName_, std::ofstream::out | std::ofstream::trunc);`); the header is written only by
#   handleTraceStart(), from CuptiActivityProfiler::processTraceInternal(), i.e. after the recording.
# - ActivityProfilerController.cpp (commit 972a353), ActivityProfilerController::activateConfig(): `logger_ =
#   makeLogger(*asyncRequestConfig_);` comes before `profiler_->configure(*asyncRequestConfig_, now);`, and
#   CuptiActivityProfiler::configure() returns without tracing when `!derivedConfig_->canStart(now)`:
#   ConfigDerivedState::canStart() (CuptiActivityProfiler.cpp at commit 0062cff; GenericActivityProfiler.cpp in
#   torch 2.13) logs "Not starting tracing - start timestamp is in the past" when `profileStartTime_ < now`. So a
#   start the profiler thread gets to too late leaves an EMPTY .tmp (measured: a trainer SIGSTOPped for 5.5 s right
#   after the pickup logged it, 1764 ms late, and dynod found the .tmp at its deadline).
# - A failed write (a full disk) leaves what was written; libkineto logs "Failed to write to log file!"
#   (output_json.cpp) and raises nothing; CuptiActivityProfiler::performRunLoopStep(), `case
#   RunloopState::ProcessTrace:`, runs `processTraceInternal(*logger_);` then `resetInternal();` (back to
#   WaitForRequest) all the same, so the process takes later requests as before (measured with torch 2.13 CPU: the
#   write failed under RLIMIT_FSIZE, EFBIG as a full disk's ENOSPC, and the same process's next two traces were
#   complete). A write that fails from its first byte leaves an empty .tmp too.
_EMPTY_KINETO_FILE = (
    "libkineto opens it when its profiler takes the request up and writes it only after recording, so either it "
    'refused to start ("Not starting tracing - start timestamp is in the past" on the process\'s stderr: its '
    "profiler got to the request after the start time, e.g. the process was stopped or short of CPU; trace again, "
    'with a longer --start-delay-s) or its write failed at once ("Failed to write to log file!": make room there and '
    "trace again)"
)
_FAILED_KINETO_WRITE = (
    'libkineto logs "Failed to write to log file!" on the process\'s stderr then and takes later requests as before: '
    "make room there and trace again"
)


def discard_unfinished_kineto_file(path: Path) -> str:
    """The reason to add when libkineto left `<path>.tmp` unfinished (see above: a failed write, e.g. on a full disk,
    or, when it is empty, a start libkineto refused as already past), with what to do; the partial file is removed.
    "" when there is none."""
    partial = Path(str(path) + ".tmp")
    try:
        empty = partial.stat().st_size == 0
        partial.unlink()
    except OSError:
        return ""
    note = free_space_note(path.parent)
    free = f"; {note}" if note else ""
    if empty:
        return f": libkineto's {partial} was left empty (removed it{free}): {_EMPTY_KINETO_FILE}"
    return f": libkineto's {partial} was never completed (a failed write? removed it{free}); {_FAILED_KINETO_WRITE}"


def forgotten_trace_hint(trace_dir: Path, trace_id: str) -> str:
    """For an unknown trace id whose folder exists but has no (believable) record: the daemon restarted before the
    trace finished (records are written only then, see trace_journal); its files, if any, are still in the folder."""
    folder = trace_dir / trace_id
    try:
        if not is_trace_id(trace_id) or not folder.is_dir():
            return ""
    except OSError:
        return ""
    return (
        f" (its folder {folder} exists but holds no record of a finished trace: the trace was still running when "
        "this daemon restarted, or ran under a dyno too old to write records; its files, if any, are in that folder)"
    )
