"""Stand-ins for grpc in unit tests: a ServicerContext whose abort() raises as grpc's real context does, and a
client-side RpcError with a given code and details (for dyno.client.errors.translate)."""

from __future__ import annotations

import grpc

from dyno.error_reasons import ErrorReason, details_trailer


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class AbortingContext:
    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


class FakeRpcError(grpc.RpcError):
    """`reason`: the ErrorInfo reason dynod's trailer carries (dyno.error_reasons); None: no trailer."""

    def __init__(
        self, details: str, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE, reason: ErrorReason | None = None
    ) -> None:
        self._details, self._code = details, code
        self._md = (details_trailer(code.value[0], details, reason),) if reason is not None else ()

    def trailing_metadata(self) -> tuple[tuple[str, bytes], ...]:
        return self._md

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details
