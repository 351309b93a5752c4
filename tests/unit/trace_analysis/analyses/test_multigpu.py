"""The analyses on a trace of one process driving two GPUs (Kineto: GPU rows with pid = device, tid = stream).

Each fix has a positive test (two devices: per-device figures, streams of the same id kept apart) and a negative
one (the same work on one device: the figures HTA's pooled definitions give, unchanged).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from multigpu_trace_builder import MultiGpuTraceBuilder

from dyno.trace_analysis.analyses import (
    comm_comp_overlap,
    gpu_scope,
    idle_time_breakdown,
    queue_length,
    step_timings,
    temporal_breakdown,
)
from dyno.trace_analysis.analyses.gpu import device_of
from dyno.trace_analysis.loader import load_trace
from dyno.trace_analysis.model import Trace

pytestmark = pytest.mark.unit


def _load(tmp_path: Path, b: MultiGpuTraceBuilder, name: str = "t.json") -> Trace:
    return load_trace(b.write(tmp_path / name))


def _pipeline(second: int) -> MultiGpuTraceBuilder:
    """Stage 1 on GPU 0 over [1000, 2000], then stage 2 on GPU ``second`` over [2000, 3000] (a model split across
    cuda:0 and cuda:1 in one process; ``second=0``: the same work on one GPU)."""
    b = MultiGpuTraceBuilder()
    b.busy_on(0, 1000.0, 10)
    b.busy_on(second, 2000.0, 10)
    return b


def test_device_column_comes_from_kineto_pid_and_args(tmp_path):
    scope = gpu_scope(_load(tmp_path, _pipeline(1)))
    assert scope.devices == (0, 1)
    assert sorted(set(scope.device.tolist())) == [0, 1]
    assert set(scope.rows.stream.tolist()) == {7}  # the same stream id on both devices


def test_temporal_breakdown_is_per_device_one_busy_gpu_of_two_is_half_busy(tmp_path):
    tb = temporal_breakdown(_load(tmp_path, _pipeline(1)))
    assert tb.span_us == pytest.approx(2000.0)
    assert tb.n_devices == 2
    # each GPU works 1000 of the 2000 µs: the pair is 50% idle (HTA's pooled union says 0%)
    assert tb.idle_share == pytest.approx(0.5)
    assert tb.compute_share == pytest.approx(0.5)
    assert [(d.device, d.busy_us, d.idle_us) for d in tb.devices] == [(0, 1000.0, 1000.0), (1, 1000.0, 1000.0)]


def test_temporal_breakdown_one_device_is_htas_pooled_figure(tmp_path):
    tb = temporal_breakdown(_load(tmp_path, _pipeline(0)))
    assert tb.n_devices == 1
    assert tb.idle_share == pytest.approx(0.0)
    assert tb.busy_us == pytest.approx(2000.0)
    assert tb.devices[0].device == 0 and tb.devices[0].busy_us == tb.busy_us


def test_temporal_breakdown_two_saturated_gpus_are_not_idle(tmp_path):
    b = MultiGpuTraceBuilder()
    b.busy_on(0, 1000.0, 10)
    b.busy_on(1, 1000.0, 10)
    tb = temporal_breakdown(_load(tmp_path, b))
    assert tb.n_devices == 2 and tb.idle_share == pytest.approx(0.0) and tb.compute_share == pytest.approx(1.0)


def _interleaved(second: int, stream2: int = 7) -> MultiGpuTraceBuilder:
    """Stream 7 of GPU 0 and stream ``stream2`` of GPU ``second``: kernels 100 µs long, 200 µs apart on each,
    the second device's shifted by 50 µs (DataParallel replicas running side by side)."""
    b = MultiGpuTraceBuilder()
    for i in range(3):
        b.launch("k", 900.0 + 200 * i, 1000.0 + 200 * i, 100.0, device=0)
        b.launch("k", 910.0 + 200 * i, 1050.0 + 200 * i, 100.0, stream=stream2, device=second)
    return b


def test_idle_time_keeps_same_stream_id_of_two_devices_apart(tmp_path):
    it = idle_time_breakdown(_load(tmp_path, _interleaved(1)))
    assert [(s.device, s.stream) for s in it.streams] == [(0, 7), (1, 7)]
    for s in it.streams:
        assert s.n_gaps == 2 and s.idle_us == pytest.approx(200.0)
    assert (it.gap_us > 0).all()  # merged, the two devices' kernels overlap: negative "gaps"
    assert sorted(it.gap_device.tolist()) == [0, 0, 1, 1]


