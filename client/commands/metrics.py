"""dyno-cli metrics: the newest sample as tables, a live view (--watch), or JSON history."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from dyno.argtypes import INT64_MAX, number
from dyno.client.commands._common import host_entry, host_table, print_json, print_out, proto_to_dict
from dyno.client.commands._hosts import (
    FANOUT_EXIT_CODES,
    add_host_command,
    cluster_from_args,
    fanout_exit_code,
    print_failures,
    single_client,
    usage_error,
)
from dyno.client.format import format_labels, format_value, human_bytes, table
from dyno.client.watch_screen import Block, fit_screen
from dyno.exit_codes import INTERRUPTED, OK
from dyno.request_limits import (
    MAX_METRICS_LIMIT,
    MAX_METRICS_RESPONSE_BYTES,
    MAX_NAME_PATTERN_LEN,
    MAX_NAME_PATTERNS,
)

if TYPE_CHECKING:  # the client stack (grpc, protobuf) is loaded by run() alone: `metrics --help` needs none of it
    from dyno.client.cluster import HostResult
    from dyno.v1 import dyno_pb2

_CLEAR = "\x1b[H\x1b[2J"
# --watch runs until Ctrl-C: that is its normal end, so it exits 0 then
EXIT_CODES = {
    **FANOUT_EXIT_CODES,
    OK: FANOUT_EXIT_CODES[OK] + ", or --watch ended by Ctrl-C or SIGTERM",
    INTERRUPTED: "interrupted (Ctrl-C or SIGTERM; they end --watch with 0)",
}


def _patterns(text: str) -> list[str]:
    """The --names patterns of one word, comma-separated as --hosts and --pids take lists (no metric name has a
    comma; "gpu_*,cpu_*" was one pattern that matched nothing), each one the daemons accept (they refuse the whole
    request otherwise)."""
    patterns = [text] if "[" in text else text.split(",")  # a comma inside [...] belongs to the pattern
    for pattern in patterns:
        if not 1 <= len(pattern) <= MAX_NAME_PATTERN_LEN:
            raise argparse.ArgumentTypeError(
                f"each pattern must be 1-{MAX_NAME_PATTERN_LEN} characters: {pattern[:40]!r}"
            )
    return patterns


def register(sub: argparse._SubParsersAction) -> None:
    p = add_host_command(
        sub,
        "metrics",
        description="Show the newest sample of a daemon's metrics as tables (one per kind of entity: GPUs, CPUs, "
        "network devices, ...). --watch redraws live as one daemon samples; --json prints samples from the "
        "daemon's history. With several hosts (--hosts, --hostfile, --slurm-job): one GPU table and one host "
        "table across all of them (every host has a row there, a failed one with its error type); with --names, one "
        "table of the metrics that matched, a row per host and entity.",
        codes=EXIT_CODES,
    )
    p.add_argument(
        "--names",
        action="extend",
        default=[],
        type=_patterns,
        metavar="PATTERN",
        help=f"only metrics matching this fnmatch pattern, e.g. 'gpu_*' (repeatable, or comma-separated: "
        f"'gpu_util*,cpu_user*'; at most {MAX_NAME_PATTERNS} patterns of 1-{MAX_NAME_PATTERN_LEN} characters)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print samples as JSON (with --watch: one JSON object per line; numbers are JSON numbers, the schema "
        "is in docs/API.md); dyno-cli gathers a daemon's pages up to at most "
        f"{human_bytes(MAX_METRICS_RESPONSE_BYTES)} of samples, beyond that the host fails saying about how many of "
        "the newest fit (narrow with --limit, --since-ms or --names)",
    )
    p.add_argument(
        "--limit",
        type=number(int, ge=0, le=MAX_METRICS_LIMIT),
        default=None,
        metavar="N",
        help="with --json: the newest N samples from history (0 = all; default 1, or all with --since-ms; at most "
        f"{MAX_METRICS_LIMIT})",
    )
    p.add_argument(
        "--since-ms",
        type=number(int, ge=0, le=INT64_MAX),
        default=0,
        metavar="UNIX_MS",
        help="with --json: samples after this time",
    )
    p.add_argument(
        "--watch",
        action="store_true",
        help="redraw live from the daemon's metric stream (Ctrl-C ends); on a terminal one screen fitted to its size "
        "(the host's totals and a row per GPU, or with --names the metrics that match; a last line says what did "
        "not fit)",
    )
    p.set_defaults(func=run)


def _blocks(sample: dyno_pb2.Sample) -> list[Block]:
    """Group metrics by their label names (gpu, cpu, device, none...): one table each. Rows are the entities when
    there are more entities than metrics (per-core CPU), else the metrics (a few GPUs)."""
    groups: dict[tuple[str, ...], dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for m in sample.metrics:
        if m.name == "gpu_throttle_reason_active" and not m.value:
            continue  # one row per inactive reason is noise; active ones are shown
        keys = tuple(sorted(k for k in m.labels if k not in ("uuid", "host")))
        entity = format_labels({k: m.labels[k] for k in keys}) or "host"
        groups[keys][m.name][entity] = m.value
    blocks = []
    for keys in sorted(groups, key=lambda k: (len(k), k)):
        by_name = groups[keys]
        entities = sorted({e for v in by_name.values() for e in v}, key=_natural)
        names = sorted(by_name)
        what = f"{','.join(keys) or 'host'} table"
        if len(entities) > len(names):
            rows = [(e, *[format_value(n, by_name[n][e]) if e in by_name[n] else "-" for n in names]) for e in entities]
            blocks.append(Block((",".join(keys) or "entity", *names), tuple(rows), what))
        else:
            rows = [(n, *[format_value(n, by_name[n][e]) if e in by_name[n] else "-" for e in entities]) for n in names]
            blocks.append(Block(("metric", *entities), tuple(rows), what))
    return blocks


def _title(sample: dyno_pb2.Sample, hostname: str) -> str:
    when = datetime.fromtimestamp(sample.timestamp_ms / 1000).strftime("%Y-%m-%d %H:%M:%S")
    return f"{hostname}  sample at {when}  ({len(sample.metrics)} values)"


def render(sample: dyno_pb2.Sample, hostname: str = "") -> str:
    """Every metric of `sample`: one table per kind of entity (_blocks)."""
    out = [_title(sample, hostname)]
    for b in _blocks(sample):
        out += ["", table(list(b.headers), [list(r) for r in b.rows])]
    return "\n".join(out)


def _top_blocks(sample: dyno_pb2.Sample, hostname: str) -> list[Block]:
    """The live view's tables: the host's totals, and a row per GPU with the columns of _GPU_COLUMNS (and
    _GPU_MORE as the terminal's width allows)."""
    gpus, vals = _host_values(sample)
    host_row = (hostname, *_cells(vals, _HOST_COLUMNS))
    blocks = [Block(("HOST", *[h for h, _ in _HOST_COLUMNS]), (host_row,), "host table", text=("HOST",))]
    if gpus:
        columns = [*_GPU_COLUMNS, *_GPU_MORE]
        rows = [(gpu, *_cells(gpus[gpu], columns)) for gpu in sorted(gpus, key=int)]
        blocks.append(Block(("GPU", *[h for h, _ in columns]), tuple(rows), "GPU table", text=("GPU",)))
    return blocks


def watch_screen(sample: dyno_pb2.Sample, hostname: str, names: Sequence[str], width: int, height: int) -> str:
    """One --watch screen within `width` x `height`: with --names every matched metric (as `render`), else the
    host's totals and a row per GPU; the last line says what did not fit (dyno.client.watch_screen)."""
    if names:
        return fit_screen(_title(sample, hostname), _blocks(sample), width, height)
    other = "per-CPU, network, disk and other metrics (--names PATTERN shows any)"
    title = _title(sample, hostname)
    if any(m.labels.get("simulated") == "true" for m in sample.metrics):  # never passed for real GPUs
        title += "  simulated GPUs"
    return fit_screen(title, _top_blocks(sample, hostname), width, height, other)


def _natural(entity: str) -> tuple:
    """cpu=2 before cpu=10: numbers compare as numbers (tagged so they never meet strings)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in entity.replace("=", ",").split(","))


_GPU_COLUMNS = [
    ("UTIL", "gpu_utilization_percent"),
    ("SM ACTIVE", "gpu_sm_active_percent"),
    ("MEM USED", "gpu_memory_used_bytes"),
    ("POWER W", "gpu_power_watts"),
    ("TEMP C", "gpu_temperature_celsius"),
    ("SM MHZ", "gpu_sm_clock_mhz"),
]
# the live view's further GPU columns, shown when the terminal is wide enough
_GPU_MORE = [
    ("MEM UTIL", "gpu_memory_utilization_percent"),
    ("TENSOR", "gpu_tensor_active_percent"),
    ("PCIE RX", "gpu_pcie_rx_bytes_per_second"),
    ("PCIE TX", "gpu_pcie_tx_bytes_per_second"),
]
_HOST_COLUMNS = [
    ("CPU USER", "cpu_user_percent"),
    ("CPU SYS", "cpu_system_percent"),
    ("IOWAIT", "cpu_iowait_percent"),
    ("MEM USED", "memory_used_percent"),
    ("LOAD 1M", "load_average_1m"),
]


def _cells(values: Mapping[str, float], columns: Sequence[tuple[str, str]]) -> list[str]:
    """The cells of `columns` ((header, metric name) pairs): each metric's value in `values` formatted, "-" where
    it has none."""
    return [format_value(n, values[n]) if n in values else "-" for _, n in columns]


def _host_values(sample: dyno_pb2.Sample) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """A sample's per-GPU values (by GPU index) and its host-wide values (CPU total, memory, load)."""
    gpus: dict[str, dict[str, float]] = defaultdict(dict)
    hostvals: dict[str, float] = {}
    for m in sample.metrics:
        if "gpu" in m.labels and "reason" not in m.labels:
            gpus[m.labels["gpu"]][m.name] = m.value
        elif m.labels.get("cpu", "total") == "total" and not set(m.labels) - {"cpu"}:
            hostvals[m.name] = m.value
    return gpus, hostvals


def _host_row(resp: dyno_pb2.GetMetricsResponse) -> list[str]:
    if not resp.samples:
        return ["no samples yet", *["-"] * (len(_HOST_COLUMNS) - 1)]
    _, vals = _host_values(resp.samples[-1])
    return _cells(vals, _HOST_COLUMNS)


def render_many(results: Sequence[HostResult[dyno_pb2.GetMetricsResponse]]) -> str:
    """One GPU table (a row per host and GPU) and one host table with a row for every host, failed ones (their
    error type) and ones without a sample yet included, as in `status`."""
    gpu_rows = []
    for r in results:
        if not r.ok or not r.answer.samples:
            continue
        sample = r.answer.samples[-1]
        gpus, _ = _host_values(sample)
        # a simulated GPU (--gpu-backend sim) never passes for a real one in a fleet table
        simulated = {
            m.labels["gpu"] for m in sample.metrics if m.labels.get("simulated") == "true" and "gpu" in m.labels
        }
        for gpu in sorted(gpus, key=int):
            name = f"{gpu} (simulated)" if gpu in simulated else gpu
            gpu_rows.append([str(r.host), name, *_cells(gpus[gpu], _GPU_COLUMNS)])
    out = []
    if gpu_rows:
        out += [table(["HOST", "GPU", *[h for h, _ in _GPU_COLUMNS]], gpu_rows), ""]
    out.append(host_table(["HOST", *[h for h, _ in _HOST_COLUMNS]], results, _host_row))
    return "\n".join(out)


def render_selected(results: Sequence[HostResult[dyno_pb2.GetMetricsResponse]], names: Sequence[str]) -> str:
    """Several hosts with --names: the metrics that matched, one column each, a row per host and entity (GPU, CPU,
    device...). The fixed GPU and host tables showed only dashes for anything outside their columns (net_*)."""
    values: dict[tuple[int, str], dict[str, float]] = defaultdict(dict)
    metric_names: set[str] = set()
    for i, r in enumerate(results):
        if r.ok and r.answer.samples:
            for m in r.answer.samples[-1].metrics:
                entity = format_labels({k: v for k, v in m.labels.items() if k not in ("uuid", "host")})
                values[(i, entity)][m.name] = m.value
                metric_names.add(m.name)
    answered = sum(r.ok for r in results)
    if not metric_names:
        return f"no metric matches {' '.join(names)} on {answered} host(s)" if answered else ""
    columns = sorted(metric_names)
    rows: list[list[object]] = []
    for i, r in enumerate(results):
        if not r.ok:
            rows.append([str(r.host), r.error_type or "failed", *["-"] * len(columns)])
            continue
        entities = sorted((e for (j, e) in values if j == i), key=_natural)
        if not entities:
            rows.append([str(r.host), "no samples yet" if not r.answer.samples else "no match", *["-"] * len(columns)])
        for e in entities:
            vals = values[(i, e)]
            rows.append([str(r.host), e or "-", *[format_value(n, vals[n]) if n in vals else "-" for n in columns]])
    return table(["HOST", "ENTITY", *columns], rows, text=("HOST", "ENTITY"))


def _watch(args: argparse.Namespace) -> int:
    with single_client(args, "--watch follows one daemon (without --watch: one table across hosts)") as c:
        try:
            for sample in c.stream_metrics(args.names):
                if args.json:  # one JSON object per line, for tools reading a pipe
                    sys.stdout.write(json.dumps(proto_to_dict(sample), separators=(",", ":")) + "\n")
                elif sys.stdout.isatty():  # redrawn in place, within the terminal's size (read at each redraw)
                    size = shutil.get_terminal_size()
                    sys.stdout.write(_CLEAR + watch_screen(sample, c.target, args.names, size.columns, size.lines))
                else:  # into a pipe or file: every metric, one block after another
                    sys.stdout.write("\n" + render(sample, c.target) + "\n")
                sys.stdout.flush()
        except KeyboardInterrupt:
            pass
    return OK


def run(args: argparse.Namespace) -> int:
    if len(args.names) > MAX_NAME_PATTERNS:  # checked here, before any host is called, as the daemons would
        usage_error(f"--names: at most {MAX_NAME_PATTERNS} patterns (got {len(args.names)})")
    history = [flag for flag, given in (("--limit", args.limit is not None), ("--since-ms", args.since_ms)) if given]
    if history and (args.watch or not args.json):  # they were ignored: `--limit 10` showed one sample
        usage_error(
            f"{' and '.join(history)} {'select' if len(history) > 1 else 'selects'} samples from history for --json "
            "without --watch (the tables and --watch show the newest sample)"
        )
    if args.watch:
        return _watch(args)
    if args.limit is None:  # --since-ms alone means every sample since then
        limit = 0 if args.since_ms else 1
    else:
        limit = args.limit
    with cluster_from_args(args) as cluster:
        results = cluster.metrics(args.names, since_ms=args.since_ms, limit=limit)
    ok = [r for r in results if r.ok]
    if args.json:
        if len(results) == 1 and ok:
            print_json(proto_to_dict(ok[0].value))
        else:
            print_json([host_entry(r, proto_to_dict(r.value) if r.ok else {"samples": []}) for r in results])
    elif len(results) == 1 and ok:
        resp = ok[0].answer
        if resp.samples and args.names and not resp.samples[-1].metrics:
            # the daemon filters each sample's values: a sample with none left means nothing matched
            print_out(f"{resp.hostname}: no metric matches {' '.join(args.names)}")
        elif resp.samples:
            print_out(render(resp.samples[-1], resp.hostname))
        else:
            print_out(f"{resp.hostname}: no samples yet")
    elif len(results) > 1:
        text = render_selected(results, args.names) if args.names else render_many(results)
        if text:
            print_out(text)
    print_failures(results)
    return fanout_exit_code(results)
