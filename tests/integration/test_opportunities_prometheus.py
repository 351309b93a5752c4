"""`dyno-cli opportunities --prometheus` against a real Prometheus server (/usr/bin/prometheus on a loopback port,
1 s scrapes) of two loopback endpoints serving, as dynod does, the job and analysis series of hand-built records
(opportunity_cases.py); `--hosts` over real gRPC servers answering ListJobs with the same records. The two rank the
rules alike, with the same GPU-hours (docs/OPPORTUNITIES.md: exact on the same data); a FAILED analysis counts as never
analysed on both, and only its reason is missing from Prometheus."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opportunity_cases import RecordsServicer, case_records
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_server import PROMETHEUS, prometheus_servers

from dyno.daemon.analysis.prometheus import analysis_families
from dyno.daemon.fake_server import serve
from dyno.daemon.jobs.records import JobRecord
from dyno.trace_analysis.rule_texts import RULE_TEXTS
from dyno.trace_summary import TraceSummary
from dyno.trace_summary_pb import summary_from_proto
from dyno.v1 import dyno_pb2

from conftest import run_cli, wait_for

pytestmark = pytest.mark.integration


def _label(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def exposition(records: list[dyno_pb2.JobRecord]) -> str:
    """The series dynod exports for these records: the GPU-seconds counter (daemon/jobs/prometheus.py's name and
    labels), and the analysis series made by dynod's own code (daemon/analysis/prometheus.analysis_families)."""
    gpu = ["# TYPE dyno_job_gpu_seconds_total counter"]
    by_host: dict[str, tuple[list[JobRecord], dict[tuple[str, str], TraceSummary]]] = {}
    for r in records:
        labels = f"host={_label(r.hostname)},job_id={_label(r.job_id)},user={_label(r.user)}"
        gpu.append(f"dyno_job_gpu_seconds_total{{{labels}}} {r.gpu_seconds!r}")
        kept, latest = by_host.setdefault(r.hostname, ([], {}))
        kept.append(JobRecord(r.job_id, r.user, r.hostname, 0, 0, True))
        if r.HasField("latest_analysis"):
            latest[(r.job_id, r.user)] = summary_from_proto(r.latest_analysis)
    registry = CollectorRegistry()
    registry.register(
        _Families([f for host, (kept, latest) in by_host.items() for f in analysis_families(host, kept, latest)])
    )
    return "\n".join(gpu) + "\n" + generate_latest(registry).decode()


class _Families:
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def _serve_text(text: str) -> ThreadingHTTPServer:
    body = text.encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def prometheus_for() -> Iterator[Callable[[list[str]], str]]:
    with prometheus_servers() as start:
        yield start


def _doc(*args: str) -> dict:
    done = run_cli("opportunities", "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus not installed (Debian package prometheus)")
def test_prometheus_and_the_daemons_rank_alike(prometheus_for) -> None:
    records = case_records("a", "b")
    per_daemon = {d: [r for h, r in records if h == d] for d in "ab"}
    http = [_serve_text(exposition(per_daemon[d])) for d in "ab"]
    grpc_servers = [serve(lambda port, d=d: RecordsServicer(f"host-{d}", per_daemon[d])) for d in "ab"]
    try:
        url = prometheus_for([f"127.0.0.1:{s.server_address[1]}" for s in http])
        prom = wait_for(lambda: (d := _doc("--prometheus", url))["totals"]["jobs"] == 4 and d, 60, 0.5)
        daemons = _doc("--hosts", ",".join(s.target for s in grpc_servers))
    finally:
        for s in http:
            s.shutdown()
            s.server_close()
        for g in grpc_servers:
            g.server.stop(0)
    assert prom["source"] == url and daemons["source"] == "daemons"
    assert [r["rule"] for r in prom["rules"]] == [r["rule"] for r in daemons["rules"]] == ["dataloader", "sync-calls"]
    for p, d in zip(prom["rules"], daemons["rules"], strict=True):
        assert p["recoverable_gpu_hours"] == pytest.approx(d["recoverable_gpu_hours"], rel=1e-9)
        assert (p["jobs"], p["users"], p["hosts"]) == (d["jobs"], d["users"], d["hosts"])
        assert [(j["job_id"], j["hosts"]) for j in p["top_jobs"]] == [(j["job_id"], j["hosts"]) for j in d["top_jobs"]]
        for pj, dj in zip(p["top_jobs"], d["top_jobs"], strict=True):
            assert pj["recoverable_gpu_hours"] == pytest.approx(dj["recoverable_gpu_hours"], rel=1e-9)
    # the fix: the analysis' own words from the daemons; the rule catalogue's from Prometheus (rule ids only)
    assert daemons["rules"][0]["fix"] == "dataloader fix" and prom["rules"][0]["fix"] == RULE_TEXTS["dataloader"].fix
    assert prom["totals"]["gpu_hours"] == pytest.approx(daemons["totals"]["gpu_hours"], rel=1e-9)
    # the failed analysis (job "broken", 4 GPU-hours): never analysed on both (dyno_job_analysis_failed)
    assert daemons["never_analysed"]["gpu_hours"] == pytest.approx(12.0)
    assert prom["never_analysed"]["gpu_hours"] == pytest.approx(12.0)
    assert sorted(j["job_id"] for j in prom["never_analysed"]["top_jobs"]) == ["broken", "dark"]
    assert (daemons["never_analysed"]["failed_analyses"], prom["never_analysed"]["failed_analyses"]) == (1, 1)
