"""Which trace folders and files dynod believes: the trace dir's trust, the folders it makes (mode, owner, marker),
and a trainer's file taken only as the traced process's own (no symlink, FIFO or another user's file).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

from dyno.daemon.trusted_dirs import dir_problem
from dyno.trace_ids import is_trace_id, validate_trace_id
from dyno.trace_layout import MARKER_NAME, agent_output, kineto_output

__all__ = [
    "MARKER_NAME",
    "UntrustedFileError",
    "UntrustedTraceDirError",
    "find_trace_file",
    "made_by_dynod",
    "make_trace_dir",
    "open_trace_file",
    "require_trusted_trace_dir",
    "trace_dir_problem",
    "trainer_file_check",
    "trainer_file_stat",
    "write_file_atomically",
]

TRACE_DIR_MODE = 0o1733
# A trace of one user's processes: that user's folder, which no other user may enter (make_trace_dir)
OWNED_DIR_MODE = 0o700
# In every folder make_trace_dir makes, before anyone else can write there: what tells retention the folder is
# dynod's when the mode cannot (a filesystem that drops the sticky bit, or ignores chmod). Believed only as a plain
# file (no symlink, one link) owned by the daemon's uid and naming its own folder: the sticky bit keeps trainers
# from replacing it, and another user's file, or a hard link to one in another folder, does not pass.
_MARKER_MAX = 256


def _marker_bytes(trace_id: str) -> bytes:
    return f"dynod trace folder {trace_id}\n".encode()


def write_file_atomically(folder: Path, name: str, data: bytes, *, tmp_prefix: str, mode: int | None = None) -> Path:
    """Write `data` as folder/name through a temp file renamed over it (a reader sees the old file or the new one,
    never part of one) and return its path. The temp file (`tmp_prefix` + random + ".writing", never "*.tmp": the
    trace files' in-progress name) is made with O_CREAT|O_EXCL, so nothing planted in a folder others write in is
    followed; `mode`: the file's mode (else mkstemp's 0600). On any failure the temp file is removed and the error
    raised (an OSError of the write names no file)."""
    fd, tmp = tempfile.mkstemp(prefix=tmp_prefix, suffix=".writing", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, folder / name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return folder / name


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
        write_file_atomically(path, MARKER_NAME, _marker_bytes(trace_id), tmp_prefix=f"{MARKER_NAME}.")
        os.chmod(path, OWNED_DIR_MODE if owned else TRACE_DIR_MODE)
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


def made_by_dynod(path: Path, st: os.stat_result) -> bool:
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
    return stat.S_IMODE(st.st_mode) == TRACE_DIR_MODE or _has_marker(path, path.name)


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
