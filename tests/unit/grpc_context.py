"""Stand-ins for grpc in unit tests: a ServicerContext whose abort() raises as grpc's real context does, and a
client-side RpcError with a given code and details (for dyno.client.errors.translate)."""

from __future__ import annotations

import grpc


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class AbortingContext:
    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


class FakeRpcError(grpc.RpcError):
    def __init__(self, details: str, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE) -> None:
        self._details, self._code = details, code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details
