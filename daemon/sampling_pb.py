"""The sampling side's values (samples, sampler states, GPUs) as dyno.v1 messages, apart so servicers stay thin."""

from __future__ import annotations

from dyno.daemon.history import Sample
from dyno.daemon.samplers.base import GpuDevice, SamplerState
from dyno.message_fields import message_kwargs
from dyno.v1 import dyno_pb2

__all__ = ["sample_to_proto", "sampler_state_to_proto", "gpu_to_proto"]


def sample_to_proto(sample: Sample) -> dyno_pb2.Sample:
    return dyno_pb2.Sample(
        timestamp_ms=sample.timestamp_ms,
        metrics=[dyno_pb2.Metric(name=r.name, labels=dict(r.labels), value=r.value) for r in sample.readings],
    )


def sampler_state_to_proto(state: SamplerState) -> dyno_pb2.SamplerState:
    return dyno_pb2.SamplerState(**message_kwargs(state))


def gpu_to_proto(gpu: GpuDevice) -> dyno_pb2.GpuInfo:
    return dyno_pb2.GpuInfo(**message_kwargs(gpu))
