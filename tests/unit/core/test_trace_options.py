"""TraceRequest and TraceConfig share one conversion of the trace options (windows, starts, flags)."""

from __future__ import annotations

import pytest

from dyno.trace_options import options_from_pb, options_to_pb
from dyno.v1 import agent_pb2, dyno_pb2

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("cls", [dyno_pb2.TraceRequest, agent_pb2.TraceConfig])
def test_round_trip_through_both_messages(cls):
    opts = options_from_pb(cls(iterations=3, start_iteration_roundup=10, with_stack=True))
    assert opts["iterations"] == 3 and opts["duration_ms"] is None
    assert opts["start_iteration_roundup"] == 10 and opts["start_time_ms"] is None
    assert opts["with_stack"] and not opts["record_shapes"]

    class Spec:
        pass

    spec = Spec()
    spec.__dict__.update(opts)
    back = cls(**options_to_pb(spec))
    assert back.WhichOneof("window") == "iterations" and back.WhichOneof("start") == "start_iteration_roundup"
    assert options_from_pb(back) == opts
    # an unset oneof member is never sent as an explicit zero (which would select it)
    assert cls(**options_to_pb(type("S", (), {**opts, "start_iteration_roundup": None})())).WhichOneof("start") is None
