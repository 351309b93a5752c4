"""Fetching a cluster trace's files: each finished process's file from its daemon into OUTPUT_DIR/TRACE_ID/HOST_DIR/
(checksum-verified by DynoClient.fetch_trace_file), or kept when an earlier run already fetched that very file.
ClusterTrace's per-host workers call `fetch_done` after each GetTrace; the records are ClusterTrace's, changed under
its lock; fetches are bounded across hosts by one semaphore and abort when the trace is interrupted."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from dyno.client.client import DynoClient
from dyno.client.errors import DynoError
from dyno.client.trace.records import FetchFailure, HostRecord, PreviousFile, ProcRecord, fetch_failure_of
from dyno.filechunks import checksum_file

__all__ = ["TraceFetcher"]

log = logging.getLogger(__name__)


class _Stopped(Exception):
    """Raised inside a fetch's progress callback to abort it when the user interrupts."""


class TraceFetcher:
    """Fetches the files of trace `trace_id` into `out_dir`. `lock` guards the records (ClusterTrace's), `stop` is
    set on interrupt; at most `concurrency` fetches at once, each bounded by `timeout_s`. `previous`: files an
    earlier run fetched into `out_dir`, by (host, pid) (manifest.previous_files)."""

    def __init__(
        self,
        trace_id: str,
        out_dir: Path,
        *,
        lock: threading.Lock,
        stop: threading.Event,
        concurrency: int = 8,
        timeout_s: float = 600.0,
        previous: Mapping[tuple[str, int], PreviousFile] | None = None,
    ) -> None:
        self.trace_id = trace_id
        self.out_dir = out_dir
        self.timeout_s = timeout_s
        self.previous = dict(previous or {})
        self._lock = lock
        self._stop = stop
        self._slots = threading.Semaphore(concurrency)

    def fetch_done(self, client: DynoClient, h: HostRecord) -> None:
        """Fetch every file of `h` whose process is done and not fetched yet (one after another), and again those
        whose fetch its daemon cut (UNREACHABLE: it stopped or restarted mid-stream; the caller calls this after the
        daemon answered again)."""
        with self._lock:
            todo = [p for p in h.processes if p.state == "done" and (not p.fetch or _cut(p))]
            for p in todo:
                p.fetch, p.fetch_failure = "fetching", FetchFailure.NONE
        for p in todo:
            self._fetch(client, h, p)

    def _fetch(self, client: DynoClient, h: HostRecord, p: ProcRecord) -> None:
        def progress(received: int) -> None:
            p.fetched_bytes = received  # one int store: readers may see the old or the new value
            if self._stop.is_set():
                raise _Stopped

        dest = self.out_dir / h.dir
        with self._slots:
            if self._stop.is_set():
                self._failed(p, "interrupted before the fetch", FetchFailure.INTERRUPTED)
                return
            start = time.monotonic()
            if self._reuse(h, p):
                return
            try:
                got = client.fetch_trace_file(self.trace_id, p.pid, dest, timeout_s=self.timeout_s, on_chunk=progress)
            except _Stopped:
                self._failed(p, "interrupted during the fetch", FetchFailure.INTERRUPTED)
                return
            except DynoError as e:  # its message, not str(e): the host is named already
                if self._stop.is_set():  # the user's interrupt closed the channels, which cut the stream
                    self._failed(p, "interrupted during the fetch", FetchFailure.INTERRUPTED)
                else:
                    self._failed(p, f"fetch failed: {e.message}", fetch_failure_of(e))
                return
            except OSError as e:  # a full disk's write errors name no file: say where
                where = f"{e.filename}" if e.filename else f"a file in {dest}"
                self._failed(p, f"fetch failed: cannot write {where}: {e.strerror or e}", FetchFailure.LOCAL_WRITE)
                return
        with self._lock:
            p.fetch, p.fetched_bytes, p.checksum = "fetched", got.size_bytes, got.checksum
            p.file = str(got.path.relative_to(self.out_dir))
            p.fetch_s = round(time.monotonic() - start, 3)

    def _reuse(self, h: HostRecord, p: ProcRecord) -> bool:
        """Keep a file an earlier run fetched into the folder when it is still that file: the daemon's name and
        size, and the checksum recorded when it was fetched (and verified then against the daemon's). Anything
        else (not recorded, missing, another size, a checksum mismatch) is fetched again, replacing it."""
        prev = self.previous.get((str(h.host), p.pid))
        if prev is None:
            return False
        path = self.out_dir / prev.file
        if path.parent != self.out_dir / h.dir or (p.remote_path and Path(p.remote_path).name != path.name):
            return False  # a manifest names only its own host folders; anything else is not trusted
        try:
            if not path.is_file() or path.stat().st_size != p.size_bytes:
                return False
            checksum = checksum_file(path)
        except OSError:
            return False
        if checksum != prev.checksum:
            log.warning("%s: %s does not match its recorded checksum: fetching it again", h.host, path)
            return False
        with self._lock:
            p.fetch, p.fetched_bytes, p.checksum, p.file, p.reused = "fetched", p.size_bytes, checksum, prev.file, True
        return True

    def _failed(self, p: ProcRecord, reason: str, failure: FetchFailure) -> None:
        with self._lock:
            p.fetch, p.error, p.fetch_failure = "failed", reason, failure


def _cut(p: ProcRecord) -> bool:
    return p.fetch == "failed" and p.fetch_failure is FetchFailure.UNREACHABLE
