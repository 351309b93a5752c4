"""Whether a folder dynod works in can be changed by another local user.

dynod runs as root and makes, chmods, writes, binds and deletes inside folders that are partly shared with trainers
(the trace dir, the kineto socket dir). If a user other than root and dynod's own could rename entries in such a
folder, or in any folder above it, they could put a symlink in place of something dynod is about to use between
its check and its use: a root chmod of any folder, a root-owned file anywhere, their own socket in place of dynod's.
A folder under /tmp can simply be made by another user before dynod makes it (or again after systemd-tmpfiles aged
it out), which is how the default /tmp/dyno-traces would be taken.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["dir_problem"]


def _others_may_write(st: os.stat_result) -> bool:
    """Writable by anyone but the owner, root and the daemon's own group (group root counts as root)."""
    mode = stat.S_IMODE(st.st_mode)
    return bool(mode & stat.S_IWOTH) or bool(mode & stat.S_IWGRP and st.st_gid not in (0, os.getegid()))


def dir_problem(folder: Path, *, what: str, key: str, shared: bool = False) -> str | None:
    """Why nobody should trust `folder` (`what` names it in the answer, `key` is the setting to change), or None.

    Checked: every folder from / down to it, along the path as given and as resolved (a symlink is as safe as the
    folder holding it), owned by root or the daemon's user, and writable by nobody else unless it has the sticky bit
    (like /tmp: others cannot rename what they do not own). `folder` itself must be writable by nobody else at all,
    unless `shared` (the kineto socket dir, where every trainer creates its socket: then sticky). What does not exist
    yet is not checked: the daemon makes it."""
    given = Path(os.path.abspath(folder))
    resolved = Path(os.path.realpath(folder))
    uids = (0, os.geteuid())
    for path in dict.fromkeys([given, *given.parents, resolved, *resolved.parents]):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError as e:
            return f"cannot check {path}: {e.strerror or e}"
        itself = path in (given, resolved)
        role = what if itself else f"a folder above {what}"
        if st.st_uid not in uids:
            return (
                f"{path} ({role}) is owned by uid {st.st_uid}, neither root nor this daemon's user (did another user "
                f"make it first?): that user could make dynod write, chmod or delete files elsewhere; remove it, or "
                f"set {key} to a folder of dynod's own"
            )
        if stat.S_ISLNK(st.st_mode) or not _others_may_write(st):
            continue
        if (itself and not shared) or not st.st_mode & stat.S_ISVTX:
            sticky = "" if itself and not shared else " without the sticky bit"
            return (
                f"{path} ({role}) is writable by other users{sticky} (mode {stat.S_IMODE(st.st_mode):o}): they could "
                f"put symlinks or files of their own in place of dynod's; let only its owner write there, or set {key} "
                "to a folder of dynod's own"
            )
    return None
