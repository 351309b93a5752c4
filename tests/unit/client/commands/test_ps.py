"""`dyno-cli ps`: --job-id read as `trace --job-id` reads it (stripped, the daemons' rule: `ps --job-id " 42"` lists
job 42's processes), what it says when nothing matches or nothing is registered, and rows fitted to the terminal."""

from __future__ import annotations

import pytest

from dyno.client.cli import build_parser
from dyno.client.cluster import HostResult
from dyno.client.commands import ps
from dyno.client.commands.ps import empty_hint, render
from dyno.client.format import table
from dyno.client.hosts import Host
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def test_ps_and_trace_read_a_job_id_alike() -> None:
    parser = build_parser()
    ps = parser.parse_args(["ps", "--job-id", " 36199_0 "])
    trace = parser.parse_args(["trace", "--job-id", " 36199_0 ", "--duration-ms", "1", "--output-dir", "o"])
    assert ps.job_id == trace.job_id == "36199_0"
    assert parser.parse_args(["ps"]).job_id is None  # no filter


@pytest.mark.parametrize("bad", ["", "a\tb"])
def test_a_job_id_no_process_can_have_is_a_usage_error(capsys: pytest.CaptureFixture[str], bad: str) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["ps", "--job-id", bad])
    assert e.value.code == 2 and "argument --job-id" in capsys.readouterr().err


# `dyno-cli ps --job-id J` with no process of J


def test_empty_answer_for_a_job_names_the_job() -> None:
    answered = HostResult(Host("gpu1"), True, value=dyno_pb2.ListProcessesResponse(hostname="gpu1"))
    assert render([answered], job_id="nope") == "no process of job 'nope' registered on 1 host(s)"
    assert render([answered]) == "no processes registered on 1 host(s)"


# `dyno-cli ps` on a terminal fits its rows to the terminal's width by cutting the command line; into a pipe or file
# every character stays.


_CMD = "python /very/long/path/to/the/training/script/train_the_model.py --config configs/big.yaml --epochs 90"


def _rows() -> list[HostResult[dyno_pb2.ListProcessesResponse]]:
    procs = [dyno_pb2.ProcessInfo(pid=4242 + i, job_id="exp42", cmdline=_CMD, last_seen_ms=10**13) for i in range(3)]
    return [HostResult(Host("gpu001.cluster.example", 1778), True, dyno_pb2.ListProcessesResponse(processes=procs))]


def test_ps_fits_the_terminal() -> None:
    text = ps.render(_rows(), now_ms=10**13, max_width=120)
    lines = text.splitlines()
    assert len(lines) == 5 and all(len(line) <= 120 for line in lines), text
    assert lines[2].endswith("...") and "  python /very" in lines[2]


def test_without_a_width_nothing_is_cut() -> None:
    text = ps.render(_rows(), now_ms=10**13)
    assert _CMD[:60] in text  # ps keeps 60 characters of the command line, as before


def test_table_cuts_only_the_last_column_and_never_below_a_few_characters() -> None:
    rows = [["a" * 30, "b" * 40]]
    assert table(["X", "Y"], rows, max_width=50).splitlines()[2] == "a" * 30 + "  " + "b" * 15 + "..."
    narrow = table(["X", "Y"], rows, max_width=10).splitlines()[2]
    assert narrow == "a" * 30 + "  " + "b" * 5 + "..."  # too narrow for the rest: it wraps, the name stays readable
    assert table(["X", "Y"], rows).splitlines()[2] == "a" * 30 + "  " + "b" * 40


# `dyno-cli ps` with nothing registered says what to try


def _answer(*pids: int) -> HostResult[dyno_pb2.ListProcessesResponse]:
    resp = dyno_pb2.ListProcessesResponse(hostname="gpu1")
    for pid in pids:
        resp.processes.add(pid=pid, job_id="exp1")
    return HostResult(Host("gpu1"), True, value=resp)


def test_ps_with_nothing_registered_says_how_a_trainer_registers() -> None:
    hint = empty_hint([_answer()])
    assert "dyno-run" in hint and "KINETO_USE_DAEMON=1" in hint and "DYNO_AGENT_SOCKET" in hint


def test_ps_with_no_process_of_the_job_points_to_the_unfiltered_list() -> None:
    hint = empty_hint([_answer()], job_id="nope")
    assert "without --job-id" in hint


def test_ps_hint_only_when_every_answering_host_listed_nothing() -> None:
    down = HostResult[dyno_pb2.ListProcessesResponse](Host("gpu2"), False, error="refused", error_type="Unavailable")
    assert empty_hint([_answer(42), _answer()]) == ""
    assert empty_hint([down]) == ""  # no host answered: the failure lines say it all
    assert empty_hint([down, _answer()]) != ""
