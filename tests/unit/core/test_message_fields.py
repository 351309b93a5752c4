"""dyno.message_fields: a dataclass to and from the message with the same fields, repeated fields as tuples."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from dyno.message_fields import from_message, message_kwargs
from dyno.trace_summary import RuleLoss
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


@dataclass(frozen=True, slots=True)
class _Gpu:
    index: int
    name: str
    uuid: str
    memory_total_bytes: int
    pci_bus_id: str = ""
    simulated: bool = False


@dataclass(frozen=True)
class _Pids:
    pids: tuple[int, ...]


@dataclass(frozen=True)
class _Name:
    name: str


def test_round_trip_keeps_every_field() -> None:
    gpu = _Gpu(3, "H100", "GPU-x", 80 * 2**30, "0000:1a:00.0", True)
    m = dyno_pb2.GpuInfo(**message_kwargs(gpu))
    assert (m.index, m.name, m.uuid, m.memory_total_bytes, m.pci_bus_id, m.simulated) == (
        3,
        "H100",
        "GPU-x",
        80 * 2**30,
        "0000:1a:00.0",
        True,
    )
    assert from_message(_Gpu, m) == gpu


def test_repeated_field_becomes_a_tuple() -> None:
    back = from_message(_Pids, dyno_pb2.JobRecord(pids=[7, 8, 9]))
    assert back.pids == (7, 8, 9) and isinstance(back.pids, tuple)
    assert from_message(_Pids, dyno_pb2.JobRecord()).pids == ()


def test_one_field_class_and_a_message_with_more_fields() -> None:
    # a class of one field reads one value (attrgetter of one name returns it bare); the message's others are left
    assert from_message(_Name, dyno_pb2.GpuInfo(name="A100", index=2)) == _Name("A100")
    assert message_kwargs(_Name("x")) == {"name": "x"}


def test_plain_dataclass_without_slots() -> None:
    rule = RuleLoss("sync", "high", 0.25, 1500.0, 4, "Syncs", "fewer syncs")
    assert from_message(RuleLoss, dyno_pb2.RuleLoss(**message_kwargs(rule))) == rule
