"""Benchmark: the job-wide report of 1,024 ranks from the hosts' summaries (dyno-cli trace --summaries) vs pulling and
analysing the raw traces of 64 ranks (dyno-cli analyze on the folder).

Not a test. Everything is generated into a temporary directory (removed at the end; never committed):

- ``--bases`` perturbed copies of a shared trace (``--source``, default trace_filter's rank 0, a real rank of a
  128-rank job; each copy's timeline stretched by a factor within ±``--noise``) and one planted slow (stretched by
  ``--slow-factor``), analysed as a host's worker does (``api.analyze_rank``, every rule);
- 1,024 ranks' parts (``--ranks``): rank r is base r mod ``--bases`` renumbered, rank ``--slow`` the slow one; encoded
  as ``--hosts`` hosts of ranks/hosts ranks each would send them (``part_codec.encode_parts``, 3 MiB at most, inside
  a dyno.v1.TraceSummary, serialized): what dyno-cli receives from GetTraceSummary;
- the raw traces of ``--raw-ranks`` ranks (the same source, perturbed the same way, ``many_ranks.generate``).

Timed, each as a whole fresh process (bytecode cached, as an installed dyno runs), ``--repeat`` times:

- merge: read the hosts' answers from disk, parse each TraceSummary, decode its parts
  (``client.trace.summaries.apply_answer``) and merge them into the job-wide report (``merge_report``: the cross-rank
  rules over all ranks); "+ render text": the same, then the report rendered as text (the whole `dyno-cli trace
  --summaries` path after the RPCs: what it prints without --json); "+ render text and JSON": the text and the JSON
  (what --json adds; the process prints its phases: imports, decode, merge, text, JSON).
- analyze: ``dyno-cli analyze --json DIR`` on the raw folder (reading the files from disk: "pulling" them costs at
  least that; a process per core).

Each row: median and least wall time, median CPU time (user + system, the workers' included) and the peak RSS
(ru_maxrss from os.wait4: the largest single process). CPU time is the steadier figure on a shared machine.

    python bench/summary_merge.py [--ranks 1024] [--hosts 128] [--raw-ranks 64] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import many_ranks
from bench_common import bytecode_env, dyno_cli

REPO = Path(__file__).resolve().parent.parent

_CHILD = r"""
import json, struct, sys, time
what = sys.argv[2]
t0 = time.perf_counter()
from dyno.numpy_import import import_numpy_single_threaded
import_numpy_single_threaded()
from dyno.client.hosts import Host
from dyno.client.trace.summaries import HostSummary, apply_answer, merge_report
from dyno.gc_pause import gc_paused
from dyno.trace_analysis.report import render_json, render_text
from dyno.v1 import dyno_pb2

def decode(data):
    hosts, at = [], 0
    while at < len(data):
        (n,) = struct.unpack_from("<I", data, at)
        h = HostSummary(Host(f"gpu{len(hosts):03d}", 1778))
        apply_answer(h, dyno_pb2.TraceSummary.FromString(data[at + 4 : at + 4 + n]))
        assert h.merged, h.error
        hosts.append(h)
        at += 4 + n
    return hosts

t1 = time.perf_counter()
import atexit, gc
atexit.register(gc.freeze)  # as dyno-cli trace --summaries: no collection over the parts at the exit
with gc_paused():  # as dyno-cli trace --summaries gathers, merges and renders
    with open(sys.argv[1], "rb") as f:
        hosts = decode(f.read())
    t2 = time.perf_counter()
    report = merge_report(hosts)
    t3 = time.perf_counter()
    text = render_text(report) if what != "merge" else ""
    t4 = time.perf_counter()
    doc = render_json(report) if what == "render" else ""
    t5 = time.perf_counter()
