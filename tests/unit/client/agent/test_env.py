"""The agent's identity and daemon-socket resolution from the environment, the trace file writer, the proto to
spec conversion and dyno-run's environment: everything of the agent that needs neither torch nor a daemon."""

from __future__ import annotations

import gzip
import json
import multiprocessing
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from dyno.client.agent import env as agent_env
from dyno.client.agent.process_agent import _spec_from_pb
from dyno.client.agent.trace import TraceFailed, write_trace_file
from dyno.client.agent.trace_file import _with_trace_id
from dyno.client.run import BOOTSTRAP_DIR, agent_environment
from dyno.client.run import main as run_main
from dyno.daemon.config import DaemonConfig
from dyno.v1 import agent_pb2

pytestmark = pytest.mark.unit


# --- job id -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("explicit", "env", "expected"),
    [
        ("given", {"DYNO_JOB_ID": "d", "SLURM_JOB_ID": "1"}, "given"),
        (None, {"DYNO_JOB_ID": "d", "SLURM_JOB_ID": "1", "TORCHELASTIC_RUN_ID": "t"}, "d"),
        (None, {"SLURM_JOB_ID": "36200", "SLURM_ARRAY_JOB_ID": "36199", "SLURM_ARRAY_TASK_ID": "0"}, "36199_0"),
        (None, {"SLURM_JOB_ID": "36200", "SLURM_ARRAY_JOB_ID": "36199"}, "36200"),  # no task id: not an array task
        (None, {"SLURM_JOB_ID": "4242", "TORCHELASTIC_RUN_ID": "t"}, "4242"),
        (None, {"TORCHELASTIC_RUN_ID": "run-7"}, "run-7"),
        (None, {"TORCHELASTIC_RUN_ID": "none"}, ""),  # torchrun's default names no job
        (None, {"DYNO_JOB_ID": "  "}, ""),
        (None, {}, ""),
    ],
)
def test_job_id_precedence(explicit: str | None, env: dict[str, str], expected: str) -> None:
    assert agent_env.resolve_job_id(explicit, env) == expected


def test_identity_from_torch_distributed_env() -> None:
    env = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "SLURM_JOB_ID": "99", "CUDA_VISIBLE_DEVICES": "5"}
    ident = agent_env.resolve_identity(env=env)
    assert (ident.job_id, ident.rank, ident.local_rank, ident.world_size, ident.gpu) == ("99", 3, 1, 8, 5)
    assert ident.pid == os.getpid()
    assert ident.ancestry and ident.ancestry[0] == os.getppid()
    assert ident.hostname and ident.cmdline


def test_identity_unknowns_and_explicit_overrides() -> None:
    ident = agent_env.resolve_identity(env={"RANK": "x", "CUDA_VISIBLE_DEVICES": "0,1"})
    assert (ident.rank, ident.local_rank, ident.world_size, ident.gpu, ident.job_id) == (None, None, None, -1, "")
    ident = agent_env.resolve_identity("j", rank=0, world_size=2, env={"RANK": "5", "WORLD_SIZE": "9"})
    assert (ident.job_id, ident.rank, ident.world_size) == ("j", 0, 2)


# --- multiprocessing children -------------------------------------------------------------------------------------


def _fake_mp(*, bootstrapped: bool, daemon: bool = False, target_module: str = "torch.multiprocessing.spawn") -> Any:
    target = types.SimpleNamespace(__module__=target_module)
    current = types.SimpleNamespace(daemon=daemon, _target=target)
    return types.SimpleNamespace(
        parent_process=lambda: object() if bootstrapped else None, current_process=lambda: current
    )


SPAWN_ARGV = ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()", "--multiprocessing-fork"]


@pytest.mark.parametrize(
    ("argv", "mp", "role"),
    [
        (["python", "train.py"], None, "process"),
        (["python", "train.py"], multiprocessing, "process"),
        (SPAWN_ARGV, None, "pending"),
        (SPAWN_ARGV, _fake_mp(bootstrapped=False), "pending"),  # still unpickling its target (importing torch)
        (SPAWN_ARGV, _fake_mp(bootstrapped=True), "process"),  # a torch.multiprocessing.spawn worker: a trainer
        (SPAWN_ARGV, _fake_mp(bootstrapped=True, target_module="__mp_main__"), "process"),  # mp.Process per rank
        (SPAWN_ARGV, _fake_mp(bootstrapped=True, daemon=True), "helper"),  # DataLoader workers are daemonic
        (SPAWN_ARGV, _fake_mp(bootstrapped=True, target_module="concurrent.futures.process"), "helper"),
    ],
)
def test_multiprocessing_role(argv: list[str], mp: Any, role: str) -> None:
    assert agent_env.multiprocessing_role(argv, mp) == role


def test_spawn_child_cmdline_names_the_program_and_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every spawn child's real command line is multiprocessing's bootstrap: `dyno-cli ps` showed identical,
    # meaningless CMDs for all of them.
    monkeypatch.setattr(sys, "orig_argv", ["/venv/bin/python", *SPAWN_ARGV[1:]])
    monkeypatch.setattr(sys, "argv", ["train.py", "--lr", "0.1"])  # the parent's, as multiprocessing sets it
    assert agent_env.resolve_identity(env={}).cmdline == (
        f"/venv/bin/python train.py --lr 0.1 [{multiprocessing.current_process().name}]"
    )
    monkeypatch.setattr(sys, "orig_argv", ["python", "train.py", "--lr", "0.1"])
    assert agent_env.resolve_identity(env={}).cmdline == "python train.py --lr 0.1"


