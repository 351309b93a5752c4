"""`dyno-cli metrics` across hosts lists every host in its host table, as `status` and `version` do: a host that
failed (its error type; the error on stderr) and one that has no sample yet (a daemon just started) were left out
without a word. Against real gRPC servers on free loopback ports and a port nothing listens on."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from dyno.client.cli import main as cli_main
from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


class NoSampleYet(FakeDynoServicer):
    def GetMetrics(self, request, context):  # noqa: N802 - grpc method name
        return dyno_pb2.GetMetricsResponse(hostname=self.hostname)


@pytest.fixture
def servers() -> Iterator[tuple[FakeServer[FakeDynoServicer], FakeServer[NoSampleYet]]]:
    full = serve(lambda port: FakeDynoServicer(f"fake-{port}"))
    empty = serve(lambda port: NoSampleYet(f"fake-{port}"))
    yield full, empty
    full.server.stop(0)
    empty.server.stop(0)


def _dead() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _host_table(stdout: str) -> dict[str, list[str]]:
    block = stdout.strip().split("\n\n")[-1].splitlines()
    assert block[0].split()[:3] == ["HOST", "CPU", "USER"], stdout
    return {ln.split()[0]: ln.split()[1:] for ln in block[2:]}


def test_every_host_has_a_row(servers, capsys: pytest.CaptureFixture[str]) -> None:
    full, empty = servers
    dead = _dead()
    code = cli_main(["metrics", "--hosts", f"{full.target},{dead},{empty.target}", "--timeout-s", "1"])
    out, err = capsys.readouterr()
    assert code == 3
    rows = _host_table(out)
    assert list(rows) == [full.target, dead, empty.target]
    assert rows[dead][0] == "Unavailable" and set(rows[dead][1:]) == {"-"}
    assert rows[empty.target][:3] == ["no", "samples", "yet"]
    assert f"dyno-cli: error: {dead}: cannot reach dynod" in err


def test_all_hosts_failed_still_shows_them(capsys: pytest.CaptureFixture[str]) -> None:
    dead = [_dead(), _dead()]
    assert cli_main(["metrics", "--hosts", ",".join(dead), "--timeout-s", "1"]) == 1
    assert list(_host_table(capsys.readouterr().out)) == dead
