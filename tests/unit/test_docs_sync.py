"""The user docs (README.md, docs/*.md) stay true to the code: every metric name of docs/METRICS.md is what the
samplers emit and the exporter serves, every dynod config key is in docs/INSTALL_SYSTEMD.md with its flag and
default, every command-line option is documented and every option a documented command line uses exists, and the
rule table of docs/ANALYSIS_REPORT.md is the rules'. Each test fails when one side changes without the other."""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from dyno.client.cli import build_parser as cli_parser
from dyno.client.run import build_parser as run_parser
from dyno.daemon.config import DaemonConfig
from dyno.daemon.config import build_parser as dynod_parser
from dyno.daemon.history import History, Sample
from dyno.daemon.prometheus import DAEMON_GAUGES, DynoCollector, ExporterInfo, build_registry, daemon_gauges
from dyno.daemon.samplers import gpu_metrics
from dyno.daemon.samplers.base import Reading, SamplerState
from dyno.daemon.samplers.gpu_sim import SimGpuSampler
from dyno.daemon.samplers.host import HostSampler

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
USER_DOCS = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def _section(text: str, heading: str) -> str:
    """The body of the `## heading...` section (up to the next `## `)."""
    match = re.search(rf"^## {re.escape(heading)}.*?$(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, f"no section '## {heading}'"
    return match.group(1)


def _table_rows(text: str) -> list[list[str]]:
    """Cells of the markdown table rows in `text` (header and separator rows dropped)."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not re.match(r"^\|[\s:|-]+\|$", line):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return [r for r in rows if not r[0].startswith(("name", "key", "id", "`dyno-cli trace` option"))]


def _first_code(cell: str) -> str:
    match = re.match(r"`([^`]+)`", cell)
    assert match, f"table cell without a `name`: {cell!r}"
    return match.group(1)


# --- docs/METRICS.md ------------------------------------------------------------------------------------------------

METRICS = (DOCS / "METRICS.md").read_text()


def _metric_names(heading: str) -> set[str]:
    return {_first_code(row[0]) for row in _table_rows(_section(METRICS, heading))}


NET_HEADER = (
    "Inter-| Receive | Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets\n"
)


def _write_proc(root: Path, tick: int) -> None:
    """A /proc with two CPUs, one NIC and one disk; `tick` advances every counter."""
    (root / "net").mkdir(parents=True, exist_ok=True)
    cpu = " ".join(str(v * (tick + 1)) for v in (100, 0, 50, 800, 50, 0, 0, 0))
    (root / "stat").write_text(f"cpu {cpu} 0 0\ncpu0 {cpu} 0 0\ncpu1 {cpu} 0 0\nctxt 1\n")
    (root / "meminfo").write_text("MemTotal: 16000000 kB\nMemFree: 1000000 kB\nMemAvailable: 12000000 kB\n")
    n = 1000 * (tick + 1)
    (root / "net" / "dev").write_text(NET_HEADER + f"  eth0: {n} {n} 0 0 0 0 0 0 {n} {n} 0 0 0 0 0 0\n")
    (root / "diskstats").write_text(f" 8 0 sda {n} 0 {n} 0 {n} 0 {n} 0 0 {n} 0 0 0 0 0 0 0\n")
    (root / "loadavg").write_text("1.50 0.75 0.25 3/456 7890\n")
    (root / "uptime").write_text("12345.67 23456.78\n")


def _host_sample(tmp_path: Path) -> tuple[list[Reading], list[Reading]]:
    """The host sampler's readings of its second tick, and its totals (the exported counters)."""
    _write_proc(tmp_path, 0)
    now = [1000.0]
    sampler = HostSampler(proc_root=tmp_path, clock=lambda: now[0])
    _write_proc(tmp_path, 0)
    sampler.sample()  # primes the rates
    _write_proc(tmp_path, 1)
    now[0] += 1.0
    readings = sampler.sample()
    totals = sampler.totals()
    sampler.close()
    return readings, totals


def _host_readings(tmp_path: Path) -> list[Reading]:
    return _host_sample(tmp_path)[0]


def _sim_readings() -> list[Reading]:
    now = [50.0]
    sim = SimGpuSampler(2, clock=lambda: now[0])
    sim.sample()
    now[0] += 1.0
    readings = sim.sample()
    sim.close()
    return readings


def test_metrics_md_host_table_is_what_the_host_sampler_emits(tmp_path: Path) -> None:
    emitted = {r.name for r in _host_readings(tmp_path)}
    assert _metric_names("Host") == emitted


def test_metrics_md_gpu_table_is_gpu_metrics_and_the_simulator_emits_all_but_last_xid() -> None:
    documented = _metric_names("GPU")
    assert documented == gpu_metrics.GAUGE_METRICS | gpu_metrics.COUNTER_METRICS
    assert {r.name for r in _sim_readings()} == documented - {gpu_metrics.LAST_XID}  # "except gpu_last_xid"
    reasons = next(row[1] for row in _table_rows(_section(METRICS, "GPU")) if "throttle_reason_active" in row[0])
    assert re.findall(r"`(\w+)`", reasons)[1:] == list(gpu_metrics.THROTTLE_REASON_BITS)  # after `reason`
    cumulative = re.search(r"Cumulative ones \((.*?)\) are listed", METRICS, flags=re.S)
    assert cumulative and set(re.findall(r"`(\w+)`", cumulative.group(1))) == gpu_metrics.COUNTER_METRICS


def _served(tmp_path: Path) -> dict[str, set[str]]:
    """Sample name -> label names of what the exporter serves for a host sample and two simulated GPUs."""
    readings, totals = _host_sample(tmp_path)
    history = History(4)
    history.append(Sample(1_700_000_000_000, tuple(readings + _sim_readings())))
    states = [SamplerState("host", True, "procfs"), SamplerState("gpu", True, "sim", simulated=True)]
    daemon = lambda: daemon_gauges("node1", dict.fromkeys(DAEMON_GAUGES, 0.0))  # noqa: E731 - what app.py passes
    collector = DynoCollector(
        history, ExporterInfo("node1", "0.1.0"), lambda: states, extra=daemon, totals=lambda: totals
    )
    text = generate_latest(build_registry(collector))
    served: dict[str, set[str]] = {}
    for line in text.decode().splitlines():
        if line and not line.startswith("#"):
            name, _, rest = line.partition("{")
            served.setdefault(name.split()[0], set()).update(re.findall(r'(\w+)="', rest))
    return served


def test_metrics_md_prometheus_names_are_what_the_exporter_serves(tmp_path: Path) -> None:
    served = _served(tmp_path)
    rows = _table_rows(_section(METRICS, "Prometheus names"))
    documented = {_first_code(row[0]): (row[1], set(re.findall(r"`(\w+)`", row[2]))) for row in rows}
    # "dyno_gpu_last_xid only once an XID happened" (the simulator has none)
    assert set(served) == set(documented) - {"dyno_gpu_last_xid"}
    for name, (kind, labels) in documented.items():
        assert name.endswith("_total") == (kind == "counter"), name
        if name in served:
            assert served[name] == labels, name
    assert all("host" in served[n] for n in served)


def test_metrics_md_gives_promql_for_every_renamed_prometheus_series(tmp_path: Path) -> None:
    served = _served(tmp_path)
    # what the exporter served when every reading was exported under its own name
    readings = _host_readings(tmp_path) + _sim_readings()
    previous = {
        "dyno_" + n + ("_total" if n in gpu_metrics.COUNTER_METRICS else "") for n in {r.name for r in readings}
    }
    previous.add("dyno_" + gpu_metrics.LAST_XID)
    rows = _table_rows(_section(METRICS, "Prometheus series renamed"))
    documented = {_first_code(row[0]) for row in rows}
    assert documented == previous - set(served) - {"dyno_gpu_last_xid"}
    for row in rows:
        assert all(n in served for n in re.findall(r"\b(dyno_\w+)", " ".join(row[1:]))), row


# --- docs/INSTALL_SYSTEMD.md: dynod's keys, flags and defaults ------------------------------------------------------


def test_install_systemd_lists_every_config_key_with_its_flag_and_default() -> None:
    text = (DOCS / "INSTALL_SYSTEMD.md").read_text()
    rows = [r for r in _table_rows(text) if len(r) == 4]
    documented = {_first_code(r[0]): r for r in rows}
    keys = {f.name for f in fields(DaemonConfig)} - {"config_path"}
    assert set(documented) == keys
    flags = {s for a in dynod_parser()._actions for s in a.option_strings}
    defaults = DaemonConfig()
    for key, (_, flag, default, _meaning) in documented.items():
        assert _first_code(flag) == "--" + key.replace("_", "-") and _first_code(flag) in flags, key
        value = getattr(defaults, key)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):  # scalars: the TOML literal
            assert tomllib.loads(f"v = {_first_code(default)}")["v"] == value, key
        elif value is None and key not in ("agent_socket", "api_socket"):  # None stands for a computed default
            assert default == "unset", key


