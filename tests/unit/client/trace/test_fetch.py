"""TraceFetcher: a finished process's file fetched once; fetched again, after its daemon answered again, where the
daemon cut the fetch (UNREACHABLE: it stopped or restarted); never again after any other failure; an interrupted run
says so."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from dyno.client.client import FetchedFile
from dyno.client.errors import DynoError, PermissionDenied, Unavailable
from dyno.client.hosts import Host
from dyno.client.trace.fetch import TraceFetcher
from dyno.client.trace.records import FetchFailure, HostRecord, ProcRecord

pytestmark = pytest.mark.unit


class FakeClient:
    """fetch_trace_file raises the errors given, one a call, then writes the file."""

    def __init__(self, *errors: DynoError) -> None:
        self.errors = list(errors)
        self.calls = 0

    def fetch_trace_file(self, trace_id: str, pid: int, dest: Path, **_: object) -> FetchedFile:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        dest.mkdir(parents=True, exist_ok=True)
        path = dest / f"h_{pid}.json"
        path.write_bytes(b"{}")
        return FetchedFile(path, 2, "xxh3_128:00")


def _fetcher(tmp_path: Path, stop: threading.Event | None = None) -> TraceFetcher:
    return TraceFetcher("t", tmp_path, lock=threading.Lock(), stop=stop or threading.Event())


def _host() -> tuple[HostRecord, ProcRecord]:
    p = ProcRecord(pid=7, state="done", size_bytes=2)
    return HostRecord(Host("h", 1), "h_1", processes=[p]), p


def test_a_fetch_the_daemon_cut_is_fetched_again_at_the_next_turn(tmp_path: Path) -> None:
    h, p = _host()
    client, fetcher = FakeClient(Unavailable("dynod cancelled the call")), _fetcher(tmp_path)
    fetcher.fetch_done(client, h)  # type: ignore[arg-type]
    assert (p.fetch, p.fetch_failure) == ("failed", FetchFailure.UNREACHABLE)
    fetcher.fetch_done(client, h)  # type: ignore[arg-type]  # the daemon answered GetTrace again
    assert (p.fetch, p.fetch_failure, p.file) == ("fetched", FetchFailure.NONE, "h_1/h_7.json")
    fetcher.fetch_done(client, h)  # type: ignore[arg-type]
    assert client.calls == 2  # fetched once it arrived


def test_other_failures_are_not_fetched_again(tmp_path: Path) -> None:
    h, p = _host()
    client, fetcher = FakeClient(PermissionDenied("not yours")), _fetcher(tmp_path)
    fetcher.fetch_done(client, h)  # type: ignore[arg-type]
    fetcher.fetch_done(client, h)  # type: ignore[arg-type]
    assert (p.fetch, p.fetch_failure, client.calls) == ("failed", FetchFailure.PERMISSION_DENIED, 1)


def test_a_fetch_cut_after_the_user_interrupted_is_interrupted(tmp_path: Path) -> None:
    stop = threading.Event()
    h, p = _host()

    class Closing(FakeClient):  # Ctrl-C: dyno-cli closes its channels, which cancels the stream under way
        def fetch_trace_file(self, trace_id: str, pid: int, dest: Path, **kw: object) -> FetchedFile:
            stop.set()
            return super().fetch_trace_file(trace_id, pid, dest, **kw)

    fetcher = _fetcher(tmp_path, stop)
    fetcher.fetch_done(Closing(Unavailable("dynod cancelled the call")), h)  # type: ignore[arg-type]
    assert (p.fetch, p.fetch_failure) == ("failed", FetchFailure.INTERRUPTED)
    assert p.error == "interrupted during the fetch"