print(json.dumps({
    "imports_s": t1 - t0, "decode_s": t2 - t1, "merge_s": t3 - t2, "text_s": t4 - t3, "json_s": t5 - t4,
    "ranks": len(report.ranks), "hosts": len(hosts), "text_bytes": len(text), "json_bytes": len(doc),
    "straggler": [f.rank for f in report.findings_of("straggler")],
}))
"""


def base_parts(source: Path, tmp: Path, bases: int, noise: float, slow_factor: float) -> tuple[list[Any], Any]:
    """``bases`` perturbed parts of ``source`` and one slow one, analysed as a host's worker does."""
    from dyno.trace_analysis.api import analyze_rank
    from dyno.trace_analysis.loader import load_traces
    from dyno.trace_analysis.rules import select_rules
    from dyno.trace_analysis.rules.engine import resolve_rule_thresholds

    folder = tmp / "bases"
    many_ranks.generate(source, folder, bases + 1, bases, slow_factor, noise)
    rules, resolved = select_rules(None), resolve_rule_thresholds(None)
    parts = [analyze_rank(t, rules, resolved) for t in load_traces([str(folder)])]
    return parts[:bases], parts[bases]


def renumbered(part: Any, rank: int) -> Any:
    """``part`` as rank ``rank``'s (its summary, outcomes, findings and digest say the new rank)."""
    from msgspec.structs import replace

    def finding(f: Any) -> Any:
        return replace(f, rank=rank) if f.rank is not None else f

    rules = tuple((replace(o, rank=rank), tuple(finding(f) for f in fs)) for o, fs in part.rules)
    digest = part.digest
    if digest is not None:
        timing = digest.timing and replace(digest.timing, rank=rank)
        digest = replace(digest, rank=rank, timing=timing)
    return replace(part, rank=rank, summary=replace(part.summary, rank=rank), rules=rules, digest=digest)


def host_answers(bases: list[Any], slow: Any, ranks: int, hosts: int, slow_rank: int, out: Path) -> tuple[int, bool]:
    """The hosts' GetTraceSummary answers, length-prefixed in ``out``; (their total bytes, whether any thinned)."""
    from dyno.trace_analysis.host_summary import DEFAULT_MAX_PARTS_BYTES
    from dyno.trace_analysis.part_codec import encode_parts
    from dyno.trace_summary import AnalysisState, TraceSummary
    from dyno.trace_summary_pb import summary_to_proto

    per_host = ranks // hosts
    total, thinned_any = 0, False
    with out.open("wb") as f:
        for h in range(hosts):
            parts = [
                renumbered(slow if r == slow_rank else bases[r % len(bases)], r)
                for r in range(h * per_host, (h + 1) * per_host)
            ]
            data, thinned = encode_parts(parts, DEFAULT_MAX_PARTS_BYTES)
            thinned_any |= thinned
            summary = TraceSummary(trace_id="bench", hostname=f"gpu{h:03d}", state=AnalysisState.DONE)
            msg = summary_to_proto(summary, data, thinned).SerializeToString()
            f.write(struct.pack("<I", len(msg)) + msg)
            total += len(msg)
    return total, thinned_any


