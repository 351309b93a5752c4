"""`dyno-cli ps --job-id` reads a job id as `trace --job-id` does (stripped, the daemons' rule). Before: `ps --job-id
" 42"` asked the daemons for " 42" and listed nothing, while `trace --job-id " 42"` traced job 42's processes."""

from __future__ import annotations

import pytest

from dyno.client.cli import build_parser

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
