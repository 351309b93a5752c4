"""dyno.message_fields: a dataclass to and from the message with the same fields, repeated fields as tuples."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from dyno.message_fields import from_message, message_kwargs
from dyno.trace_summary import RankStepStats, RuleLoss
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class _Pids:
    pids: tuple[int, ...]


@dataclass(frozen=True)
class _Name:
    name: str


def test_round_trip_keeps_every_field() -> None:
    stats = RankStepStats(3, 12, 1.5, 1.25, 0.5, 4.0, 100.0, True, 0.1, 0.7, 0.2, 0.05)
    m = dyno_pb2.RankStepStats(**message_kwargs(stats))
    assert (m.rank, m.steps, m.mean_step_us, m.has_gpu, m.exposed_communication_share) == (3, 12, 1.5, True, 0.05)
    assert from_message(RankStepStats, m) == stats


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
