#!/usr/bin/env python3
"""A small dyno.v1 client with grpcio's generated stub and its default options (a 4 MiB receive limit).

    python examples/python/dyno_client.py [HOST:PORT]        (default 127.0.0.1:1778)

It prints one JSON object: the daemon's status, the newest sample's GPU utilization, and how many samples and pages
the whole history took. The stub comes with dyno (`pip install dyno`: module dyno.v1.dyno_pb2_grpc); without dyno,
generate it from the .proto:  python -m grpc_tools.protoc -I protos --python_out=. --grpc_python_out=.
protos/dyno/v1/dyno.proto   and import dyno.v1 from there. docs/API.md describes every RPC.
"""

from __future__ import annotations

import json
import sys

import grpc

from dyno.v1 import dyno_pb2, dyno_pb2_grpc

DEADLINE_S = 10  # every call gets a deadline: a daemon that does not answer never hangs the tool


def whole_history(stub: dyno_pb2_grpc.DynoStub, names: list[str]) -> tuple[list[dyno_pb2.Sample], int]:
    """Every sample in the daemon's history, oldest first, page by page (each answer fits 4 MiB); and the pages."""
    answer = stub.GetMetrics(dyno_pb2.GetMetricsRequest(names=names, whole_history=True), timeout=DEADLINE_S)
    samples, pages = list(answer.samples), 1
    while answer.next_page_token:
        request = dyno_pb2.GetMetricsRequest(names=names, page_token=answer.next_page_token)  # the same names
        answer = stub.GetMetrics(request, timeout=DEADLINE_S)
        pages += 1
        if samples and answer.samples and answer.samples[0].timestamp_ms == samples[-1].timestamp_ms:
            samples[-1].metrics.extend(answer.samples.pop(0).metrics)  # a sample too big for one page goes on
        samples.extend(answer.samples)
    return samples, pages


def main(argv: list[str]) -> int:
    target = argv[1] if len(argv) > 1 else "127.0.0.1:1778"
    with grpc.insecure_channel(target) as channel:
        stub = dyno_pb2_grpc.DynoStub(channel)
        try:
            status = stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=DEADLINE_S)
            newest = stub.GetMetrics(dyno_pb2.GetMetricsRequest(names=["gpu_utilization_percent"]), timeout=DEADLINE_S)
            samples, pages = whole_history(stub, [])
        except grpc.RpcError as e:  # UNAVAILABLE: no daemon there; see docs/API.md for the others
            print(f"{target}: {e.code().name}: {e.details()}", file=sys.stderr)
            return 1
    utilization = {
        m.labels["gpu"]: m.value for s in newest.samples for m in s.metrics if m.name == "gpu_utilization_percent"
    }
    print(
        json.dumps(
            {
                "hostname": status.hostname,
                "version": status.version,
                "gpus": len(status.gpus),
                "newest_sample_ms": newest.samples[-1].timestamp_ms if newest.samples else None,
                "gpu_utilization_percent": utilization,
                "history_samples": len(samples),
                "history_pages": pages,
                "history_values": sum(len(s.metrics) for s in samples),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
