"""The public gRPC API as a program in another team sees it: grpcio's generated stub with its default limits (a
4 MiB answer at most) against a real dynod whose history is well past 4 MiB (64 simulated GPUs sampled every
0.1 s), reflection under both of its names, and the client examples of docs/API.md (examples/: Python, and Node's
@grpc/grpc-js where node and npm are present)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from dyno.v1 import dyno_pb2, dyno_pb2_grpc

from conftest import Dynod, run_cli, wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
# where the Node examples' packages are installed (scripts/test.sh installs them there too); build/ is not in git
NODE_MODULES_DIR = Path(os.environ.get("DYNO_NODE_EXAMPLES_DIR", REPO / "build" / "node-examples"))
STOCK_LIMIT = 4 * 1024 * 1024  # grpcio's, grpc-js's and grpc-go's default max receive message length


@pytest.fixture(scope="module")
def big_dynod():
    d = Dynod(["--history-s", "4"], sim_gpus=64, interval_s=0.1).start()
    try:
        with grpc.insecure_channel(d.target) as channel:
            stub = dyno_pb2_grpc.DynoStub(channel)

            def history_bytes() -> int:
                status = stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=5)
                newest = stub.GetMetrics(dyno_pb2.GetMetricsRequest(), timeout=5)
                return status.samples_in_history * newest.ByteSize()

            wait_for(lambda: history_bytes() > 2 * STOCK_LIMIT, timeout_s=60)
        yield d
    finally:
        d.close()


def _stub(channel: grpc.Channel) -> dyno_pb2_grpc.DynoStub:
    return dyno_pb2_grpc.DynoStub(channel)


def test_an_empty_request_in_a_stock_stub_answers_the_newest_sample(big_dynod: Dynod) -> None:
    with grpc.insecure_channel(big_dynod.target) as channel:
        got = _stub(channel).GetMetrics(dyno_pb2.GetMetricsRequest(), timeout=10)
    assert len(got.samples) == 1 and not got.next_page_token
    assert {m.labels["gpu"] for m in got.samples[0].metrics if "gpu" in m.labels} == {str(g) for g in range(64)}


@pytest.mark.parametrize(
    "first",
    [dict(whole_history=True), dict(since_ms=1), dict(limit=100_000)],
    ids=["whole_history", "since_ms", "limit"],
)
def test_a_range_past_4_mib_comes_in_pages_a_stock_stub_takes(big_dynod: Dynod, first: dict) -> None:
    with grpc.insecure_channel(big_dynod.target) as channel:
        stub = _stub(channel)
        pages = [stub.GetMetrics(dyno_pb2.GetMetricsRequest(**first), timeout=10)]
        while pages[-1].next_page_token:
            token = pages[-1].next_page_token
            pages.append(stub.GetMetrics(dyno_pb2.GetMetricsRequest(page_token=token), timeout=10))
    assert len(pages) >= 2 and sum(p.ByteSize() for p in pages) > STOCK_LIMIT
    assert all(p.ByteSize() < STOCK_LIMIT for p in pages)
    stamps = [s.timestamp_ms for p in pages for s in p.samples]
    assert stamps == sorted(set(stamps))  # oldest first, each sample once


def test_stream_metrics_in_a_stock_stub(big_dynod: Dynod) -> None:
    with grpc.insecure_channel(big_dynod.target) as channel:
        stream = _stub(channel).StreamMetrics(dyno_pb2.StreamMetricsRequest(), timeout=10)
        sample = next(stream)
        stream.cancel()
    assert len({m.labels.get("gpu") for m in sample.metrics}) == 65  # 64 GPUs and the host's series


def test_dyno_cli_json_gathers_the_pages(big_dynod: Dynod) -> None:
    proc = run_cli("metrics", "--hosts", big_dynod.target, "--json", "--limit", "0", "--names", "gpu_power_watts")
    assert proc.returncode == 0, proc.stderr
    samples = json.loads(proc.stdout)["samples"]
    assert len(samples) > 10 and all(isinstance(s["timestamp_ms"], int) for s in samples)
    full = run_cli("metrics", "--hosts", big_dynod.target, "--json", "--limit", "0")
    assert full.returncode == 0, full.stderr
    assert len(json.loads(full.stdout)["samples"]) > 10


def _describe_dyno(pool: descriptor_pool.DescriptorPool) -> list[str]:
    return [m.name for m in pool.FindServiceByName("dyno.v1.Dyno").methods]


def test_reflection_v1alpha_with_grpcio_reflections_client(big_dynod: Dynod) -> None:
    with grpc.insecure_channel(big_dynod.target) as channel:
        db = ProtoReflectionDescriptorDatabase(channel)
        services = set(db.get_services())
        methods = _describe_dyno(descriptor_pool.DescriptorPool(db))
    assert {"dyno.v1.Dyno", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"} <= (
        services
    )
    assert "GetMetrics" in methods and "FetchTraceFile" in methods


def test_reflection_v1_lists_and_describes_every_service(big_dynod: Dynod) -> None:
    """grpc.reflection.v1 (what current grpcurl, Postman and Evans call first); its messages are v1alpha's on the
    wire, so grpcio-reflection's classes decode them. The Node example test asks with @grpc/reflection's v1 proto."""
    with grpc.insecure_channel(big_dynod.target) as channel:
        info = channel.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        listed = next(info(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10))
        services = [s.name for s in listed.list_services_response.service]
        asks = [reflection_pb2.ServerReflectionRequest(file_containing_symbol=s) for s in services]
        answers = list(info(iter(asks), timeout=10))
    assert "dyno.v1.Dyno" in services and "grpc.reflection.v1.ServerReflection" in services
    pool = descriptor_pool.DescriptorPool()
    files = {}
    for answer in answers:
        assert answer.WhichOneof("message_response") == "file_descriptor_response", answer
        for raw in answer.file_descriptor_response.file_descriptor_proto:
            proto = descriptor_pb2.FileDescriptorProto.FromString(raw)
            files[proto.name] = proto
    added: set[str] = set()

    def add(name: str) -> None:  # dependencies first
        if name not in added:
            for dep in files[name].dependency:
                add(dep)
            pool.Add(files[name])
            added.add(name)

    for name in files:
        add(name)
    assert "GetMetrics" in _describe_dyno(pool)
    assert pool.FindServiceByName("grpc.reflection.v1.ServerReflection").methods[0].name == "ServerReflectionInfo"


def test_python_example(big_dynod: Dynod) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "python" / "dyno_client.py"), big_dynod.target],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["gpus"] == 64 and len(out["gpu_utilization_percent"]) == 64
    assert out["history_pages"] >= 2 and out["history_samples"] > 10
    assert out["history_values"] >= out["history_samples"] * 64


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """@grpc/grpc-js, @grpc/proto-loader and @grpc/reflection (examples/node/package.json), installed once."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are not installed (scripts/test.sh installs them as root on Debian)")
    modules = NODE_MODULES_DIR / "node_modules"
    if not all((modules / "@grpc" / p / "package.json").is_file() for p in ("grpc-js", "proto-loader", "reflection")):
        NODE_MODULES_DIR.mkdir(parents=True, exist_ok=True)
        shutil.copy(EXAMPLES / "node" / "package.json", NODE_MODULES_DIR / "package.json")
        try:
            proc = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(NODE_MODULES_DIR)],
                capture_output=True,
                text=True,
                timeout=300,
            )
        except subprocess.TimeoutExpired:
            pytest.skip("npm install of the Node examples' packages took over 300 s")
        if proc.returncode != 0:
            pytest.skip(f"npm install of the Node examples' packages failed: {proc.stderr.strip()[-300:]}")
    return modules


def _node(node_modules: Path, script: str, *args: str) -> dict:
    proc = subprocess.run(
        ["node", str(EXAMPLES / "node" / script), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NODE_PATH": str(node_modules)},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_node_example_with_grpc_js_default_limits(big_dynod: Dynod, node_modules: Path) -> None:
    out = _node(node_modules, "dyno_client.js", big_dynod.target)
    assert out["gpus"] == 64 and len(out["gpu_utilization_percent"]) == 64
    assert out["history_pages"] >= 2 and out["history_samples"] > 10
    assert isinstance(out["newest_sample_ms"], int)


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
def test_node_reflection_client_of_either_version(big_dynod: Dynod, node_modules: Path, version: str) -> None:
    out = _node(node_modules, "list_services.js", big_dynod.target, version)
    assert "dyno.v1.Dyno" in out["services"] and f"grpc.reflection.{version}.ServerReflection" in out["services"]
    assert {"GetMetrics", "StreamMetrics", "FetchTraceFile"} <= set(out["dyno_methods"])
