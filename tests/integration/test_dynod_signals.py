"""Operating dynod as a fleet service: signals an operator or a terminal sends, and what the daemon does with them."""

from __future__ import annotations

import signal
import threading

import grpc
import pytest

from dyno.client.client import DynoClient
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

from conftest import Dynod, wait_for

pytestmark = pytest.mark.integration


def test_sighup_is_logged_and_ignored_not_a_silent_death(dynod_factory) -> None:
    """SIGHUP (a closed ssh terminal, `kill -HUP` expecting a reload) does not kill dynod: the configuration is
    read only at start, so dynod says so and keeps serving; SIGTERM still stops it cleanly."""
    d = dynod_factory(gpu_backend="none", metrics=False)
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "SIGHUP" in d.log)
    assert "restart" in d.log.split("SIGHUP", 1)[1].splitlines()[0]
    with DynoClient(d.target) as c:
        assert c.health() == "SERVING"
    assert d.stop() == 0


def _ipv6_loopback() -> bool:
    import socket

    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback")
def test_ready_line_on_ipv6_names_a_metrics_url_that_works(dynod_factory) -> None:
    """On --listen ::1 the ready line said metrics=http://::1:PORT/metrics, which no HTTP client can open."""
    import urllib.request

    from dyno.daemon.process import READY_LINE

    d = dynod_factory("--listen", "[::1]", gpu_backend="none")  # brackets as in a URL: the same address
    match = next(m for m in map(READY_LINE.search, d.lines) if m)
    assert match["host"] == "[::1]" and int(match["port"]) == d.port
    with urllib.request.urlopen(match["metrics"], timeout=10) as r:
        assert b"dyno_build_info" in r.read()


def test_tls_key_of_another_certificate_is_one_line_exit_2(dynod_factory, tmp_path) -> None:
    """It was exit 1 with gRPC's C-core errors and "cannot listen on 127.0.0.1:PORT ... (address in use or not
    available?)"; a certificate problem is a configuration error (exit 2, which the unit does not restart)."""
    import subprocess
    import sys

    from tls_certs import have_openssl, make_test_certs

    if not have_openssl():
        pytest.skip("openssl CLI not available to make test certificates")
    certs = make_test_certs(tmp_path)
    d = dynod_factory(gpu_backend="none", metrics=False, start=False)
    args = [*d.args, "--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "client.key")]
    r = subprocess.run([sys.executable, "-m", "dyno.daemon", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("dynod: error:")]
    assert len(errors) == 1 and "does not match the certificate" in errors[0], r.stderr
    assert "address in use" not in r.stderr and "Traceback" not in r.stderr
    assert not d.agent_socket.exists()  # what had started was torn down


def test_sd_notify_ready_once_serving_and_stopping_on_sigterm(dynod_factory, tmp_path) -> None:
    """The unit is Type=notify: `systemctl start` waits for READY=1, which must come once the ports answer."""
    import socket

    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(30)
        d = dynod_factory(gpu_backend="none", metrics=False, env={"NOTIFY_SOCKET": str(path)}, start=False)
        d.start()
        assert sock.recv(4096) == b"READY=1"
        with DynoClient(d.target) as c:
            assert c.health() == "SERVING"
        assert d.stop() == 0
        assert sock.recv(4096) == b"STOPPING=1"


def test_a_sampler_disabled_on_purpose_is_no_warning(dynod_factory) -> None:
    """--gpu-backend none on CPU nodes logged "WARNING ... sampler gpu: unavailable" at every start, which
    `journalctl -p warning` and log alerts then report across the whole CPU fleet."""
    d = dynod_factory(gpu_backend="none", metrics=False)
    gpu_lines = [line for line in d.lines if "sampler gpu" in line]
    assert len(gpu_lines) == 1 and "disabled" in gpu_lines[0] and "WARNING" not in gpu_lines[0]


# dynod's SIGTERM with a live StreamMetrics reader (`dyno-cli metrics --watch`): the stream ends at once with
# UNAVAILABLE "shutting down", not after the whole drain grace with CANCELLED.


def test_sigterm_ends_metric_streams_with_a_reason() -> None:
    d = Dynod().start()
    try:
        channel = grpc.insecure_channel(d.target)
        stream = dyno_pb2_grpc.DynoStub(channel).StreamMetrics(dyno_pb2.StreamMetricsRequest(), timeout=60)
        next(stream)  # the stream is live
        outcome: list[grpc.RpcError] = []

        def drain() -> None:
            try:
                for _ in stream:
                    pass
            except grpc.RpcError as e:
                outcome.append(e)

        reader = threading.Thread(target=drain)
        reader.start()
        assert d.stop() == 0
        reader.join(30)
        channel.close()
    finally:
        d.cleanup()
    assert outcome, "the stream ended without a status"
    assert outcome[0].code() == grpc.StatusCode.UNAVAILABLE and "shutting down" in outcome[0].details()
