"""`dyno-cli trace --iterations N` of an unmodified KINETO_USE_DAEMON=1 program without an optimizer: libkineto
records its 500 ms fallback window and reports nothing; dynod finds it in the file and the user gets a note (the
trace still succeeds). A trainer that steps gets its iterations and no note."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kineto_daemon import kineto_daemon

pytest.importorskip("torch")
pytestmark = [pytest.mark.integration, pytest.mark.torch]


def test_iteration_trace_without_optimizer_steps_says_so(tmp_path: Path) -> None:
    with kineto_daemon() as k:
        plain, stepping = k.new_job(), k.new_job()
        # started at once, then waited for: torch's import is most of each one's start
        started = (
            k.spawn_trainer("no_optimizer_trainer.py", job=plain),
            k.spawn_trainer("agent_trainer.py", "--seconds", "120", job=stepping),
        )
        k.wait_ready(started[0], lambda s: s.strip() == "ready")
        k.wait_ready(started[1], lambda s: s.startswith("step "))
        k.registered(plain, 1)
        k.registered(stepping, 1)

        res = k.trace(tmp_path / "a", "--job-id", plain, "--iterations", "3")
        assert res.returncode == 0, res.stdout + res.stderr
        (proc,) = json.loads(res.stdout)["processes"]
        assert proc["state"] == "done" and proc["size_bytes"] > 0
        assert proc["error"].startswith("not 3 iteration(s): libkineto counts iterations by optimizer.step()")
        assert f"pid {proc['pid']}: note: not 3 iteration(s)" in res.stderr

        res = k.trace(tmp_path / "b", "--job-id", stepping, "--iterations", "3")
        assert res.returncode == 0, res.stdout + res.stderr
        (proc,) = json.loads(res.stdout)["processes"]
        assert proc["state"] == "done" and not proc.get("error") and "note:" not in res.stderr
