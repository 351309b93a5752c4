"""dyno-cli recognises a restarted dynod by its instance id (Status / StartTraceResponse / TraceStatus.instance_id),
never by the words of its NOT_FOUND; a daemon that sends no id is judged by the NOT_FOUND's reason (TRACE_FORGOTTEN).
The daemon's side: every start has a new id, carried by the answers."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from fake_proc import no_proc_identifier

from dyno.client.cluster import Cluster
from dyno.client.errors import NotFound
from dyno.client.hosts import Host
from dyno.client.trace.cluster import ClusterTrace
from dyno.client.trace.records import ProcRecord
from dyno.daemon.instance_id import new_instance_id
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.service import TraceRpcs
from dyno.error_reasons import ErrorReason
from dyno.v1 import dyno_pb2

from conftest import free_port

pytestmark = pytest.mark.unit

_PLAIN = "no trace 't-i' on host h"  # a NOT_FOUND that names no restart
_WORDED = "no trace 't-i' on host h (...: the trace was still running when this daemon restarted ...)"


class _Daemon:
    """Answers NOT_FOUND for the trace; its GetStatus says its instance id ("" : a daemon before ids)."""

    def __init__(self, message: str, instance_id: str, reason: str = "") -> None:
        self.message, self.instance_id, self.reason = message, instance_id, reason
        self.status_calls = 0

    def get_trace(self, trace_id: str) -> dyno_pb2.TraceStatus:
        raise NotFound(self.message, reason=self.reason)

    def status(self) -> dyno_pb2.Status:
        self.status_calls += 1
        return dyno_pb2.Status(hostname="h", instance_id=self.instance_id)


def _follow(tmp_path: Path, daemon: _Daemon, started_by: str) -> tuple[ClusterTrace, threading.Thread]:
    """Follow a host whose agent process was recording, as after a StartTrace answered by instance `started_by`."""
    cluster = Cluster([Host("127.0.0.1", free_port())], deadline_s=1)
    request = dyno_pb2.TraceRequest(job_id="j", trace_id="t-i", duration_ms=100)
    ct = ClusterTrace(cluster, request, tmp_path, wait_s=120, unreachable_s=0.2, poll_s=0.02)
    ct.cluster.client = lambda _host: daemon  # type: ignore[method-assign,assignment,return-value]
    ct.started_monotonic = time.monotonic()
    h = ct.hosts[0]
    h.processes = [ProcRecord(pid=13, rank=0, protocol="agent", state="running")]
    ct._new_instance(h, started_by)
    t = threading.Thread(target=ct._follow_host, args=(h,), daemon=True)
    t.start()
    return ct, t


def _waits(ct: ClusterTrace, t: threading.Thread) -> bool:
    """Whether the follow still waits (for the process to report to the restarted daemon) after a while; ended
    at once means the NOT_FOUND was taken as final."""
    t.join(1.0)
    waiting = t.is_alive()
    ct._stop.set()
    t.join(5)
    ct.cluster.close()
    return waiting


def test_another_instance_id_is_a_restart_whatever_the_message(tmp_path: Path) -> None:
    daemon = _Daemon(_PLAIN, "new-instance")
    ct, t = _follow(tmp_path, daemon, "old-instance")
    assert _waits(ct, t)
    assert daemon.status_calls == 1  # asked once: an id once changed stays changed


def test_the_same_instance_id_is_no_restart_whatever_the_message(tmp_path: Path) -> None:
    ct, t = _follow(tmp_path, _Daemon(_WORDED, "same-instance"), "same-instance")
    assert not _waits(ct, t)
    (h,) = ct.snapshot()
    assert h.state == "failed" and h.error_type == "NotFound"


def test_without_ids_the_restart_is_read_from_the_reason_never_the_words(tmp_path: Path) -> None:
    """A daemon that sends no instance id: its NOT_FOUND's reason, TRACE_FORGOTTEN, says it restarted."""
    assert _waits(*_follow(tmp_path, _Daemon(_PLAIN, "", ErrorReason.TRACE_FORGOTTEN.value), ""))
    assert not _waits(*_follow(tmp_path, _Daemon(_WORDED, "", ErrorReason.TRACE_NOT_FOUND.value), ""))
    assert not _waits(*_follow(tmp_path, _Daemon(_WORDED, ""), ""))  # no reason: the words are not read
    # a daemon that started the trace with an id, answering now without one (downgraded): the reason too
    assert _waits(*_follow(tmp_path, _Daemon(_PLAIN, "", ErrorReason.TRACE_FORGOTTEN.value), "old-instance"))


def test_a_trace_status_from_another_instance_marks_a_restart(tmp_path: Path) -> None:
    cluster = Cluster([Host("127.0.0.1", free_port())], deadline_s=1)
    ct = ClusterTrace(cluster, dyno_pb2.TraceRequest(job_id="j", trace_id="t-i"), tmp_path, wait_s=1)
    h = ct.hosts[0]
    assert not ct._new_instance(h, "a")
    assert not ct._new_instance(h, "a") and not ct._new_instance(h, "")  # "" (a daemon before ids) says nothing
    assert ct._new_instance(h, "b")
    cluster.close()


def test_the_daemon_sends_its_instance_id(tmp_path: Path) -> None:
    assert new_instance_id() != new_instance_id()
    reg = ProcessRegistry(is_alive=lambda pid: True)
    reg.register(RegisteredProcess(pid=101, job_id="J", protocol=PROTOCOL_AGENT, session_id="s"))
    tm = TraceManager(reg, tmp_path / "traces", "h", kineto_identifier=no_proc_identifier())
    rpcs = TraceRpcs(tm, reg, "h", "inst-1")
    started = rpcs.StartTrace(dyno_pb2.TraceRequest(job_id="J", duration_ms=100), None)  # type: ignore[arg-type]
    assert started.instance_id == "inst-1"
    status = rpcs.GetTrace(dyno_pb2.GetTraceRequest(trace_id=started.trace_id), None)  # type: ignore[arg-type]
    assert status.instance_id == "inst-1"
