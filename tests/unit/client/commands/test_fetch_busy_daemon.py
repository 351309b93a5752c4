"""`dyno-cli fetch` against daemons whose fetch streams are all taken: the refusal (RESOURCE_EXHAUSTED with
dynod's retry hint, dyno.daemon.stream_slots) is waited out and every file still arrives, exit 0."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from fetch_cmd_fakes import KnownTraceServicer

from dyno.client.cli import main as cli_main
from dyno.daemon.fake_server import serve
from dyno.daemon.stream_slots import RETRY_AFTER_KEY
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit

TID = "t-fetch-busy"
_REFUSALS = 3  # per file, before the daemon has a stream free


class _BusyServicer(KnownTraceServicer):
    """Refuses each file's first _REFUSALS fetches as a busy dynod does."""

    def FetchTraceFile(self, request, context) -> Iterator[dyno_pb2.FileChunk]:  # noqa: N802 - grpc method name
        if self.fetches.get(request.pid, 0) < _REFUSALS:
            self.fetches[request.pid] = self.fetches.get(request.pid, 0) + 1
            context.set_trailing_metadata(((RETRY_AFTER_KEY, "10"),))
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "12 trace file streams are already open; retry shortly")
        yield from super().FetchTraceFile(request, context)


def test_busy_daemons_are_waited_out_and_every_file_arrives(tmp_path: Path) -> None:
    fakes = [serve(lambda _port, n=n: _BusyServicer(f"node{n}", {TID})) for n in range(2)]
    try:
        hosts = ",".join(f"127.0.0.1:{f.port}" for f in fakes)
        rc = cli_main(["fetch", "--hosts", hosts, "--trace-id", TID, "--output-dir", str(tmp_path), "--no-analyze"])
        manifest = json.loads((tmp_path / TID / "manifest.json").read_text())
        assert rc == 0 and manifest["status"] == "complete" and manifest["errors"] == []
        assert manifest["summary"]["fetched"] == 4
        for f in fakes:
            assert f.servicer.fetches and all(n == _REFUSALS + 1 for n in f.servicer.fetches.values())
    finally:
        for f in fakes:
            f.server.stop(0)
