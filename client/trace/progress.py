"""Progress of a cluster trace: a live rich table (one row per host) on a terminal, plain lines otherwise.

Both views take snapshots (lists of HostRecord) from ClusterTrace; they never touch the engine's state.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TextIO

from dyno.client.format import human_bytes
from dyno.client.trace.records import HOST_DONE, HOST_FAILED, HOST_NO_MATCH, HOST_TRACING, HostRecord

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["HostCounts", "PlainProgress", "Progress", "RichProgress", "SyncStart", "counts", "make_progress"]

_WAITING = {"pending", "delivered", "running", "unspecified", "?"}
_MAX_ROWS = 40  # a live table taller than a terminal scrolls away; problems are shown first


@dataclass(frozen=True)
class HostCounts:
    matched: int
    running: int
    done: int
    failed: int
    fetched: int
    fetched_bytes: int


def counts(h: HostRecord) -> HostCounts:
    procs = h.processes
    return HostCounts(
        matched=len(h.matched_pids),
        running=sum(p.state in _WAITING for p in procs),
        # a done process whose file failed to arrive is failed, not both (the totals then exceeded "matched")
        done=sum(p.state == "done" and p.fetch != "failed" for p in procs),
        failed=sum((p.state not in _WAITING and p.state != "done") or p.fetch == "failed" for p in procs),
        fetched=sum(p.ok for p in procs),
        fetched_bytes=sum(p.fetched_bytes for p in procs if p.fetch in ("fetching", "fetched")),
    )


def _host_state(h: HostRecord, start_in_s: float = 0.0) -> str:
    if h.state == HOST_TRACING and any(p.fetch == "fetching" for p in h.processes):
        return "fetching"
    if h.state == HOST_TRACING and start_in_s > 0:  # delivered, recording from the synchronized start on
        return f"starts in {math.ceil(start_in_s)} s"
    return h.state


@dataclass(frozen=True)
class SyncStart:
    """A trace's synchronized start (TraceRequest.start_time_ms): before it the processes have their configs but
    record nothing (libkineto waits for it, by default 7 s ahead), which the views show as waiting, not tracing."""

    start_ms: int = 0  # unix ms; 0: no synchronized start
    wall_ms: Callable[[], float] = lambda: time.time() * 1000

    def left_s(self) -> float:
        """Seconds until the start; 0 once it has passed (or without one)."""
        return max(0.0, (self.start_ms - self.wall_ms()) / 1000) if self.start_ms else 0.0

    def line(self) -> str:
        """'waiting for the synchronized start at HH:MM:SS.mmm (in N.N s)', or '' once it has passed."""
        left = self.left_s()
        if not left:
            return ""
        at = time.strftime("%H:%M:%S", time.localtime(self.start_ms / 1000)) + f".{self.start_ms % 1000:03d}"
        return f"waiting for the synchronized start at {at} (in {left:.1f} s): the processes record from then"


class Progress(Protocol):
    def update(self, hosts: Sequence[HostRecord]) -> None: ...

    def close(self, hosts: Sequence[HostRecord]) -> None: ...


class PlainProgress:
    """Plain lines on `out`: one per host when its state changes, and a one-line total every `every_s`."""

    def __init__(
        self,
        out: TextIO,
        every_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        sync: SyncStart | None = None,
        fetching: bool = True,
    ) -> None:
        self.out = out
        self.fetching = fetching
        self.every_s = every_s
        self._clock = clock
        self._start = clock()
        self._last_total = -every_s
        self._seen: dict[str, str] = {}
        self._sync = sync or SyncStart()
        self._said_sync = False

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def update(self, hosts: Sequence[HostRecord]) -> None:
        waiting = self._sync.line()
        if waiting and not self._said_sync:
            self._said_sync = True
            self._say(f"  {waiting}")
        for h in hosts:
            state = h.state
            if self._seen.get(h.dir) == state:
                continue
            self._seen[h.dir] = state
            c = counts(h)
            if state == HOST_TRACING:
                self._say(
                    f"  {h.host}: tracing {len(h.processes)} process(es), pids "
                    + ",".join(str(p.pid) for p in h.processes)
                )
            elif state == HOST_DONE:
                fetched = f", {c.fetched} file(s) fetched ({human_bytes(c.fetched_bytes)})" if self.fetching else ""
                self._say(f"  {h.host}: done{fetched}" + (f", {c.failed} failed" if c.failed else ""))
            elif state in (HOST_FAILED, HOST_NO_MATCH):
                self._say(f"  {h.host}: {state}: {h.error}")
        now = self._clock()
        if now - self._last_total >= self.every_s:
            self._last_total = now
            left = self._sync.left_s()
            starts = f"start in {left:.1f} s | " if left else ""
            self._say(f"[{now - self._start:6.1f}s] {starts}{total_line(hosts, fetching=self.fetching)}")

    def close(self, hosts: Sequence[HostRecord]) -> None:
        self._last_total = -self.every_s
        self.update(hosts)


def total_line(hosts: Sequence[HostRecord], *, fetching: bool = True) -> str:
    """The whole trace in one line; `fetching` False (--summaries): nothing is fetched, so no file count."""
    cs = [counts(h) for h in hosts]
    by_state = {s: sum(h.state == s for h in hosts) for s in (HOST_TRACING, HOST_DONE, HOST_FAILED, HOST_NO_MATCH)}
    host_part = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in by_state.items() if n)
    return (
        f"hosts: {host_part} | processes: {sum(c.matched for c in cs)} matched, {sum(c.running for c in cs)} "
        f"running, {sum(c.done for c in cs)} done, {sum(c.failed for c in cs)} failed"
        + (
            f" | fetched {sum(c.fetched for c in cs)} file(s), {human_bytes(sum(c.fetched_bytes for c in cs))}"
            if fetching
            else ""
        )
    )


class RichProgress:
    """A live table (rich) on a terminal: one row per host, problems and unfinished hosts first."""

    _COLUMNS = ("HOST", "STATE", "MATCHED", "RUN", "DONE", "FAILED", "FETCHED")

    def __init__(self, out: TextIO, title: str, sync: SyncStart | None = None, fetching: bool = True) -> None:
        from rich.console import Console
        from rich.live import Live

        self._title = title
        self._fetching = fetching
        self._sync = sync or SyncStart()
        self._console = Console(file=out)
        self._live = Live(console=self._console, refresh_per_second=4, transient=False)
        self._live.start()

    @staticmethod
    def _rows(
        hosts: Sequence[HostRecord], start_in_s: float = 0.0, fetching: bool = True
    ) -> list[tuple[list[str], str, str]]:
        """(cells, reason, style) for the hosts shown: failed first, then unfinished, then done."""
        order = {HOST_FAILED: 0, HOST_NO_MATCH: 0, HOST_TRACING: 1, HOST_DONE: 2}
        shown = sorted(hosts, key=lambda h: order.get(h.state, 1))[:_MAX_ROWS]
        rows = []
        for h in shown:
            c = counts(h)
            state = _host_state(h, start_in_s)
            cells = [str(h.host), state, str(c.matched), str(c.running), str(c.done), str(c.failed)]
            cells.append(f"{c.fetched} / {human_bytes(c.fetched_bytes)}" if fetching else "-")
            style = {HOST_FAILED: "red", HOST_NO_MATCH: "yellow", HOST_DONE: "green"}.get(h.state, "")
            rows.append((cells, h.error, style))
        if len(hosts) > len(shown):
            rows.append(([f"... {len(hosts) - len(shown)} more hosts", *[""] * 6], "", ""))
        return rows

    def _table(self, hosts: Sequence[HostRecord], reason_w: int = 0) -> Table:
        from rich import box
        from rich.table import Table

        waiting = self._sync.line()
        t = Table(
            title=self._title,
            caption=total_line(hosts, fetching=self._fetching) + (f"\n{waiting}" if waiting else ""),
            title_justify="left",
            caption_justify="left",
            box=box.SIMPLE_HEAD,
        )
        for col in self._COLUMNS:
            t.add_column(col, justify="left" if col in ("HOST", "STATE") else "right", no_wrap=True)
        if reason_w:
            t.add_column("REASON", no_wrap=True, width=reason_w)
        for cells, reason, style in self._rows(hosts, self._sync.left_s(), self._fetching):
            if reason_w:
                cells = [*cells, reason if len(reason) <= reason_w else reason[: reason_w - 1] + "…"]
            t.add_row(*cells, style=style)
        return t

    def _render(self, hosts: Sequence[HostRecord]) -> Table:
        # The fixed columns keep their natural width; REASON gets what is left of the terminal, cut to fit, so
        # every host stays on one line.
        free = self._console.width - self._console.measure(self._table(hosts)).maximum - 3
        return self._table(hosts, free if free >= 10 else 0)

    def update(self, hosts: Sequence[HostRecord]) -> None:
        self._live.update(self._render(hosts))

    def close(self, hosts: Sequence[HostRecord]) -> None:
        self._live.update(self._render(hosts), refresh=True)
        self._live.stop()


def make_progress(
    title: str, *, live: bool | None = None, out: TextIO | None = None, start_ms: int = 0, fetching: bool = True
) -> Progress:
    """RichProgress when stdout and `out` (default stderr) are terminals (or `live` says so), else plain lines.
    `start_ms`: the trace's synchronized start (unix ms; 0: none), shown as waiting until then; `fetching` False
    (--summaries): no file counts."""
    out = out if out is not None else sys.stderr
    if live is None:
        live = sys.stdout.isatty() and out.isatty()
    sync = SyncStart(start_ms)
    return RichProgress(out, title, sync, fetching) if live else PlainProgress(out, sync=sync, fetching=fetching)
