"""Request bodies that do not decode, sent to a real dynod: every method of every service it serves (Dyno, health,
reflection, and Agent on its Unix socket) answers INVALID_ARGUMENT (UNAUTHENTICATED first where a token is needed
and missing), the log gets at most a throttled line, the connection keeps serving, and thousands of such requests
leave dynod's memory where it was (grpc's own decoding kept ~20 KB per request: dyno.daemon.request_decoding)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

from dyno.daemon.auth import AUTH_METADATA_KEY, PROTECTED_METHODS
from dyno.v1 import agent_pb2, dyno_pb2

from conftest import Dynod

pytestmark = pytest.mark.integration

BAD = b"\x08\xff\xff"  # field 1, varint, cut off: no message type decodes it
TOKEN = "decoding-token-0123456789abcdef"
LEAK_REQUESTS = 10_000
PER_CONNECTION = 50  # new connections in a loop, as a client that meets a refusing connection would open
# grpc's own decoding kept ~20 KB per undecodable request (10k requests: ~+200 MB); a fixed daemon grows by a few MB
# of allocator warm-up. Generous, so that a busy machine cannot make it flake.
RSS_GROWTH_BOUND_MB = 60


def _methods(service: object) -> list[tuple[str, bool, bool]]:
    """(path, client streaming, server streaming) of each method of a service descriptor."""
    return [
        (f"/{service.full_name}/{m.name}", m.client_streaming, m.server_streaming)  # type: ignore[attr-defined]
        for m in service.methods  # type: ignore[attr-defined]
    ]


DYNO_METHODS = _methods(dyno_pb2.DESCRIPTOR.services_by_name["Dyno"])
HEALTH_METHODS = _methods(health_pb2.DESCRIPTOR.services_by_name["Health"])
REFLECTION_METHODS = _methods(reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"])
AGENT_METHODS = _methods(agent_pb2.DESCRIPTOR.services_by_name["Agent"])


def _send_bad(
    channel: grpc.Channel, method: str, client_streaming: bool, server_streaming: bool, metadata: tuple = ()
) -> grpc.StatusCode:
    """The status of one call to `method` whose (only) request body is BAD."""
    timeout = 10
    try:
        if client_streaming:
            requests: Iterator[bytes] = iter([BAD])
            if server_streaming:
                list(channel.stream_stream(method)(requests, timeout=timeout, metadata=metadata))
            else:
                channel.stream_unary(method)(requests, timeout=timeout, metadata=metadata)
        elif server_streaming:
            list(channel.unary_stream(method)(BAD, timeout=timeout, metadata=metadata))
        else:
            channel.unary_unary(method)(BAD, timeout=timeout, metadata=metadata)
    except grpc.RpcError as e:
        return e.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return kb / 1024


def _get_status(channel: grpc.Channel) -> dyno_pb2.Status:
    call = channel.unary_unary(
        "/dyno.v1.Dyno/GetStatus",
        request_serializer=dyno_pb2.GetStatusRequest.SerializeToString,
        response_deserializer=dyno_pb2.Status.FromString,
    )
    return call(dyno_pb2.GetStatusRequest(), timeout=10)


@pytest.fixture(scope="module")
def bare() -> Iterator[Dynod]:
    d = Dynod(gpu_backend="none", metrics=False).start()
    yield d
    d.close()


@pytest.mark.parametrize(
    ("method", "client_streaming", "server_streaming"), DYNO_METHODS + HEALTH_METHODS + REFLECTION_METHODS
)
def test_every_method_on_the_tcp_port_answers_invalid_argument(
    bare: Dynod, method: str, client_streaming: bool, server_streaming: bool
) -> None:
    with grpc.insecure_channel(bare.target) as channel:
        assert _send_bad(channel, method, client_streaming, server_streaming) == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize(("method", "client_streaming", "server_streaming"), AGENT_METHODS)
def test_every_method_on_the_agent_socket_answers_invalid_argument(
    bare: Dynod, method: str, client_streaming: bool, server_streaming: bool
) -> None:
    with grpc.insecure_channel(f"unix:{bare.agent_socket}") as channel:
        assert _send_bad(channel, method, client_streaming, server_streaming) == grpc.StatusCode.INVALID_ARGUMENT


def test_a_connection_keeps_serving_after_many_undecodable_requests(bare: Dynod) -> None:
    with grpc.insecure_channel(bare.target) as channel:
        codes = Counter(_send_bad(channel, "/dyno.v1.Dyno/StartTrace", False, False) for _ in range(200))
        assert codes == {grpc.StatusCode.INVALID_ARGUMENT: 200}
        assert _get_status(channel).pid == bare.pid
    with grpc.insecure_channel(f"unix:{bare.agent_socket}") as channel:
        codes = Counter(_send_bad(channel, "/dyno.v1.Agent/Register", False, False) for _ in range(200))
        assert codes == {grpc.StatusCode.INVALID_ARGUMENT: 200}
        register = channel.unary_unary(
            "/dyno.v1.Agent/Register",
            request_serializer=agent_pb2.RegisterRequest.SerializeToString,
            response_deserializer=agent_pb2.RegisterResponse.FromString,
        )
        with pytest.raises(grpc.RpcError) as refused:  # decoded and checked: pid 0 is the request's own mistake
            register(agent_pb2.RegisterRequest(pid=0), timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "pid" in str(refused.value.details())


def test_undecodable_requests_leave_memory_and_log_bounded(bare: Dynod) -> None:
    with grpc.insecure_channel(bare.target) as channel:
        _get_status(channel)
    before = _rss_mb(bare.pid)
    lines_before = len(bare.lines)
    codes: Counter[grpc.StatusCode] = Counter()
    for _ in range(LEAK_REQUESTS // PER_CONNECTION):
        with grpc.insecure_channel(bare.target) as channel:
            call = channel.unary_unary("/dyno.v1.Dyno/GetStatus")
            futures = [call.future(BAD, timeout=30) for _ in range(PER_CONNECTION)]
            for f in futures:
                codes[f.code()] += 1
    growth = _rss_mb(bare.pid) - before
    assert growth < RSS_GROWTH_BOUND_MB, f"dynod grew by {growth:.0f} MB after {LEAK_REQUESTS} undecodable requests"
    # every answer INVALID_ARGUMENT, but for a rare connection that a busy machine lost (UNAVAILABLE)
    assert set(codes) <= {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAVAILABLE}, codes
    assert codes[grpc.StatusCode.INVALID_ARGUMENT] >= 0.98 * LEAK_REQUESTS, codes
    new_lines = bare.lines[lines_before:]
    assert not any("Traceback" in line for line in new_lines)
    assert len(new_lines) <= 2, new_lines  # one throttled line per method and minute


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dynod]:
    token: Path = tmp_path_factory.mktemp("decoding") / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    d = Dynod(["--auth-token-file", str(token)], gpu_backend="none", metrics=False).start()
    yield d
    d.close()


@pytest.mark.parametrize(
    ("method", "client_streaming", "server_streaming"), [m for m in DYNO_METHODS if m[0] in PROTECTED_METHODS]
)
def test_a_protected_method_checks_the_token_before_the_body(
    guarded: Dynod, method: str, client_streaming: bool, server_streaming: bool
) -> None:
    send = _send_bad
    with grpc.insecure_channel(guarded.target) as channel:
        assert send(channel, method, client_streaming, server_streaming) == grpc.StatusCode.UNAUTHENTICATED
        wrong = ((AUTH_METADATA_KEY, "Bearer not-the-token"),)
        assert send(channel, method, client_streaming, server_streaming, wrong) == grpc.StatusCode.UNAUTHENTICATED
        right = ((AUTH_METADATA_KEY, f"Bearer {TOKEN}"),)
        assert send(channel, method, client_streaming, server_streaming, right) == grpc.StatusCode.INVALID_ARGUMENT


def test_a_redacted_method_without_the_token_answers_invalid_argument(guarded: Dynod) -> None:
    with grpc.insecure_channel(guarded.target) as channel:
        assert _send_bad(channel, "/dyno.v1.Dyno/ListProcesses", False, False) == grpc.StatusCode.INVALID_ARGUMENT
