"""libkineto datagram framing, config strings and the endpoint on a real socket (with kernel credentials)."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import struct
import tempfile
import uuid
from pathlib import Path

import pytest

from dyno.daemon.tracing.kineto_config import ConfigValueError, build_config, trace_config
from dyno.daemon.tracing.kineto_ipc import (
    HEADER_SIZE,
    FramingError,
    KinetoEndpoint,
    KinetoPoll,
    decode_message,
    encode_message,
    encode_req,
    parse_ctxt,
    parse_req,
)

from conftest import short_tmpdir, wait_for

pytestmark = pytest.mark.unit


def test_header_is_40_bytes_size_then_nul_padded_type() -> None:
    msg = encode_message("req", b"abc")
    assert HEADER_SIZE == 40 and len(msg) == 43
    assert struct.unpack_from("<Q", msg)[0] == 3
    assert msg[8:40] == b"req" + b"\0" * 29
    assert decode_message(msg) == ("req", b"abc")


def test_req_roundtrip_matches_kineto_layout() -> None:
    data = encode_req(3, [1234, 99, 7], 36199)
    kind, payload = decode_message(data)
    assert kind == "req" and len(payload) == 16 + 4 * 3
    assert struct.unpack("<iiq3i", payload) == (3, 3, 36199, 1234, 99, 7)
    assert parse_req(payload) == (3, [1234, 99, 7], 36199)


@pytest.mark.parametrize(
    "data",
    [b"short", encode_message("req", b"\0" * 8), struct.pack("<Q32s", 99, b"req") + b"x"],
)
def test_malformed_datagrams_raise(data: bytes) -> None:
    with pytest.raises(FramingError):
        kind, payload = decode_message(data)
        parse_req(payload)


def test_req_with_wrong_pid_count_rejected() -> None:
    payload = struct.pack("<iiq", 3, 5, 0) + struct.pack("<2i", 1, 2)
    with pytest.raises(FramingError):
        parse_req(payload)


def test_ctxt_parse() -> None:
    assert parse_ctxt(struct.pack("<iiq", 2, 77, 5)) == (2, 77, 5)
    with pytest.raises(FramingError):
        parse_ctxt(b"\0" * 12)


def test_build_config_formats_values() -> None:
    text = build_config({"A_B": 5, "FLAG": True, "OFF": False, "PATH": Path("/tmp/x/h.pt.trace.json")})
    assert text.split("\n") == ["A_B=5", "FLAG=true", "OFF=false", "PATH=/tmp/x/h.pt.trace.json"]


@pytest.mark.parametrize("value", ["a=b", "a#b", "a\nb", "a\rb", "", " x", -1])
def test_build_config_refuses_malformed_values(value: object) -> None:
    with pytest.raises(ConfigValueError):
        build_config({"KEY": value})


@pytest.mark.parametrize("key", ["lower", "A=B", "A B", "", "A\nB"])
def test_build_config_refuses_bad_keys(key: str) -> None:
    with pytest.raises(ConfigValueError):
        build_config({key: 1})


def _parse(text: str) -> dict[str, str]:
    out = {}
    for line in text.split("\n"):
        assert line.count("=") == 1 and "#" not in line
        k, v = line.split("=")
        out[k] = v
    return out


def test_trace_config_duration_with_start_time() -> None:
    cfg = _parse(
        trace_config(
            trace_id="t1",
            log_file=Path("/tmp/d/t1/h.pt.trace.json"),
            duration_ms=500,
            start_time_ms=1_700_000_000_000,
            record_shapes=True,
            with_stack=True,
        )
    )
    assert cfg["ACTIVITIES_LOG_FILE"] == "/tmp/d/t1/h.pt.trace.json"
    assert cfg["ACTIVITIES_DURATION_MSECS"] == "500"
    assert cfg["PROFILE_START_TIME"] == "1700000000000"
    assert cfg["REQUEST_TRACE_ID"] == "t1"
    assert cfg["ACTIVITIES_WARMUP_PERIOD_SECS"] == "0"
    assert cfg["PROFILE_REPORT_INPUT_SHAPES"] == "true" and cfg["PROFILE_WITH_STACK"] == "true"
    assert cfg["PROFILE_PROFILE_MEMORY"] == "false"
    assert "ACTIVITIES_ITERATIONS" not in cfg


def test_trace_config_iterations() -> None:
    cfg = _parse(
        trace_config(trace_id="t2", log_file=Path("/tmp/h.pt.trace.json"), iterations=3, start_iteration_roundup=10)
    )
    assert cfg["ACTIVITIES_ITERATIONS"] == "3"
    assert cfg["PROFILE_START_ITERATION"] == "0"
    assert cfg["PROFILE_START_ITERATION_ROUNDUP"] == "10"
    assert "ACTIVITIES_DURATION_MSECS" not in cfg


def test_trace_config_refuses_bad_inputs() -> None:
    with pytest.raises(ConfigValueError):
        trace_config(trace_id="t", log_file=Path("/tmp/a=b/h.pt.trace.json"), duration_ms=5)
    with pytest.raises(ConfigValueError):
        trace_config(trace_id="t", log_file=Path("/tmp/h.json"), duration_ms=5, iterations=2)


class _Handler:
    def __init__(self, config: str | None) -> None:
        self.config = config
        self.polls: list[KinetoPoll] = []

    def kineto_poll(self, poll: KinetoPoll) -> str | None:
        self.polls.append(poll)
        return self.config if poll.wants_activities else None

    def kineto_context_count(self, gpu: int, pid: int, job_id: str) -> int:
        return 4


def _client(addr_family_dir: Path | None) -> socket.socket:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if addr_family_dir is None:
        c.bind(b"\0dynoconfigclient" + uuid.uuid4().hex.encode() + b"\0")
    else:
        c.bind(str(addr_family_dir / f"dynoconfigclient{uuid.uuid4().hex[:8]}"))
    c.settimeout(2)
    return c


@pytest.fixture(params=["abstract", "filesystem"])
def endpoint(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    handler = _Handler("ACTIVITIES_DURATION_MSECS=10")
    sock_dir = Path(tempfile.mkdtemp(prefix="dyno-k-", dir="/tmp")) if request.param == "filesystem" else None
    ep = KinetoEndpoint(handler, name=f"dyno-unit-{uuid.uuid4().hex[:10]}", socket_dir=sock_dir)
    ep.start()
    yield ep, handler, sock_dir
    ep.stop()
    if sock_dir is not None:
        shutil.rmtree(sock_dir, ignore_errors=True)


def test_endpoint_replies_with_config_and_registers_kernel_pid(endpoint) -> None:  # type: ignore[no-untyped-def]
    ep, handler, sock_dir = endpoint
    with _client(sock_dir) as c:
        c.sendto(encode_req(3, [os.getpid(), os.getppid()], 4242), ep.address)
        kind, payload = decode_message(c.recv(4096))
        assert (kind, payload) == ("req", b"ACTIVITIES_DURATION_MSECS=10")
        c.sendto(encode_req(1, [os.getpid()], 4242), ep.address)  # no activity bit: empty reply
        assert decode_message(c.recv(4096)) == ("req", b"")
    assert [p.pid for p in handler.polls] == [os.getpid(), os.getpid()]
    assert handler.polls[0].job_id == "4242" and handler.polls[0].ancestry == (os.getppid(),)
    assert handler.polls[0].uid == os.getuid()


def test_endpoint_rejects_pid_mismatch_and_garbage(endpoint) -> None:  # type: ignore[no-untyped-def]
    ep, handler, sock_dir = endpoint
    with _client(sock_dir) as c:
        c.sendto(encode_req(3, [os.getpid() + 100000], 1), ep.address)
        c.sendto(b"garbage", ep.address)
        c.sendto(encode_message("ctxt", struct.pack("<iiq", 0, os.getpid(), 1)), ep.address)
        kind, payload = decode_message(c.recv(4096))  # the only reply is the ctxt one
        assert kind == "ctxt" and struct.unpack("<i", payload) == (4,)
    assert handler.polls == []
    assert ep.rejected == 2


# Any local user can send datagrams to the endpoint (an abstract socket has no permissions): a burst of malformed
# or spoofed ones makes one WARNING line, not one each.
class NoTraces:
    def kineto_poll(self, poll):  # noqa: ANN001, ANN201 - KinetoHandler
        return None

    def kineto_context(self, *args):  # noqa: ANN002, ANN201
        return None


def test_a_burst_of_malformed_datagrams_logs_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    d = short_tmpdir("dyno-e2k-")
    endpoint = KinetoEndpoint(NoTraces(), socket_dir=d)  # type: ignore[arg-type]
    endpoint.start()
    sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        caplog.set_level(logging.WARNING, logger="dyno.daemon.tracing.kineto_ipc")
        for i in range(50):
            sender.sendto(b"\x01" * (i % 30) + struct.pack("<Q", 2**63), str(d / "dynolog"))
        wait_for(lambda: endpoint.rejected == 50)
    finally:
        sender.close()
        endpoint.stop()
        shutil.rmtree(d, ignore_errors=True)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "dropped malformed datagram" in warnings[0].getMessage()