def wait_rss(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, bytes]:
    """(wall s, CPU s, peak RSS MiB, stdout) of one process: its own user + system time and ru_maxrss (os.wait4)."""
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out_f, stderr=err_f, cwd=REPO, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read(), err_f.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} exited {proc.returncode}: {err.decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", choices=sorted(many_ranks.SOURCES), default="trace_filter")
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--hosts", type=int, default=128)
    ap.add_argument("--bases", type=int, default=16, help="distinct perturbed ranks the 1,024 are made of")
    ap.add_argument("--slow", type=int, default=517, help="the rank planted slow")
    ap.add_argument("--slow-factor", type=float, default=1.3)
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--raw-ranks", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    if args.ranks % args.hosts:
        ap.error("--ranks must be a multiple of --hosts")

    tmp = Path(tempfile.mkdtemp(prefix="dyno-summary-merge-"))
    env = bytecode_env(tmp / "pycache")
    source = many_ranks.TRACES / many_ranks.SOURCES[args.source]
    try:
        t0 = time.perf_counter()
        bases, slow = base_parts(source, tmp, args.bases, args.noise, args.slow_factor)
        answers = tmp / "answers.bin"
        wire, thinned = host_answers(bases, slow, args.ranks, args.hosts, args.slow, answers)
        raw = tmp / "raw"
        many_ranks.generate(source, raw, args.raw_ranks, 5, args.slow_factor, args.noise)
        raw_bytes = sum(f.stat().st_size for f in raw.iterdir())
        print(
            f"{args.ranks} ranks of {args.source} as {args.hosts} hosts x {args.ranks // args.hosts} ranks: "
            f"{wire / 2**20:.2f} MiB of GetTraceSummary answers ({wire / args.ranks / 1024:.1f} KiB/rank, thinned: "
            f"{thinned}); raw traces of {args.raw_ranks} ranks: {raw_bytes / 2**20:.1f} MiB gzip "
            f"({raw_bytes / args.raw_ranks / 1024:.0f} KiB/rank); generated in {time.perf_counter() - t0:.1f} s; "
            f"usable cores: {len(os.sched_getaffinity(0))}"
        )
        merge_cmd = [sys.executable, "-c", _CHILD, str(answers), "merge"]
        text_cmd = [sys.executable, "-c", _CHILD, str(answers), "text"]
        render_cmd = [sys.executable, "-c", _CHILD, str(answers), "render"]
        analyze_cmd = [*dyno_cli(), "analyze", "--json", str(raw)]
        for cmd in (render_cmd, analyze_cmd):
            wait_rss(cmd, env)  # fills the bytecode cache
        runs: dict[str, list[tuple[float, float, float, bytes]]] = {
            "merge": [],
            "text": [],
            "render": [],
            "analyze": [],
        }
        for _ in range(args.repeat):
            cmds = (("merge", merge_cmd), ("text", text_cmd), ("render", render_cmd), ("analyze", analyze_cmd))
            for name, cmd in cmds:
                runs[name].append(wait_rss(cmd, env))
        phases = json.loads(runs["render"][0][3])
        named = {
            "merge": f"ranks {json.loads(runs['merge'][0][3])['straggler']}",
            "text": f"ranks {json.loads(runs['text'][0][3])['straggler']}",
            "render": f"ranks {phases['straggler']}",
            "analyze": many_ranks.straggler(runs["analyze"][0][3]),
        }
        labels = {
            "merge": f"merge {args.ranks} ranks (summaries)",
            "text": "  + render text",
            "render": "  + render text and JSON",
            "analyze": f"analyze {args.raw_ranks} ranks (raw traces)",
        }
        print(f"\n{'run':<34} {'median s':>9} {'min s':>7} {'CPU s':>6} {'peak MiB':>9}  straggler named")
        for name, rs in runs.items():
            print(
                f"{labels[name]:<34} {statistics.median(r[0] for r in rs):>9.2f} {min(r[0] for r in rs):>7.2f} "
                f"{statistics.median(r[1] for r in rs):>6.2f} {max(r[2] for r in rs):>9.0f}  {named[name]}"
            )
        print(
            f"phases (first render run, wall): imports {phases['imports_s']:.3f} s, parse + decode "
            f"{phases['decode_s']:.3f} s, merge {phases['merge_s']:.3f} s, render text {phases['text_s']:.3f} s "
            f"({phases['text_bytes'] / 1024:.1f} KiB), JSON {phases['json_s']:.3f} s "
            f"({phases['json_bytes'] / 2**20:.1f} MiB)"
        )
        m_wall = statistics.median(r[0] for r in runs["merge"])
        m_rss = max(r[2] for r in runs["merge"])
        a_wall = statistics.median(r[0] for r in runs["analyze"])
        per_merge, per_raw = m_wall / args.ranks * 1000, a_wall / args.raw_ranks * 1000
        print(
            f"per rank: {per_merge:.2f} ms merged vs {per_raw:.1f} ms analysed from raw ({per_raw / per_merge:.0f}x); "
            f"{args.ranks} ranks merged in {m_wall / a_wall:.2f}x the time of analysing {args.raw_ranks} raw; bytes to "
            f"the client per rank: {raw_bytes / args.raw_ranks / (wire / args.ranks):.0f}x fewer than the gzip traces"
        )
        target = "met" if m_wall < 1.0 and m_rss < 200 else "NOT met"
        print(f"target (decode + merge of {args.ranks} ranks < 1 s and < 200 MB): {target}")
        t_wall = statistics.median(r[0] for r in runs["text"])
        target = "met" if t_wall < 1.0 and phases["text_bytes"] < 200_000 else "NOT met"
        print(f"target (decode + merge + render text of {args.ranks} ranks < 1 s, text < 200 KB): {target}")
        print("peak MiB: the process's ru_maxrss (analyze: its largest process, the parent or a worker)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