# --- socket path --------------------------------------------------------------------------------------------------


def test_socket_path_precedence(tmp_path: Path) -> None:
    assert agent_env.resolve_socket_path(tmp_path / "a.sock", {"DYNO_AGENT_SOCKET": "/x/b.sock"}) == tmp_path / "a.sock"
    assert agent_env.resolve_socket_path(None, {"DYNO_AGENT_SOCKET": "/x/b.sock"}) == Path("/x/b.sock")


def test_default_socket_path_is_the_daemons(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Whatever the daemon's default is for this user (root: /run/dyno, else XDG_RUNTIME_DIR or the state dir),
    # the agent must look in the same place.
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv("DYNO_AGENT_SOCKET", raising=False)
    path = agent_env.resolve_socket_path(None, {})
    assert path == DaemonConfig().agent_socket_path
    assert path.name == "agent.sock"
    if os.geteuid() != 0:
        assert path == tmp_path / "dyno" / "agent.sock"


# --- trace file ---------------------------------------------------------------------------------------------------


def _kineto_like(trace_id: str | None) -> bytes:
    meta = {"schemaVersion": 1}
    if trace_id is not None:
        meta["trace_id"] = trace_id
    meta["traceEvents"] = [{"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2, "args": {"trace_id": "inner"}}]
    return json.dumps(meta, indent=2).encode()


@pytest.mark.parametrize("existing", ["KINETO0123", None])
def test_write_trace_file_gzip_atomic_with_trace_id(tmp_path: Path, existing: str | None) -> None:
    raw = tmp_path / "raw.json"
    raw.write_bytes(_kineto_like(existing))
    out = tmp_path / "host_1.pt.trace.json.gz"
    size = write_trace_file(raw, out, "20261130T1200-ab")
    assert size == out.stat().st_size > 0
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert doc["trace_id"] == "20261130T1200-ab"
    assert doc["traceEvents"][0]["args"]["trace_id"] == "inner"  # only the top-level key is touched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["host_1.pt.trace.json.gz", "raw.json"]  # no .tmp left


def test_write_trace_file_plain_when_not_gz(tmp_path: Path) -> None:
    raw = tmp_path / "raw.json"
    raw.write_bytes(b"{  }")
    out = tmp_path / "t.json"
    write_trace_file(raw, out, "id1")
    assert json.loads(out.read_bytes()) == {"trace_id": "id1"}


def test_trace_id_header_edge_cases() -> None:
    assert json.loads(_with_trace_id(b'{"a": 1}', 'q"x')) == {"trace_id": 'q"x', "a": 1}
    with pytest.raises(TraceFailed):
        _with_trace_id(b"[1, 2]", "x")


def test_write_trace_file_unwritable_dir_is_a_reason(tmp_path: Path) -> None:
    raw = tmp_path / "raw.json"
    raw.write_bytes(_kineto_like(None))
    with pytest.raises(TraceFailed, match="cannot write"):
        write_trace_file(raw, tmp_path / "missing" / "x.json.gz", "id")


# --- proto conversion ---------------------------------------------------------------------------------------------


def test_spec_from_proto_keeps_oneofs_apart() -> None:
    cfg = agent_pb2.TraceConfig(
        trace_id="t",
        iterations=3,
        start_iteration_roundup=10,
        record_shapes=True,
        with_stack=True,
        output_path="/tmp/x.gz",
        deadline_ms=123,
    )
    spec = _spec_from_pb(cfg)
    assert (spec.iterations, spec.duration_ms, spec.start_iteration_roundup, spec.start_time_ms) == (3, None, 10, None)
    assert spec.record_shapes and spec.with_stack and not spec.profile_memory
    assert (str(spec.output_path), spec.deadline_ms) == ("/tmp/x.gz", 123)
    spec = _spec_from_pb(agent_pb2.TraceConfig(trace_id="t", duration_ms=500, start_time_ms=1700000000000))
    assert (spec.duration_ms, spec.iterations, spec.start_time_ms) == (500, None, 1700000000000)


# --- dyno-run -----------------------------------------------------------------------------------------------------


def test_dyno_run_environment() -> None:
    env = agent_environment({"PYTHONPATH": f"/a{os.pathsep}{BOOTSTRAP_DIR}"}, job_id="36199_0", socket_path="s.sock")
    assert env["DYNO_AGENT"] == "1"
    assert env["PYTHONPATH"].split(os.pathsep) == [str(BOOTSTRAP_DIR), "/a"]  # first, and only once
    assert env["DYNO_JOB_ID"] == "36199_0"
    assert Path(env["DYNO_AGENT_SOCKET"]).is_absolute()
    assert (BOOTSTRAP_DIR / "sitecustomize.py").is_file()


def test_dyno_run_print_env_and_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["--job-id", "7", "--print-env"]) == 0
    out = capsys.readouterr().out
    assert "export DYNO_AGENT=1" in out and "export DYNO_JOB_ID=7" in out and str(BOOTSTRAP_DIR) in out
    assert run_main([]) == 2
    assert "no command" in capsys.readouterr().err
    assert run_main(["--", "/nonexistent/dyno-test-cmd"]) == 127
