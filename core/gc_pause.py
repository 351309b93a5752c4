"""The cyclic garbage collector paused around building many objects that hold no cycles (decoded records, parts,
trace events): each collection would walk every object built so far again, and reference counting frees the rest."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["gc_paused"]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Nested pauses are fine: only the outermost one resumes the collector (and only when it was running)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
