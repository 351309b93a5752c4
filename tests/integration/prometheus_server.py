"""A real Prometheus server (/usr/bin/prometheus, Debian package prometheus) on a free loopback port, scraping the
given targets every second, for the tests of the commands' --prometheus paths."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from conftest import short_tmpdir, wait_for

__all__ = ["PROMETHEUS", "prometheus_servers"]

PROMETHEUS = shutil.which("prometheus") or ("/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def prometheus_servers() -> Iterator[Callable[[list[str]], str]]:
    """start(targets) -> the server's URL once it is ready; every server started is stopped on leaving."""
    started: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(targets: list[str]) -> str:
        d = short_tmpdir("dyno-prom-")
        port = _free_port()
        (d / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: dyno\n    static_configs:\n"
            f"      - targets: [{', '.join(repr(t) for t in targets)}]\n"
        )
        proc = subprocess.Popen(
            [
                str(PROMETHEUS),
                f"--config.file={d / 'prometheus.yml'}",
                f"--storage.tsdb.path={d / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(d / "log", "wb"),  # noqa: SIM115 - closed with the process
        )
        started.append((proc, d))
        url = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            try:
                with urllib.request.urlopen(url + "/-/ready", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False

        wait_for(ready, 60, 0.5)
        return url

    try:
        yield start
    finally:
        for proc, d in started:
            proc.terminate()
            proc.wait(30)
            shutil.rmtree(d, ignore_errors=True)
