"""dyno.gc_pause: the collector is off inside, back on after (also after an error), and a nested pause keeps it off."""

from __future__ import annotations

import gc

import pytest

from dyno.gc_pause import gc_paused

pytestmark = pytest.mark.unit


def test_paused_inside_resumed_after_even_on_error() -> None:
    assert gc.isenabled()
    with pytest.raises(ValueError), gc_paused():
        assert not gc.isenabled()
        raise ValueError("x")
    assert gc.isenabled()


def test_nested_pauses_resume_only_at_the_outermost() -> None:
    with gc_paused():
        with gc_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_already_off_stays_off() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
