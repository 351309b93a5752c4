"""RegisteredProcess: which job ids a request may name it by, and whether a pid still is the process it was."""

from __future__ import annotations

import dataclasses

import pytest

from dyno.daemon.registered_process import PROTOCOL_AGENT, PROTOCOL_KINETO, PROTOCOLS, RegisteredProcess

pytestmark = pytest.mark.unit


def test_the_protocols_are_the_agent_and_libkineto() -> None:
    assert PROTOCOLS == (PROTOCOL_AGENT, PROTOCOL_KINETO) == ("agent", "kineto")


def test_a_record_answers_to_its_job_id_and_its_aliases_only() -> None:
    rec = RegisteredProcess(pid=7, job_id="train-1", protocol=PROTOCOL_KINETO, job_aliases=("1234",))
    assert rec.job_ids == ("train-1", "1234")
    assert rec.answers_to("train-1") and rec.answers_to("1234")
    assert not rec.answers_to("train") and not rec.answers_to("")


def test_a_pid_is_another_process_only_when_both_start_times_are_known_and_differ() -> None:
    rec = RegisteredProcess(pid=7, job_id="J", protocol=PROTOCOL_KINETO, start_time=100)
    assert rec.same_process(100)
    assert not rec.same_process(101)
    assert rec.same_process(0)  # the new sender's start time unknown
    assert RegisteredProcess(pid=7, job_id="J", protocol=PROTOCOL_AGENT).same_process(101)  # the record's unknown


def test_a_record_is_frozen() -> None:
    rec = RegisteredProcess(pid=7, job_id="J", protocol=PROTOCOL_AGENT)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.busy = True  # type: ignore[misc]
