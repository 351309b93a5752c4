"""ClusterTrace.attach() (the engine of `dyno-cli fetch`) against in-process fake daemons: joining a trace started
earlier, hosts that do not know it, waiting without cancelling, and keeping or re-fetching files already there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fetch_cmd_fakes import FakeDaemons

from dyno.client.cluster import Cluster
from dyno.client.hosts import Host
from dyno.client.trace.cluster import ClusterTrace
from dyno.client.trace.manifest import MANIFEST_NAME, previous_files
from dyno.client.trace.records import PreviousFile, trace_exit_code
from dyno.filechunks import checksum_file, checksum_of, new_digest
from dyno.v1 import dyno_pb2

from conftest import free_port

pytestmark = pytest.mark.unit

TID = "t-attach"


def _attach(cluster: Cluster, out: Path, *, wait_s: float = 10, **kw) -> ClusterTrace:
    ct = ClusterTrace(cluster, dyno_pb2.TraceRequest(trace_id=TID), out, wait_s=wait_s, poll_s=0.02, **kw)
    ct.attach()
    return ct


def test_attach_fetches_every_file_and_reports_hosts_that_do_not_know_the_trace(
    daemons: FakeDaemons, tmp_path: Path
) -> None:
    (a, sa), (forgot, _), (b, sb) = daemons.start({TID}), daemons.start({"other"}), daemons.start({TID})
    dead = Host("127.0.0.1", free_port())
    with Cluster([a, forgot, dead, b], deadline_s=2) as cluster:
        ct = _attach(cluster, tmp_path / TID, unreachable_s=1)
        assert ct.attached_any and not ct.owns_trace
        # the request is the daemons' record of it (job id, window), not the bare id we asked with
        assert ct.request.job_id == "job1" and ct.request.duration_ms == 500 and ct.request.trace_id == TID
        assert ct.created_ms == sa.created_ms
        ct.follow()
        assert ct.wait(20)
    hosts = ct.snapshot()
    assert [h.state for h in hosts] == ["done", "failed", "failed", "done"]
    assert hosts[1].error_type == "NotFound" and f"no trace {TID!r}" in hosts[1].error
    # unknown there: a wrong id or host, or a restart while the trace was still running (a finished trace survives one)
    assert hosts[1].error == (
        f"no trace {TID!r} on host node1 (the id is unknown there: a wrong id or host, or the daemon restarted "
        "while the trace was still running; finished traces are kept across restarts until retention removes them)"
    )
    assert not hosts[1].processes
    assert hosts[2].error_type == "Unavailable"
    assert [p.rank for p in hosts[0].processes] == [0, 1] and hosts[0].matched_pids == [1000, 1001]
    for h, servicer in ((hosts[0], sa), (hosts[3], sb)):
        assert h.hostname == servicer.hostname
        for p in h.processes:
            assert p.ok and not p.reused
            assert (tmp_path / TID / p.file).read_bytes() == servicer.content(p.pid)
            assert p.checksum == checksum_of(new_digest(servicer.content(p.pid)))
    assert trace_exit_code(hosts) == 3
    assert not sa.cancelled.is_set() and not sb.cancelled.is_set()


def test_attach_waits_for_running_processes_then_fetches(daemons: FakeDaemons, tmp_path: Path) -> None:
    host, servicer = daemons.start({TID}, finish_after=4)
    with Cluster([host], deadline_s=2) as cluster:
        ct = _attach(cluster, tmp_path)
        assert {p.state for p in ct.snapshot()[0].processes} == {"running"}
        ct.follow()
        assert ct.wait(20)
    (h,) = ct.snapshot()
    assert h.state == "done" and all(p.ok for p in h.processes)
    assert servicer.get_calls >= 5 and not servicer.cancelled.is_set()


def test_an_attached_trace_is_never_cancelled_at_the_timeout(daemons: FakeDaemons, tmp_path: Path) -> None:
    host, servicer = daemons.start({TID}, finish_after=None)
    with Cluster([host], deadline_s=2) as cluster:
        ct = _attach(cluster, tmp_path, wait_s=0.1)
        ct.follow()
        assert ct.wait(10)
    (h,) = ct.snapshot()
    assert not servicer.cancelled.is_set()
    assert h.state == "failed" and h.error_type == "Timeout" and "not cancelled" in h.error
    assert {p.state for p in h.processes} == {"running"}
    assert all("still tracing" in p.error for p in h.processes)
    assert trace_exit_code([h]) == 1


def test_interrupting_an_attached_trace_does_not_cancel_it(daemons: FakeDaemons, tmp_path: Path) -> None:
    host, servicer = daemons.start({TID}, finish_after=None)
    with Cluster([host], deadline_s=2) as cluster:
        ct = _attach(cluster, tmp_path, wait_s=60)
        ct.follow()
        ct.interrupt(grace_s=2)
    (h,) = ct.snapshot()
    assert h.state == "failed" and h.error == "interrupted" and all(p.error for p in h.processes)
    assert not servicer.cancelled.is_set()


def test_files_already_there_are_kept_when_verified_and_fetched_again_otherwise(
    daemons: FakeDaemons, tmp_path: Path
) -> None:
    host, servicer = daemons.start({TID})
    folder = tmp_path / TID
    with Cluster([host], deadline_s=2) as cluster:
        first = _attach(cluster, folder)
        first.follow()
        assert first.wait(10)
    assert servicer.fetches == {1000: 1, 1001: 1}
    recorded = {(str(host), p.pid): PreviousFile(p.file, p.checksum) for p in first.snapshot()[0].processes}
    good, bad = (folder / recorded[(str(host), pid)].file for pid in (1000, 1001))
    data = bytearray(bad.read_bytes())
    data[-2] ^= 1  # same size, different bytes: only the checksum can tell
    bad.write_bytes(bytes(data))

    with Cluster([host], deadline_s=2) as cluster:
        again = _attach(cluster, folder, previous=recorded)
        again.follow()
        assert again.wait(10)
    by_pid = {p.pid: p for p in again.snapshot()[0].processes}
    assert by_pid[1000].ok and by_pid[1000].reused and servicer.fetches[1000] == 1  # verified, kept
    assert by_pid[1001].ok and not by_pid[1001].reused and servicer.fetches[1001] == 2  # broken, fetched again
    assert bad.read_bytes() == servicer.content(1001) and good.read_bytes() == servicer.content(1000)
    assert checksum_file(bad) == by_pid[1001].checksum


def test_a_recorded_file_outside_its_host_folder_is_not_trusted(daemons: FakeDaemons, tmp_path: Path) -> None:
    host, servicer = daemons.start({TID})
    stray = tmp_path / f"{servicer.hostname}_1000.json"
    stray.write_bytes(servicer.content(1000))
    previous = {(str(host), 1000): PreviousFile(f"../{stray.name}", checksum_file(stray))}
    with Cluster([host], deadline_s=2) as cluster:
        ct = _attach(cluster, tmp_path / TID, previous=previous)
        ct.follow()
        assert ct.wait(10)
    assert servicer.fetches == {1000: 1, 1001: 1}
    assert not any(p.reused for p in ct.snapshot()[0].processes)


def test_previous_files_reads_only_verified_entries(tmp_path: Path) -> None:
    assert previous_files(tmp_path) == {}  # no manifest
    (tmp_path / MANIFEST_NAME).write_text("{not json")
    assert previous_files(tmp_path) == {}
    good = {"host": "h:1", "pid": 7, "fetch": "fetched", "file": "h_1/a.json", "checksum": "xxh3_128:ab"}
    entries = [
        good,
        {**good, "pid": 8, "fetch": "failed"},
        {**good, "pid": 9, "checksum": ""},
        {**good, "pid": "x"},
        {"host": "h:1"},
    ]
    manifest = {"schema": "dyno.trace-manifest", "processes": entries}
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(manifest))
    assert previous_files(tmp_path) == {("h:1", 7): PreviousFile("h_1/a.json", "xxh3_128:ab")}
    (tmp_path / MANIFEST_NAME).write_text(json.dumps({**manifest, "schema": "something-else"}))
    assert previous_files(tmp_path) == {}
