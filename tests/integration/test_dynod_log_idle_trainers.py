"""dynod's log on a host of idle trainers: each process's first registration is one INFO line, and nothing more while
libkineto polls (here every second) and the agents' streams carry keepalives. On a fleet every host runs tens of
trainers polling for weeks: a line per poll or per keepalive would be most of the log. A real dynod, real
KINETO_USE_DAEMON=1 CPU torch trainers, agent processes and one with both (one line: the agent's registration of a
process libkineto registered first takes it over silently)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
from kineto_daemon import kineto_daemon

from dyno.client.client import DynoClient
from dyno.v1 import dyno_pb2

from conftest import wait_for

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

KINETO_TRAINERS = 2
AGENTS = 3
QUIET_S = 6.0  # six libkineto polls per kineto trainer, one keepalive per agent stream (every 5 s)
AGENT = "from dyno.client import agent; agent.start(); import sys; sys.stdin.read()"


def test_idle_trainers_log_one_registration_each_and_nothing_more() -> None:
    with kineto_daemon() as kd:
        d = kd.daemon
        job = kd.new_job()
        # every process started at once, the kineto trainers waited for last: torch's import is most of a start
        kineto = [kd.spawn_trainer("no_optimizer_trainer.py", job=job) for _ in range(KINETO_TRAINERS)]
        agent_env = {**os.environ, "DYNO_AGENT_SOCKET": str(d.agent_socket), "DYNO_JOB_ID": f"a{job}"}
        both_env = {**kd.trainer_env(job), "DYNO_AGENT_SOCKET": str(d.agent_socket)}
        agents = [
            subprocess.Popen(
                [sys.executable, "-c", AGENT], env=agent_env, stdin=subprocess.PIPE, start_new_session=True
            )
            for _ in range(AGENTS)
        ]
        both = subprocess.Popen(
            [sys.executable, "-c", AGENT.replace("import sys", "import torch, sys")],
            env=both_env,
            stdin=subprocess.PIPE,
            start_new_session=True,
        )
        kd.procs.extend([*agents, both])  # killed by kd.close()
        for proc in kineto:
            kd.wait_ready(proc, lambda line: line.startswith("ready"))
        pids = {p.pid for p in [*kineto, *agents, both]}

        def registered() -> set[int]:
            return {int(m.group(1)) for line in d.lines if (m := re.search(r" registered \w+ process pid=(\d+)", line))}

        wait_for(lambda: registered() >= pids, 90, 0.2)
        time.sleep(2.0)  # the last kineto trainer's next poll (1 s) and the 'both' process's libkineto polls too
        before = len(d.lines)
        time.sleep(QUIET_S)
        steady = d.lines[before:]
        for p in [*agents, both]:
            assert p.poll() is None
        with DynoClient(d.target, timeout_s=5) as c:
            (proc,) = [p for p in c.list_processes(job).processes if p.pid == both.pid]
        assert proc.protocol == dyno_pb2.PROTOCOL_AGENT  # libkineto's polls of it keep it seen, do not replace it
        regs = [line for line in d.lines if " registered " in line]
    assert steady == [], "".join(steady)
    assert sorted(int(re.search(r"pid=(\d+)", line).group(1)) for line in regs) == sorted(pids), "".join(regs)
