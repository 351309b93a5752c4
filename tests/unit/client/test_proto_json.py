"""dyno-cli's --json form of dyno.v1 messages: numbers are JSON numbers, int64/uint64 included (protobuf's JSON
mapping writes them as strings, which `jq '.samples[0].timestamp_ms / 1000'` cannot divide), in plain fields,
repeated fields, nested messages and maps; every field is present; non-finite doubles stay protobuf's strings."""

from __future__ import annotations

import json
import math

import pytest

from dyno.client.proto_json import JSON_SCHEMA, proto_to_dict
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def test_int64_fields_are_numbers_at_every_depth() -> None:
    resp = dyno_pb2.GetMetricsResponse(
        hostname="n1",
        samples=[dyno_pb2.Sample(timestamp_ms=1_796_000_000_123, metrics=[dyno_pb2.Metric(name="m", value=2.5)])],
    )
    d = json.loads(json.dumps(proto_to_dict(resp)))
    assert d["samples"][0]["timestamp_ms"] == 1_796_000_000_123 and d["samples"][0]["timestamp_ms"] / 1000 > 0
    assert d["samples"][0]["metrics"][0] == {"name": "m", "labels": {}, "value": 2.5}
    assert d["next_page_token"] == ""

    status = dyno_pb2.Status(
        trace_dir_bytes=2**40,
        samples_in_history=7,
        gpus=[dyno_pb2.GpuInfo(index=0, memory_total_bytes=80 * 2**30)],
    )
    s = proto_to_dict(status)
    assert s["trace_dir_bytes"] == 2**40 and s["samples_in_history"] == 7
    assert s["gpus"][0]["memory_total_bytes"] == 80 * 2**30 and s["gpus"][0]["index"] == 0
    assert s["uptime_s"] == 0 and s["hostname"] == ""  # every field present


def test_oneofs_repeated_and_optional_fields() -> None:
    req = dyno_pb2.TraceRequest(job_id="j", duration_ms=1500, start_time_ms=1_796_000_000_000, pids=[3, 4])
    d = proto_to_dict(req)
    assert d["duration_ms"] == 1500 and d["start_time_ms"] == 1_796_000_000_000 and d["pids"] == [3, 4]
    trace = dyno_pb2.TraceStatus(
        trace_id="t", request=req, created_ms=5, processes=[dyno_pb2.ProcessTrace(pid=1, size_bytes=9, rank=0)]
    )
    t = proto_to_dict(trace)
    assert t["request"]["duration_ms"] == 1500 and t["created_ms"] == 5
    assert t["processes"][0]["size_bytes"] == 9 and t["processes"][0]["rank"] == 0
    assert t["processes"][0]["state"] == "TRACE_STATE_UNSPECIFIED"  # enums stay their names


def test_non_finite_doubles_stay_strings_so_the_output_is_valid_json() -> None:
    d = proto_to_dict(dyno_pb2.Metric(name="m", value=math.nan))
    assert d["value"] == "NaN"
    json.loads(json.dumps(d, allow_nan=False))


def test_the_schema_has_a_version() -> None:
    assert JSON_SCHEMA == 1
