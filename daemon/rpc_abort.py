"""``ServicerContext.abort`` typed as what it does: it always raises, so nothing after it runs.

Why: grpcio ships no type hints, so to mypy ``context.abort(...)`` returns and a servicer that aborts on a bad
request still seems to go on with a ``None`` (a "missing return", an unnarrowed Optional). Calling this instead
lets mypy check the code that follows.
"""

from __future__ import annotations

from typing import NoReturn

import grpc

__all__ = ["abort"]


def abort(context: grpc.ServicerContext, code: grpc.StatusCode, details: str) -> NoReturn:
    """End the RPC with ``code`` and ``details`` (raises, as ``context.abort`` does)."""
    context.abort(code, details)
    raise AssertionError("grpc ServicerContext.abort returned")  # it raises; this keeps NoReturn true regardless
