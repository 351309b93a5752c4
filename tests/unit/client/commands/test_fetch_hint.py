"""The closing hint of `trace`/`fetch` for files left on the daemons names the token when a daemon refused it.
Before: "`dyno-cli fetch ...` with the same host options gets them", which refuses the same way again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from fetch_cmd_fakes import KnownTraceServicer

from dyno.client.cli import main as cli_main
from dyno.daemon.fake_server import serve
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


class _Protected(KnownTraceServicer):
    """Knows the trace (GetTrace is read-only, always open) but refuses the file without a token."""

    def FetchTraceFile(self, request, context) -> Iterator[dyno_pb2.FileChunk]:  # noqa: N802
        context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")
        yield dyno_pb2.FileChunk()  # never reached: makes this a generator, as a streaming handler is


def test_a_refused_fetch_hints_at_the_token(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = serve(lambda _port: _Protected("node0", {"t-auth"}))
    try:
        code = cli_main(
            ["fetch", "--host", f"127.0.0.1:{fake.port}", "--trace-id", "t-auth", "--output-dir", str(tmp_path)]
            + ["--no-analyze"]
        )
    finally:
        fake.server.stop(0)
    err = capsys.readouterr().err
    assert code == 1
    hint = next(line for line in err.splitlines() if "still on the daemons" in line)
    assert "--auth-token-file" in hint, hint
