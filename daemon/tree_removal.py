"""Deleting a folder tree that other users could write in, as root, safely and without recursion (trace retention).

Like shutil.rmtree on Linux, every step goes through open folder fds with O_NOFOLLOW, so nothing a trainer plants
(symlinks, folders renamed meanwhile) leads outside. Unlike it, no recursion: any trainer can nest folders ~1000 deep
in a trace folder (1733), where a recursive walk raises RecursionError, and retention (which dynod's start also
runs) would stop for good.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

__all__ = ["remove_tree"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_OPEN_DEPTH = 32  # folders held open at once while deleting; deeper ones are moved up first


def _clear_files(fd: int) -> list[str]:
    """Unlink everything but folders in the open folder `fd`; the names of its folders."""
    folders = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    return folders


def remove_tree(path: Path) -> None:
    """Delete the folder `path` and everything in it (see the module's doc); raises OSError (what is left stays, for
    the next pass). Folders deeper than _MAX_OPEN_DEPTH are renamed into `path` (dynod's own folder, the same
    filesystem) and emptied from there, so the open fds stay bounded."""
    top = os.open(path, _DIR_FLAGS)
    stack: list[tuple[int, str, list[str]]] = []  # (fd, name in its parent, its folders still to delete)
    try:
        stack.append((top, "", _clear_files(top)))
        while stack:
            fd, name, folders = stack[-1]
            if not folders:
                stack.pop()
                if stack:
                    os.close(fd)
                    os.rmdir(name, dir_fd=stack[-1][0])
                continue
            sub = folders.pop()
            if len(stack) >= _MAX_OPEN_DEPTH:
                moved = f".dynod-removing-{uuid.uuid4().hex}"
                os.rename(sub, moved, src_dir_fd=fd, dst_dir_fd=top)
                stack[0][2].append(moved)
                continue
            child = os.open(sub, _DIR_FLAGS, dir_fd=fd)
            try:
                stack.append((child, sub, _clear_files(child)))
            except BaseException:
                os.close(child)
                raise
    finally:
        for fd in {top, *(f for f, _, _ in stack)}:  # top, and the folders an error left open
            os.close(fd)
    os.rmdir(path)
