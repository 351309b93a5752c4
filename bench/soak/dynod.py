"""The dynod under soak: `python -m dyno.daemon` with a temp TOML config on free loopback ports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from bench_common import env_without_job_ids, free_port

from dyno.daemon.process import READY_LINE

__all__ = ["Dynod"]


class Dynod:
    """`python -m dyno.daemon --config <tmp>/dynod.toml` on free loopback ports, with everything under `root`."""

    def __init__(self, root: Path, *, interval_s: float = 0.5, extra: tuple[str, ...] = ()) -> None:
        """`interval_s`: dynod's sampling interval; `extra`: more TOML lines of its config."""
        self.root = root
        self.agent_socket = root / "agent.sock"
        self.kineto_dir = root / "k"
        self.trace_dir = root / "traces"
        self.config = root / "dynod.toml"
        self.config.write_text(
            "\n".join(
                [
                    'listen = "127.0.0.1"',
                    "port = 0",
                    f"metrics_port = {free_port()}",
                    'gpu_backend = "sim"',
                    "sim_gpus = 8",
                    f"interval_s = {interval_s:g}",
                    "history_s = 60",
                    f'state_dir = "{root / "state"}"',
                    f'trace_dir = "{self.trace_dir}"',
                    f'agent_socket = "{self.agent_socket}"',
                    f'kineto_socket_dir = "{self.kineto_dir}"',
                    "trace_retention_s = 20",  # retention passes (every 30 s) delete most folders of a run
                    f"trace_retention_bytes = {8 * 1024 * 1024}",
                    'log_level = "warning"',
                    *extra,
                ]
            )
            + "\n"
        )
        self.log = root / "dynod.log"
        self.objects_file = root / "objects.json"
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.metrics_port = 0

    def start(self, objects: bool = False) -> None:
        """`objects`: dynod's own main() under a wrapper that counts its live objects by type on SIGUSR1."""
        env = env_without_job_ids()
        entry = ["-c", OBJECT_COUNTER, str(self.objects_file)] if objects else ["-m", "dyno.daemon"]
        self.proc = subprocess.Popen(
            [sys.executable, *entry, "--config", str(self.config), "--log-level", "info"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stderr is not None
        log = open(self.log, "w")  # noqa: SIM115 (closed by the drain thread)
        for line in self.proc.stderr:
            log.write(line)
            ready = READY_LINE.search(line)
            if ready:
                # "dynod X ready: grpc=127.0.0.1:PORT metrics=http://127.0.0.1:PORT/metrics pid=N"
                self.port = int(ready["port"])
                self.metrics_port = int(ready["metrics"].rsplit(":", 1)[1].split("/")[0])
                break
        else:
            raise SystemExit(f"dynod did not start; see {self.log}:\n{self.log.read_text()[-3000:]}")

        def drain() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            with log:
                for line in self.proc.stderr:
                    log.write(line)

        threading.Thread(target=drain, daemon=True).start()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> int:
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def objects(self) -> Counter[str]:
        """dynod's live (gc-tracked) objects by type, as of now (started with objects=True)."""
        self.objects_file.unlink(missing_ok=True)
        os.kill(self.pid, signal.SIGUSR1)
        for _ in range(200):
            if self.objects_file.exists():
                return Counter(json.loads(self.objects_file.read_text()))
            time.sleep(0.05)
        return Counter()


# What `--objects` runs instead of `python -m dyno.daemon`: the same main(), and on SIGUSR1 a count of every
# gc-tracked object by type (after a full collection) written to argv[1]. A leak of a few hundred bytes per trainer
# is lost in RSS noise over a few thousand operations; a type whose count keeps growing is not.
OBJECT_COUNTER = """
import collections, gc, json, os, signal, sys, threading
out = sys.argv.pop(1)
def count():
    gc.collect()
    c = collections.Counter(str(type(o)) for o in gc.get_objects())
    with open(out + ".tmp", "w") as f:
        json.dump(c, f)
    os.replace(out + ".tmp", out)
signal.signal(signal.SIGUSR1, lambda *_: threading.Thread(target=count).start())
from dyno.daemon.main import main
sys.exit(main(sys.argv[1:]))
"""
