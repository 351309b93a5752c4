"""What a new user reads when a step gives nothing or asks for help: `dyno-cli ps` with nothing registered says what
to try; `dyno-cli analyze --help` says what `python -m dyno.trace_analysis --help` says (one description, ordered by
severity), that --rules repeats, and that SIGTERM is an interruption (130) as for every dyno-cli command."""

from __future__ import annotations

import pytest

from dyno.client.cli import build_parser, main
from dyno.client.cluster import HostResult
from dyno.client.commands.ps import empty_hint
from dyno.client.hosts import Host
from dyno.trace_analysis.cli import DESCRIPTION, EXIT_CODES
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


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


def _subparser_help(name: str) -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices[name].format_help()  # type: ignore[attr-defined]


def test_analyze_help_is_the_trace_analysis_description() -> None:
    text = " ".join(_subparser_help("analyze").split())
    assert " ".join(DESCRIPTION.split()) in text
    assert "by severity, then time lost" in text


def test_analyze_help_says_rules_repeats_and_sigterm_is_130() -> None:
    text = " ".join(_subparser_help("analyze").split())
    assert "--list-rules; repeatable" in text
    assert "SIGTERM" in EXIT_CODES[130] and "130 interrupted (Ctrl-C or SIGTERM)" in text


def test_hostfile_help_says_an_mpi_hostfile_works() -> None:
    text = " ".join(_subparser_help("status").split())
    assert "further words ignored (an MPI hostfile's 'node1 slots=8' works)" in text


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--limit", "5"], "--limit selects samples"),
        (["--since-ms", "1"], "--since-ms selects samples"),
        (["--limit", "5", "--since-ms", "1"], "--limit and --since-ms select samples"),
    ],
)
def test_metrics_history_options_without_json_read_as_a_sentence(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        main(["metrics", "--host", "127.0.0.1:1", *argv])
    assert e.value.code == 2
    assert said in capsys.readouterr().err
