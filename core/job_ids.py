"""Which job a trainer process belongs to, from its environment: the one rule the agent (its own os.environ) and
the daemon (a kineto trainer's /proc/<pid>/environ) both apply, so both protocols register one job under one id.

Pure and stdlib only: dyno.daemon imports it without dyno.client.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["ENV_JOB_ID", "JOB_ID_VARIABLES", "job_id_from_env"]

ENV_JOB_ID = "DYNO_JOB_ID"
# Every variable the rule reads, in priority order (a reader of a foreign environment needs no others).
JOB_ID_VARIABLES = (ENV_JOB_ID, "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID")
# torchrun's default rendezvous id when none is given: it names no job.
_MEANINGLESS_RUN_IDS = {"", "none"}


def job_id_from_env(env: Mapping[str, str]) -> str:
    """DYNO_JOB_ID, else the Slurm job (array jobs as "<array job>_<task>", the id users see in squeue), else
    TORCHELASTIC_RUN_ID (unless torchrun's default "none"); "" when none is known. Values are stripped."""
    explicit = env.get(ENV_JOB_ID, "").strip()
    if explicit:
        return explicit
    array_job, array_task = env.get("SLURM_ARRAY_JOB_ID", "").strip(), env.get("SLURM_ARRAY_TASK_ID", "").strip()
    if array_job and array_task:
        return f"{array_job}_{array_task}"
    slurm_job = env.get("SLURM_JOB_ID", "").strip()
    if slurm_job:
        return slurm_job
    run_id = env.get("TORCHELASTIC_RUN_ID", "").strip()
    return "" if run_id.lower() in _MEANINGLESS_RUN_IDS else run_id
