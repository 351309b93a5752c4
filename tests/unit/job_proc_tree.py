"""A fake /proc tree on disk for job accounting tests: stat, environ, cgroup and children files of made-up pids."""

from __future__ import annotations

from pathlib import Path

from dyno.daemon.jobs.attribution import ProcReader

__all__ = ["ProcTree"]


class ProcTree:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.ppids: dict[int, int] = {}
        root.mkdir(parents=True, exist_ok=True)

    def reader(self) -> ProcReader:
        r = ProcReader(self.root)
        r.ticks_per_s = 100.0
        return r

    def add(
        self,
        pid: int,
        *,
        ppid: int = 1,
        cpu_ticks: int = 0,
        start: int = 1000,
        env: dict[str, str] | None = None,
        cgroup: str = "0::/user.slice\n",
        children: tuple[int, ...] = (),
    ) -> None:
        d = self.root / str(pid)
        (d / "task" / str(pid)).mkdir(parents=True, exist_ok=True)
        self.set_cpu(pid, cpu_ticks, ppid=ppid, start=start)
        (d / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in (env or {}).items()))
        (d / "cgroup").write_text(cgroup)
        (d / "task" / str(pid) / "children").write_text(" ".join(map(str, children)))

    def set_cpu(self, pid: int, ticks: int, *, ppid: int | None = None, start: int = 1000) -> None:
        ppid = self.ppids.setdefault(pid, 1) if ppid is None else ppid
        self.ppids[pid] = ppid
        fields = ["S", str(ppid)] + ["0"] * 9 + [str(ticks), "0", "0", "0", "20", "0", "1", "0", str(start)]
        (self.root / str(pid) / "stat").write_text(f"{pid} (python (x)) " + " ".join(fields) + "\n")

    def remove(self, pid: int) -> None:
        import shutil

        shutil.rmtree(self.root / str(pid), ignore_errors=True)
