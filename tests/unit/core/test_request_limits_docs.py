"""The request limits (dyno.request_limits) must not drift between the code and the docs. docs/CLUSTER.md refers to
`dyno-cli trace --help` / `dyno-cli metrics --help`, which print every range from the constants (checked here);
any doc (docs/*.md, README.md) that still states a limit in one of the usual phrasings must state the constant's
value (checked here for every such phrasing, with a self-test that a drifted number is caught)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dyno.client.format import human_bytes
from dyno.request_limits import (
    JOB_ID_RULE,
    MAX_DURATION_MS,
    MAX_FUTURE_START_MS,
    MAX_ITERATIONS,
    MAX_JOB_ID,
    MAX_METRICS_LIMIT,
    MAX_METRICS_RESPONSE_BYTES,
    MAX_NAME_PATTERN_LEN,
    MAX_NAME_PATTERNS,
    MAX_PIDS,
)

from conftest import cli_help

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]
DOCS = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]

_N = r"(\d[\d ,_]*\d|\d)"  # a number, maybe written 100 000 or 100,000
_TICK = r"`?"
# How a doc states each limit: (what, regex with one number group, the value it must have). Text is searched with
# its line breaks and runs of spaces folded into one space.
STATEMENTS: list[tuple[str, str, int]] = [
    ("duration", rf"--duration-ms{_TICK}:? \(?1-{_N}", MAX_DURATION_MS),
    ("duration", rf"duration_ms[^.]{{0,30}}?1\.\.{_N}", MAX_DURATION_MS),
    ("iterations", rf"--iterations{_TICK}(?: and {_TICK}--iteration-roundup{_TICK})?:? \(?1-{_N}",
     MAX_ITERATIONS),
    ("iterations", rf"--iteration-roundup{_TICK}:? \(?1-{_N}", MAX_ITERATIONS),
    ("start delay", rf"--start-delay-s{_TICK}:? \(?0-{_N}", MAX_FUTURE_START_MS // 1000),
    ("start delay", rf"more than {_N} ?(?:s|seconds) ahead", MAX_FUTURE_START_MS // 1000),
    ("start delay", rf"more than {_N} ?(?:h|hours?) ahead", MAX_FUTURE_START_MS // 3_600_000),
    ("job id", rf"(?:more|longer) than {_N} characters,? or (?:not |with un)printable", MAX_JOB_ID),
    ("job id", rf"--job-id{_TICK}[^.]{{0,40}}?at most {_N} printable characters", MAX_JOB_ID),
    ("pids", rf"at most {_N} {_TICK}--pids", MAX_PIDS),
    ("pids", rf"--pids{_TICK}[^.]{{0,60}}?at most {_N}", MAX_PIDS),
    ("names", rf"at most {_N} patterns", MAX_NAME_PATTERNS),
    ("names", rf"patterns of 1-{_N} characters", MAX_NAME_PATTERN_LEN),
    ("metrics limit", rf"--limit{_TICK}:? \(?0-{_N}", MAX_METRICS_LIMIT),
    ("metrics bytes", rf"at most {_N} MiB of samples", MAX_METRICS_RESPONSE_BYTES // 2**20),
    ("metrics bytes", rf"MAX_METRICS_RESPONSE_BYTES{_TICK} \({_N} MiB", MAX_METRICS_RESPONSE_BYTES // 2**20),
]  # fmt: skip


def _folded(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def stated_limits(text: str) -> list[tuple[str, int, int, str]]:
    """(what, stated, expected, excerpt) for every limit `text` states."""
    text = _folded(text)
    found = []
    for what, pattern, expected in STATEMENTS:
        for m in re.finditer(pattern, text):
            stated = int(re.sub(r"[ ,_]", "", m.group(1)))
            found.append((what, stated, expected, m.group(0)))
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_limit_a_doc_states_equals_the_constant(doc: Path) -> None:
    found = stated_limits(doc.read_text())
    wrong = [(what, excerpt, expected) for what, stated, expected, excerpt in found if stated != expected]
    assert not wrong, f"{doc.name} states limits that are not dyno.request_limits': {wrong}"


def test_the_scanner_catches_a_drifted_number_in_each_phrasing() -> None:
    """Each phrasing above is matched (so a doc that states the limit is checked) and a wrong number fails it."""
    samples = {
        "`--duration-ms` 1-600000 (10 min)": MAX_DURATION_MS,
        "duration_ms: 1..600000": MAX_DURATION_MS,
        "`--iterations` and `--iteration-roundup`\n   1-100000": MAX_ITERATIONS,
        "--iteration-roundup (1-100000)": MAX_ITERATIONS,
        "`--start-delay-s` 0-3600": MAX_FUTURE_START_MS // 1000,
        "refuse starts more than 3600 s ahead": MAX_FUTURE_START_MS // 1000,
        "refuse starts more than 1 h ahead": MAX_FUTURE_START_MS // 3_600_000,
        "registration (more than 128 characters, or not printable)": MAX_JOB_ID,
        "an id longer than\n  128 characters or with unprintable characters": MAX_JOB_ID,
        "`--job-id` non-empty and at most 128 printable characters": MAX_JOB_ID,
        "at most 1024\n   `--pids`": MAX_PIDS,
        "`--pids` (a launcher's pid selects its workers; at most 1024 pids)": MAX_PIDS,
        "at most 256 patterns": MAX_NAME_PATTERNS,
        "patterns of 1-200 characters": MAX_NAME_PATTERN_LEN,
        "`--limit` (0-100000)": MAX_METRICS_LIMIT,
        "with at most 32 MiB of samples": MAX_METRICS_RESPONSE_BYTES // 2**20,
        "`request_limits.MAX_METRICS_RESPONSE_BYTES` (32 MiB, half": MAX_METRICS_RESPONSE_BYTES // 2**20,
    }
    for text, value in samples.items():
        assert {s for _, s, _, _ in stated_limits(text)} == {value}, f"not matched: {text!r}"
        drifted = text.replace(str(value), str(value + 1))
        assert {s for _, s, _, _ in stated_limits(drifted)} == {value + 1}, f"drift not seen: {drifted!r}"
    assert [s for _, s, _, _ in stated_limits("`--limit` 0-100 000")] == [100_000]  # thousands written apart


def test_help_prints_every_range_from_request_limits() -> None:
    """What docs/CLUSTER.md refers readers to: each option's range, from the constants."""
    trace, metrics = cli_help("trace"), cli_help("metrics")
    for text in (
        f"trace for this long (1-{MAX_DURATION_MS} ms)",
        f"trace this many optimizer steps (1-{MAX_ITERATIONS})",
        f"(default 10; 1-{MAX_ITERATIONS})",
        f"at most {MAX_FUTURE_START_MS / 1000:g})",
        f"({JOB_ID_RULE})",
        f"at most {MAX_PIDS} pids",
    ):
        assert text in trace, text
    for text in (
        f"at most {MAX_NAME_PATTERNS} patterns of 1-{MAX_NAME_PATTERN_LEN} characters",
        f"at most {MAX_METRICS_LIMIT})",
        f"at most {human_bytes(MAX_METRICS_RESPONSE_BYTES)} of samples",
    ):
        assert text in metrics, text


def test_cluster_doc_points_to_help_instead_of_repeating_the_numbers() -> None:
    text = _folded((REPO / "docs" / "CLUSTER.md").read_text())
    assert "`dyno-cli trace --help`" in text and "`dyno-cli metrics --help`" in text
    assert str(MAX_DURATION_MS) not in text and str(MAX_ITERATIONS) not in text