# --- command-line options ----------------------------------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


CLI = cli_parser()
COMMANDS = _subparsers(CLI)
PARSERS = {"dynod": dynod_parser(), "dyno-run": run_parser(), **{f"dyno-cli {c}": p for c, p in COMMANDS.items()}}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def test_every_command_line_option_is_documented() -> None:
    text = "\n".join(p.read_text() for p in USER_DOCS)
    missing = []
    for where, parser in PARSERS.items():
        for action in parser._actions:
            names = [s for s in action.option_strings if s.startswith("--") and s != "--help"]
            # an alias (--hostname for --host) or the --no- form is enough
            if names and not any(re.search(re.escape(n) + r"(?![\w-])", text) for n in names):
                missing.append(f"{where} {names[0]}")
    assert not missing, f"options in no user doc: {missing}"


def _command_lines(text: str) -> list[str]:
    """The lines of fenced code blocks and the inline code spans: what a user copies."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S))
    return [line for block in blocks for line in block.splitlines()] + inline


def _used_options(line: str) -> list[tuple[str, str]]:
    """(parser key, option) for each option given to dynod, dyno-run or a dyno-cli command in `line`: a command is
    a program name first in the line or after `;`, `&&`, a pipe or `$(`, past `sudo` and `VAR=value` words."""
    found = []
    for part in re.split(r";|&&|\|\|?|\$\(|\(", re.split(r"\s#", line)[0]):
        words = part.split()
        while words and (re.fullmatch(r"\w+=\S*", words[0]) or words[0] in ("$", "sudo", "eval", "exec")):
            words = words[1:]
        if not words or words[0] not in ("dynod", "dyno-run", "dyno-cli"):
            continue
        rest = " ".join(words[1:])
        key = words[0]
        if key == "dyno-run":
            rest = re.split(r"(?:^|\s)--(?:\s|$)", rest)[0]  # the wrapped command's own options follow `--`
        elif key == "dyno-cli":
            command = next((w for w in words[1:] if w in COMMANDS), None)
            if command is None:  # `dyno-cli --help`, `dyno-cli COMMAND --help`
                continue
            key = f"dyno-cli {command}"
        found += [(key, o) for o in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", rest)]
    return found


def test_options_on_documented_command_lines_exist() -> None:
    wrong = []
    for path in USER_DOCS:
        for line in _command_lines(path.read_text()):
            for key, option in _used_options(line):
                if option not in _options(PARSERS[key]) | {"--help", "--version"}:
                    wrong.append(f"{path.name}: {key} {option}: {line.strip()}")
    assert not wrong, wrong


def test_command_line_scan_sees_the_readme_examples() -> None:  # the scan above must not pass by finding nothing
    used = {u for line in _command_lines((ROOT / "README.md").read_text()) for u in _used_options(line)}
    assert {("dynod", "--sim-gpus"), ("dyno-cli trace", "--iterations"), ("dyno-run", "--job-id")} <= used
    assert ("dyno-run", "--nproc-per-node") not in used  # torchrun's, after `--`


# --- docs/ANALYSIS_REPORT.md: the rule table ----------------------------------------------------------------------


def test_analysis_report_rule_table_is_the_rules() -> None:
    from dyno.trace_analysis.rules import ALL_RULES

    table = _section((DOCS / "ANALYSIS_REPORT.md").read_text(), "Rules")
    rows = [r for r in _table_rows(table.split("###")[0]) if len(r) == 3]
    documented = [(_first_code(r[0]), r[1], r[2]) for r in rows]
    expected = [(r.id, r.title, "<br>".join(f"`{k}={v}`" for k, v in r.thresholds.items()) or "—") for r in ALL_RULES]
    assert documented == expected
