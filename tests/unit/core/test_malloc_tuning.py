"""dyno.malloc_tuning: applied once on glibc, never over the user's own MALLOC_* settings."""

from __future__ import annotations

import platform

import pytest

from dyno import malloc_tuning

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(malloc_tuning, "_done", False)
    for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        monkeypatch.delenv(k, raising=False)


def test_user_settings_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    assert malloc_tuning.tune_for_streaming() is False
    assert malloc_tuning._done is False


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_applied_once_on_glibc() -> None:
    assert malloc_tuning.tune_for_streaming() is True
    assert malloc_tuning._done is True
    assert malloc_tuning.tune_for_streaming() is True


def test_not_applied_off_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(malloc_tuning.platform, "libc_ver", lambda: ("musl", "1.2"))
    assert malloc_tuning.tune_for_streaming() is False
