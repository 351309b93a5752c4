"""Import numpy for dyno's command-line tools without OpenBLAS's worker threads.

dyno never calls BLAS, but numpy's bundled OpenBLAS starts a worker thread per core at import that busy-waits for
work before it sleeps: ~50 ms of a core per process on the 2-core test VM (`import numpy` 0.09-0.10 s user CPU,
0.04-0.05 s with one thread), ~0.1 s per `dyno-cli analyze`. On a training host that core belongs to the trainer.
OpenBLAS reads its thread count from the environment once, when it is loaded, so the variable is set around the
import only and restored: processes the tool starts later (a trainer) inherit the user's environment unchanged.
The library (``dyno.trace_analysis`` imported by a user's program) does not call this: the host program decides.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

__all__ = ["import_numpy_single_threaded", "one_openblas_thread"]

_VAR = "OPENBLAS_NUM_THREADS"


@contextlib.contextmanager
def one_openblas_thread() -> Iterator[None]:
    """numpy imported inside (by any thread) starts one OpenBLAS thread, unless the user set the variable: for
    a block where another thread may import numpy first (``dyno-cli analyze``'s read-ahead)."""
    mine = _VAR not in os.environ
    if mine:
        os.environ[_VAR] = "1"
    try:
        yield
    finally:
        if mine:
            os.environ.pop(_VAR, None)


def import_numpy_single_threaded() -> None:
    """Import numpy; with one OpenBLAS thread unless it is already loaded or the user set the variable."""
    if "numpy" in sys.modules:
        return
    with one_openblas_thread():
        import numpy  # noqa: F401
