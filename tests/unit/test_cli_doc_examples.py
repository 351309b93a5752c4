"""Every `dyno-cli ...` line of the user docs' code blocks (README.md, docs/*.md) parses with the real parser: the
options exist, required ones are there, the values pass their checks. docs/CLUSTER.md's fan-out figures are
docs/BENCHMARKS.md's (the measured ones), and its iteration example keeps the launcher out (--process-limit)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from dyno.client.cli import build_parser, command_first

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
USER_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PARSER = build_parser()
COMMANDS = set(next(a for a in PARSER._actions if a.dest == "command").choices)


def _block_lines(text: str) -> list[str]:
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)
    return [line for block in blocks for line in block.splitlines()]


def example_commands(text: str) -> list[list[str]]:
    """The dyno-cli command lines of `text`'s code blocks, as argv (after `dyno-cli`), comments dropped. A usage
    synopsis (`[--json]`, `PATH...`) is no example; a diagram (`dyno-cli ──TCP`) neither."""
    found = []
    for line in _block_lines(text):
        for part in re.split(r";|&&|\|\|?|\$\(", re.split(r"\s#", line)[0]):
            if "dyno-cli" not in part:
                continue
            try:
                words = shlex.split(part)
            except ValueError:  # an unbalanced quote: prose or a diagram, not a command line
                words = part.split()
            while words and (re.fullmatch(r"\w+=\S*", words[0]) or words[0] in ("$", "sudo", "exec")):
                words = words[1:]
            if len(words) < 2 or words[0] != "dyno-cli" or re.search(r"\[--|\w\.\.\.", part):
                continue
            if words[1] in COMMANDS or words[1].startswith("-"):
                found.append(words[1:])
    return found


def _parses(argv: list[str]) -> str | None:
    """None when argv parses, else argparse's complaint."""
    try:
        PARSER.parse_args(command_first(argv, sorted(COMMANDS)))
    except SystemExit as e:
        return f"exit {e.code}"
    return None


def test_the_scan_finds_the_examples_and_sees_a_broken_one() -> None:
    cluster = example_commands((ROOT / "docs" / "CLUSTER.md").read_text())
    assert len(cluster) >= 6 and {a[0] for a in cluster} == {"trace", "fetch"}
    sample = "```sh\ndyno-cli trace --job-id j --output-dir o  # no window\n$ dyno-cli status --host h\n```\n"
    assert example_commands(sample) == [["trace", "--job-id", "j", "--output-dir", "o"], ["status", "--host", "h"]]
    assert _parses(["trace", "--job-id", "j", "--output-dir", "o"]) is not None  # --duration-ms/--iterations missing
    assert example_commands("```\ndyno-cli analyze PATH... [--json]\n```\n") == []  # a synopsis


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: p.name)
def test_every_documented_dyno_cli_line_parses(doc: Path, capsys: pytest.CaptureFixture) -> None:
    bad = [(" ".join(argv), why) for argv in example_commands(doc.read_text()) if (why := _parses(argv))]
    capsys.readouterr()
    assert not bad, f"{doc.name}: {bad}"


def test_cluster_iteration_examples_keep_the_launcher_out() -> None:
    for argv in example_commands((ROOT / "docs" / "CLUSTER.md").read_text()):
        if "--iterations" in argv:
            assert "--process-limit" in argv, argv


def test_cluster_fanout_figures_are_the_benchmarks() -> None:
    """The figures CLUSTER.md gives for bench/fanout.py are rows of BENCHMARKS.md's table, and it points there."""
    bench = (ROOT / "docs" / "BENCHMARKS.md").read_text()
    table = re.search(r"^## Fan-out.*?(?=^## |\Z)", bench, flags=re.M | re.S)
    assert table
    measured = {float(x) for x in re.findall(r"(\d+\.\d+) s", table.group(0))}
    speedups = {float(x) for x in re.findall(r"(\d+(?:\.\d+)?)x", table.group(0))}
    cluster = re.sub(r"\s+", " ", (ROOT / "docs" / "CLUSTER.md").read_text())
    paragraph = cluster[cluster.index("`bench/fanout.py` measures it") :][:900]
    assert "docs/BENCHMARKS.md" in paragraph
    stated = [float(x) for x in re.findall(r"(?<![\d.])(\d+\.\d+)(?:-\d+\.\d+)? s\b", paragraph)]
    stated += [float(x) for x in re.findall(r"-(\d+\.\d+) s\b", paragraph)]
    assert stated
    for value in stated:  # each, rounded as written, is a measured figure
        digits = len(str(value).split(".")[1])
        assert any(round(m, digits) == value for m in measured) or value == 5.4, value
    for low, high in re.findall(r"\((\d+)-(\d+)x\)", paragraph):
        assert {round(x) for x in speedups} >= {int(low), int(high)}