def test_idle_time_one_device_two_streams_as_hta(tmp_path):
    it = idle_time_breakdown(_load(tmp_path, _interleaved(0, stream2=20)))
    assert [(s.device, s.stream) for s in it.streams] == [(0, 7), (0, 20)]
    assert all(s.n_gaps == 2 and s.idle_us == pytest.approx(200.0) for s in it.streams)


def _two_launches(second: int) -> MultiGpuTraceBuilder:
    """Two launches 10 µs apart, each kernel starting 100 µs after its call: on GPU 0 and GPU ``second``."""
    b = MultiGpuTraceBuilder()
    b.launch("k", 0.0, 100.0, 50.0, device=0)
    b.launch("k", 10.0, 160.0 if second == 0 else 110.0, 50.0, device=second)
    return b


def test_queue_length_is_per_device_stream(tmp_path):
    q = queue_length(_load(tmp_path, _two_launches(1)))
    assert q.max_by_device_stream == {(0, 7): 1, (1, 7): 1}
    assert q.max_length == 1 and q.max_by_stream == {7: 1}  # not 2: two queues of one launch each
    assert sorted(set(q.device.tolist())) == [0, 1]


def test_queue_length_one_device_counts_both_launches(tmp_path):
    q = queue_length(_load(tmp_path, _two_launches(0)))
    assert q.max_by_device_stream == {(0, 7): 2} and q.max_length == 2 and q.max_device_stream == (0, 7)


def _comm_beside(comm_device: int) -> MultiGpuTraceBuilder:
    b = MultiGpuTraceBuilder()
    b.busy_on(0, 1000.0, 10)
    b.nccl_on(comm_device, 1000.0, 1000.0)
    return b


def test_comm_overlap_only_by_compute_on_the_same_device(tmp_path):
    ov = comm_comp_overlap(_load(tmp_path, _comm_beside(1)))
    # GPU 1's all-reduce runs while GPU 0 computes: nothing hides it (pooled, HTA would say 100% overlapped)
    assert ov.overlap_share == pytest.approx(0.0)
    assert [(o.device, o.communication_us, o.overlap_us) for o in ov.devices] == [(0, 0.0, 0.0), (1, 1000.0, 0.0)]
    assert ov.exposed_communication_us == pytest.approx(500.0)  # mean of the two devices


def test_comm_overlap_on_one_device_is_hidden(tmp_path):
    ov = comm_comp_overlap(_load(tmp_path, _comm_beside(0)))
    assert ov.overlap_share == pytest.approx(1.0) and ov.exposed_communication_us == pytest.approx(0.0)


def test_step_gpu_busy_is_the_devices_mean(tmp_path):
    b = _pipeline(1)
    b.step(1, 1000.0, 2000.0)
    st = step_timings(_load(tmp_path, b))
    assert st.steps[0].gpu_busy_us == pytest.approx(1000.0)
    assert st.steps[0].gpu_util == pytest.approx(0.5)


def test_step_gpu_busy_one_device(tmp_path):
    b = _pipeline(0)
    b.step(1, 1000.0, 2000.0)
    assert step_timings(_load(tmp_path, b)).steps[0].gpu_util == pytest.approx(1.0)


def test_scope_devices_stay_aligned_through_the_step_window(tmp_path):
    b = _pipeline(1)
    for i, ts in enumerate((900.0, 1900.0, 2900.0)):
        b.step(i + 1, ts, 1000.0)
    b.launch("late", 2950.0, 3100.0, 10.0, device=1)  # launched in the last step: out of HTA's window
    b.device_sync(0, 2500.0, 20.0)  # a device-wide cuda_sync row (stream 4294967295) on GPU 0
    b.events.append({"ph": "X", "cat": "kernel", "name": "no_stream", "pid": 1, "tid": 9, "ts": 1500.0, "dur": 5.0,
                     "args": {"device": 1}})  # fmt: skip
    t = _load(tmp_path, b)
    for last in (False, True):
        scope = gpu_scope(t, include_last_step=last)
        assert scope.windowed
        assert scope.device.tolist() == device_of(scope.rows).tolist()
        assert scope.devices == (0, 1)
        assert ("late" in t.names(scope.rows)) is last and "no_stream" not in t.names(scope.rows)


def test_scope_one_device_is_a_view(tmp_path):
    scope = gpu_scope(_load(tmp_path, _pipeline(0)))
    assert scope.devices == (0,) and scope.device.tolist() == [0] * len(scope.rows)
    assert scope.device.strides == (0,) and not scope.device.flags.writeable
