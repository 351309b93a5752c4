"""A stand-in for grpc.ServicerContext in servicer unit tests: abort() raises as grpc's real context does."""

from __future__ import annotations

import grpc


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class AbortingContext:
    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)
