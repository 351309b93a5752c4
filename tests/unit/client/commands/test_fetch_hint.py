"""The closing hint of `trace`/`fetch` for files left on the daemons names the token when a daemon refused it (by
the fetch's typed failure, `processes[].fetch_failure`, never by the error's wording)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from fetch_cmd_fakes import KnownTraceServicer

from dyno.client.cli import main as cli_main
from dyno.daemon.fake_server import serve
from dyno.daemon.rpc_abort import abort
from dyno.error_reasons import ErrorReason
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


class _NotYours(KnownTraceServicer):
    """Refuses the file as another user's, in words that happen to say "not authenticated"."""

    def FetchTraceFile(self, request, context) -> Iterator[dyno_pb2.FileChunk]:  # noqa: N802
        abort(
            context,
            grpc.StatusCode.PERMISSION_DENIED,
            "caller not authenticated as its owner",
            ErrorReason.NOT_YOUR_PROCESS,
        )
        yield dyno_pb2.FileChunk()  # never reached


def _fetch_json(servicer: KnownTraceServicer, trace_id: str, out: Path) -> tuple[int, dict]:
    fake = serve(lambda _port: servicer)
    try:
        code = cli_main(
            ["fetch", "--host", f"127.0.0.1:{fake.port}", "--trace-id", trace_id, "--output-dir", str(out)]
            + ["--no-analyze", "--json"]
        )
    finally:
        fake.server.stop(0)
    return code, json.loads((out / trace_id / "manifest.json").read_text())


def test_a_refused_token_is_typed_in_the_manifest_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, manifest = _fetch_json(_Protected("node0", {"t-auth"}), "t-auth", tmp_path)
    printed = json.loads(capsys.readouterr().out)
    assert code == 1
    assert {p["fetch_failure"] for p in manifest["processes"]} == {"unauthenticated"}
    assert {p["fetch_failure"] for p in printed["processes"]} == {"unauthenticated"}


def test_no_token_hint_for_another_users_file_whatever_its_wording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, manifest = _fetch_json(_NotYours("node0", {"t-mine"}), "t-mine", tmp_path)
    err = capsys.readouterr().err
    assert code == 1
    assert {p["fetch_failure"] for p in manifest["processes"]} == {"permission_denied"}
    hint = next(line for line in err.splitlines() if "still on the daemons" in line)
    assert "--auth-token-file" not in hint, hint
