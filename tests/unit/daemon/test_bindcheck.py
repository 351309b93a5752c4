"""dynod's bind pre-check answers as gRPC's own bind would, with the OS's reason, before gRPC logs anything."""

from __future__ import annotations

import socket
from concurrent import futures

import grpc
import pytest

from dyno.daemon import bindcheck
from dyno.daemon.bindcheck import bind_problem

pytestmark = pytest.mark.unit


def _listener(host: str = "127.0.0.1") -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, 0))
    s.listen()
    return s


def _grpc_binds(address: str) -> bool:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1), options=[("grpc.so_reuseport", 0)])
    try:
        return server.add_insecure_port(address) != 0
    except RuntimeError:
        return False
    finally:
        server.stop(0)


def test_a_port_someone_listens_on_is_in_use_for_its_address_and_the_wildcard() -> None:
    with _listener() as held:
        port = held.getsockname()[1]
        problem = bind_problem("127.0.0.1", port)
        assert problem is not None and problem.startswith("Address already in use (another program listens")
        assert bind_problem("0.0.0.0", port) == problem  # the wildcard includes 127.0.0.1
    assert bind_problem("127.0.0.1", port) is None


def test_connections_in_time_wait_do_not_block_a_restart() -> None:
    """A restarted dynod finds its old connections in TIME_WAIT on the port; gRPC binds with SO_REUSEADDR and
    succeeds, so the pre-check must too (without it, it refused what gRPC accepts)."""
    with _listener() as server:
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        accepted.close()  # the server side closes first: its end of the connection stays in TIME_WAIT
        client.recv(1)
        client.close()
    assert bind_problem("127.0.0.1", port) is None
    assert _grpc_binds(f"127.0.0.1:{port}")


def test_an_address_of_no_interface_and_a_name_that_does_not_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = bind_problem("192.0.2.1", 0)  # TEST-NET-1: on no interface of a test machine
    assert problem == "Cannot assign requested address (no interface of this host has that address)"

    def no_name(*_args: object, **_kw: object) -> None:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(bindcheck.socket, "getaddrinfo", no_name)
    assert (
        bind_problem("no-such-host.invalid", 1778) == "cannot resolve 'no-such-host.invalid': Name or service not known"
    )
