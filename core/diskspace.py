"""The "N bytes free there" note added to write failures (the agent's export, the daemon's unfinished kineto file):
a full disk is the usual cause, and the free space says so at a glance."""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["free_space_note"]


def free_space_note(directory: Path) -> str:
    """'N bytes free there' for `directory`'s file system, or "" when that cannot be read (the note is a hint: a
    failing disk_usage must never replace the error it is added to)."""
    try:
        return f"{shutil.disk_usage(directory).free} bytes free there"
    except OSError:
        return ""
