"""dyno.daemon.rpc_abort.abort: ends the RPC through the context and never returns (typed NoReturn)."""

from __future__ import annotations

import grpc
import pytest

from dyno.daemon.rpc_abort import abort

pytestmark = pytest.mark.unit


class _Aborted(Exception):
    pass


class _Context:
    def __init__(self, raises: bool) -> None:
        self.raises = raises
        self.calls: list[tuple[grpc.StatusCode, str]] = []

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.calls.append((code, details))
        if self.raises:
            raise _Aborted(details)  # what grpc's real context does


def test_abort_passes_code_and_details_to_the_context():
    ctx = _Context(raises=True)
    with pytest.raises(_Aborted, match="pid: required"):
        abort(ctx, grpc.StatusCode.INVALID_ARGUMENT, "pid: required")  # type: ignore[arg-type]
    assert ctx.calls == [(grpc.StatusCode.INVALID_ARGUMENT, "pid: required")]


def test_abort_never_returns_even_if_the_context_does():
    ctx = _Context(raises=False)
    with pytest.raises(AssertionError, match="returned"):
        abort(ctx, grpc.StatusCode.NOT_FOUND, "gone")  # type: ignore[arg-type]
