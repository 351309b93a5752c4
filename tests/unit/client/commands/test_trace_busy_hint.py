"""`dyno-cli trace` on a job whose processes are all being traced already: the host's reason says which pids and
where to see their trace, not only the daemon's bare "every matched process is already tracing"."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from dyno.client.cli import main as cli_main
from dyno.daemon.fake_server import FakeDynoServicer, serve
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


class _AllBusy(FakeDynoServicer):
    def StartTrace(self, request: dyno_pb2.TraceRequest, context: grpc.ServicerContext) -> dyno_pb2.StartTraceResponse:  # noqa: N802
        return dyno_pb2.StartTraceResponse(
            trace_id=request.trace_id,
            matched_pids=[4242, 4243],
            busy_pids=[4242, 4243],
            message="every matched process is already tracing",
            hostname=self.hostname,
        )


def test_all_busy_names_the_pids_and_ps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = serve(lambda _port: _AllBusy("gpu7"))
    try:
        code = cli_main(
            ["trace", "--host", fake.target, "--job-id", "job1", "--duration-ms", "100", "--start-delay-s", "0"]
            + ["--output-dir", str(tmp_path / "out")]
        )
    finally:
        fake.server.stop(0)
    err = capsys.readouterr().err
    assert code == 1
    line = next(x for x in err.splitlines() if "already tracing" in x)
    assert "pids 4242,4243" in line and "dyno-cli ps" in line, line
