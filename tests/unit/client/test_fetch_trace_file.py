"""DynoClient.fetch_trace_file against a real gRPC server that sends good and broken FileChunk streams: every
broken stream is an error naming what is wrong, and no file (partial or not) is left behind."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from dyno.client.client import DynoClient
from dyno.client.errors import DynoError, Unavailable
from dyno.filechunks import checksum_of, encode_chunk, new_digest
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit

DATA = os.urandom(2 * 1024 * 1024 + 3)
GOOD = checksum_of(new_digest(DATA))
HALF = 1024 * 1024


def _good() -> list[bytes]:
    return [
        encode_chunk(DATA[:HALF], 0, False, total_size=len(DATA), filename="h_7.pt.trace.json.gz"),
        encode_chunk(DATA[HALF : 2 * HALF], HALF, False),
        encode_chunk(DATA[2 * HALF :], 2 * HALF, True, checksum=GOOD),
    ]


STREAMS: dict[int, list[bytes]] = {
    1: _good(),
    2: _good()[:2] + [encode_chunk(DATA[2 * HALF :], 2 * HALF, True, checksum=checksum_of(new_digest(b"other")))],
    3: _good()[:2] + [encode_chunk(DATA[2 * HALF :], 2 * HALF, True, checksum="sha512:" + "0" * 128)],
    4: _good()[:2],
    5: [_good()[0], _good()[2]],
    6: [_good()[0], b"\x0a\xff\xff\x03abc"],
    7: [encode_chunk(DATA, 0, True, checksum=GOOD, total_size=len(DATA) + 1, filename="x.json")],
}


CUT = 99


@pytest.fixture(scope="module")
def client() -> Iterator[DynoClient]:
    def fetch(request: dyno_pb2.FetchTraceFileRequest, context: grpc.ServicerContext) -> Iterator[bytes]:
        if request.pid == CUT:  # a chunk, then the call cancelled, as a stopping dynod cancels its calls
            yield _good()[0]
            context.abort(grpc.StatusCode.CANCELLED, "Cancelling all calls")
        yield from STREAMS[request.pid]

    handler = grpc.method_handlers_generic_handler(
        "dyno.v1.Dyno",
        {
            "FetchTraceFile": grpc.unary_stream_rpc_method_handler(
                fetch, request_deserializer=dyno_pb2.FetchTraceFileRequest.FromString
            )
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    c = DynoClient(f"127.0.0.1:{port}", timeout_s=5)
    try:
        yield c
    finally:
        c.close()
        server.stop(0)


def test_good_stream_lands_complete_under_its_name(client: DynoClient, tmp_path: Path) -> None:
    seen: list[int] = []
    got = client.fetch_trace_file("t", 1, tmp_path, on_chunk=seen.append)
    assert got.path == tmp_path / "h_7.pt.trace.json.gz" and got.path.read_bytes() == DATA
    assert got.size_bytes == len(DATA) and got.checksum == GOOD
    assert seen == [HALF, 2 * HALF, len(DATA)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h_7.pt.trace.json.gz"]


@pytest.mark.parametrize(
    "pid,message",
    [
        (2, "is corrupt: checksum/size mismatch"),
        (3, "checksum 'sha512' is not one this client knows"),
        (4, "ended without its final chunk"),
        (5, "out of order: offset 2097152, expected 1048576"),
        (6, "malformed FileChunk"),
        (7, "is corrupt: checksum/size mismatch (2097155 of 2097156 bytes)"),
    ],
)
def test_broken_streams_fail_clearly_and_leave_nothing(
    client: DynoClient, tmp_path: Path, pid: int, message: str
) -> None:
    with pytest.raises(DynoError) as err:
        client.fetch_trace_file("t", pid, tmp_path)
    assert message in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_a_stream_the_daemon_cancels_is_unavailable_and_leaves_nothing(client: DynoClient, tmp_path: Path) -> None:
    """A dynod stopping (a restart) cancels its streams: the fetch may succeed once it is back (dyno-cli trace
    fetches again), so it is Unavailable, not a stream that ended without its final chunk."""
    with pytest.raises(Unavailable) as err:
        client.fetch_trace_file("t", CUT, tmp_path)
    assert "stopping or restarting" in str(err.value)
    assert list(tmp_path.iterdir()) == []
