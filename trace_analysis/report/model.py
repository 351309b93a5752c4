"""The report data model: what ``analyze()`` returns and every renderer (text, JSON, HTML) reads.

``Report.to_dict()`` is the versioned JSON document described in docs/ANALYSIS_REPORT.md
(``{"schema": "dyno.trace_analysis.report", "version": 2, ...}``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from ..rules.base import Finding, Severity, ThresholdValue
from ..rules.engine import RuleOutcome
from .tables import GpuTables

__all__ = [
    "CPU_OP_TIME",
    "RANK_THRESHOLD",
    "SCHEMA",
    "SCHEMA_VERSION",
    "Breakdown",
    "DeviceBreakdown",
    "HostTime",
    "LoadProblem",
    "RankSummary",
    "Report",
    "StepStats",
    "TableRow",
    "Timeline",
]

SCHEMA = "dyno.trace_analysis.report"
SCHEMA_VERSION = 2  # 2: HTA's per-rank tables (``tables.GpuTables``); every v1 key kept with its meaning
# more ranks than this: the text and HTML reports show the cross-rank view (``rank_groups``), the JSON is one line
RANK_THRESHOLD = 16


_SHARES = ("idle", "compute", "non_compute", "communication", "memory", "exposed_communication")


def _share(part: float, whole: float) -> float:
    """`part` as a fraction of `whole`; 0 when the whole is empty."""
    return part / whole if whole > 0 else 0.0


def _pcts(us: Mapping[str, float], whole_us: float, parts: Sequence[str]) -> dict[str, float]:
    """`<part>_pct` for each of `parts`: its `<part>_us` in percent of `whole_us`, in the order of `parts`."""
    return {f"{k}_pct": 100.0 * _share(us[f"{k}_us"], whole_us) for k in parts}


class DeviceBreakdown(msgspec.Struct, frozen=True):
    """One GPU of a rank that drives several: its time over the rank's GPU span, µs (``Breakdown.devices``)."""

    device: int
    idle_us: float
    compute_us: float
    non_compute_us: float
    communication_us: float
    memory_us: float
    exposed_communication_us: float = 0.0

    def to_dict(self, span_us: float) -> dict[str, float | int]:
        d = _parts_us(self)
        out: dict[str, float | int] = {"device": self.device, **d}
        # 100 * x / span, not _pcts' 100 * (x / span): they round apart (x / span = 1 / 3: 33.333333333333336 against
        # 33.33333333333333, about a third of values), and a device's percents stay the JSON report's numbers
        for k in _SHARES:
            out[f"{k}_pct"] = 100.0 * d[f"{k}_us"] / span_us if span_us > 0 else 0.0
        return out


class Breakdown(msgspec.Struct, frozen=True):
    """GPU time over the GPU span (first to last GPU activity), µs. ``busy = compute + non_compute``.

    A rank driving several GPUs: each device over that span in ``devices`` (ascending), and the figures here are
    their mean (one GPU busy while the other idles is 50% idle, not 0%); ``devices`` is empty with one GPU."""

    span_us: float
    idle_us: float
    compute_us: float
    non_compute_us: float
    communication_us: float
    memory_us: float
    exposed_communication_us: float = 0.0  # the part of communication_us not under compute (in non_compute_us)
    # HTA's comm/comp overlap: the share of communication time under computation kernels; None without
    # communication (HTA: NaN). The exposed-comm finding's "overlap" is over its window, not this span.
    comm_overlap_share: float | None = None
    devices: tuple[DeviceBreakdown, ...] = ()

    def share(self, v: float) -> float:
        return _share(v, self.span_us)

    def to_dict(self) -> dict[str, object]:
        d = {"span_us": self.span_us, **_parts_us(self)}
        out: dict[str, object] = {**d, **_pcts(d, self.span_us, _SHARES)}
        out["comm_overlap_pct"] = None if self.comm_overlap_share is None else 100.0 * self.comm_overlap_share
        if self.devices:  # only for a rank with several GPUs: one-GPU reports keep their keys
            out["devices"] = [dv.to_dict(self.span_us) for dv in self.devices]
        return out


def _parts_us(b: DeviceBreakdown | Breakdown) -> dict[str, float]:
    """The parts of a GPU's time, µs, keyed `<part>_us` in the order of _SHARES (the JSON report's order)."""
    return {
        "idle_us": b.idle_us,
        "compute_us": b.compute_us,
        "non_compute_us": b.non_compute_us,
        "communication_us": b.communication_us,
        "memory_us": b.memory_us,
        "exposed_communication_us": b.exposed_communication_us,
    }


class StepStats(msgspec.Struct, frozen=True):
    """Step times. ``source``: "profiler_step" (ProfilerStep#N) or "optimizer" (between optimizer.step calls)."""

    source: str
    count: int
    mean_us: float
    median_us: float
    min_us: float
    max_us: float
    durations_us: tuple[float, ...]
    std_us: float = 0.0
    markers: int = 0  # the ProfilerStep annotations / optimizer.step calls the steps come from

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "count": self.count,
            "markers": self.markers,
            "std_us": self.std_us,
            "mean_us": self.mean_us,
            "median_us": self.median_us,
            "min_us": self.min_us,
            "max_us": self.max_us,
            "durations_us": list(self.durations_us),
        }


class HostTime(msgspec.Struct, frozen=True):
    """Where the host's time in the window went (``analyses.host_time``), µs: in CPU ops (any thread), in other
    traced host regions outside ops (annotations, Python frames, runtime calls), and in nothing traced."""

    window_us: float
    ops_us: float
    other_traced_us: float
    untraced_us: float

    def share(self, v: float) -> float:
        return _share(v, self.window_us)

    def to_dict(self) -> dict[str, float]:
        d = {
            "window_us": self.window_us,
            "ops_us": self.ops_us,
            "other_traced_us": self.other_traced_us,
            "untraced_us": self.untraced_us,
        }
        return {**d, **_pcts(d, self.window_us, ("ops", "other_traced", "untraced"))}


class TableRow(msgspec.Struct, frozen=True):
    """One row of a top table. ``share``: of all GPU work time (kernels) or of the window (CPU ops)."""

    name: str
    count: int
    total_us: float
    share: float
    self_us: float | None = None  # CPU ops: exclusive time
    kind: str | None = None  # kernels: COMMUNICATION / MEMORY / COMPUTATION / OTHER
    example_ts_us: float | None = None  # start of the longest instance

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "count": self.count,
            "total_us": self.total_us,
            "self_us": self.self_us,
            "share": self.share,
            "kind": self.kind,
            "example_ts_us": self.example_ts_us,
        }


class Timeline(msgspec.Struct, frozen=True):
    """GPU utilization per equal-width bin of one device: ``edges_us`` has ``len(utilization) + 1`` values."""

    device: int
    edges_us: tuple[float, ...]
    utilization: tuple[float, ...]

    def to_dict(self) -> dict[str, object]:
        return {"device": self.device, "edges_us": list(self.edges_us), "utilization": list(self.utilization)}


_TABLE_KEYS = ("idle_time_breakdown", "kernel_type_breakdown", "kernel_launch_stats", "queue_length_summary")

# RankSummary.cpu_ops_share_of when the CPU ops' summed time, not the window, is what their shares are of
CPU_OP_TIME = "CPU-op time"


class RankSummary(msgspec.Struct, frozen=True):
    rank: int
    source: str
    has_gpu: bool
    events: int
    span_us: float  # trace span (all events)
    window_kind: str  # "N profiler steps" | "trace span" (the JSON value)
    window_us: float
    steps: StepStats | None
    breakdown: Breakdown | None
    top_kernels: tuple[TableRow, ...] = ()
    top_cpu_ops: tuple[TableRow, ...] = ()
    timelines: tuple[Timeline, ...] = ()
    window_name: str = ""  # the window in words for text ("1 profiler step"); window_kind when not given
    # what top_cpu_ops' shares are of: "window", or CPU_OP_TIME when the ops' summed time is longer than the window
    # (threads running ops in parallel); in the JSON only then, as "cpu_ops_share_of"
    cpu_ops_share_of: str = "window"
    tables: GpuTables | None = None  # HTA's tables; None for a rank without GPU activity (JSON: null each)
    host_time: HostTime | None = None

    @property
    def window_text(self) -> str:
        return self.window_name or self.window_kind

    def to_dict(self) -> dict[str, object]:
        return {
            "rank": self.rank,
            "source": self.source,
            "has_gpu": self.has_gpu,
            "events": self.events,
            "span_us": self.span_us,
            "window": {"kind": self.window_kind, "us": self.window_us},
            "steps": self.steps.to_dict() if self.steps else None,
            "breakdown": self.breakdown.to_dict() if self.breakdown else None,
            "top_kernels": [r.to_dict() for r in self.top_kernels],
            "top_cpu_ops": [r.to_dict() for r in self.top_cpu_ops],
            "gpu_utilization_timeline": [t.to_dict() for t in self.timelines],
            **({"cpu_ops_share_of": self.cpu_ops_share_of} if self.cpu_ops_share_of != "window" else {}),
            **(self.tables.to_dict() if self.tables else dict.fromkeys(_TABLE_KEYS)),
            "host_time": self.host_time.to_dict() if self.host_time else None,
        }


class LoadProblem(msgspec.Struct, frozen=True):
    path: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


class Report(msgspec.Struct, frozen=True):
    sources: tuple[str, ...]
    ranks: tuple[RankSummary, ...]
    findings: tuple[Finding, ...]
    rules: tuple[RuleOutcome, ...]
    thresholds: Mapping[str, Mapping[str, ThresholdValue]]
    errors: tuple[LoadProblem, ...] = ()
    generated_by: str = "dyno"
    meta: Mapping[str, object] = msgspec.field(default_factory=dict)

    def findings_of(self, rule_id: str) -> list[Finding]:
        return [f for f in self.findings if f.rule_id == rule_id]

    def max_severity(self) -> Severity | None:
        return max((f.severity for f in self.findings), key=lambda s: s.rank, default=None)

    @property
    def rule_ids(self) -> Sequence[str]:
        return sorted({o.rule_id for o in self.rules})

    def rules_not_run(self) -> tuple[tuple[RuleOutcome, ...], tuple[str, ...]]:
        """(outcomes of the rules that could not run for a reason worth a line each: missing data, an error; the
        ids of those merely not applicable to these traces, e.g. GPU rules on a CPU-only trace, once each)."""
        worth: list[RuleOutcome] = []
        na: set[str] = set()
        for o in self.rules:
            if o.status == "skipped" and o.reason.startswith("not applicable"):
                na.add(o.rule_id)
            elif o.status in ("skipped", "error"):
                worth.append(o)
        return tuple(worth), tuple(sorted(na))

    def to_dict(self) -> dict[str, object]:
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "generated_by": self.generated_by,
            "sources": list(self.sources),
            "ranks": [r.to_dict() for r in self.ranks],
            "findings": [f.to_dict() for f in self.findings],
            "rules": [o.to_dict() for o in self.rules],
            "thresholds": {k: dict(v) for k, v in self.thresholds.items()},
            "errors": [e.to_dict() for e in self.errors],
            "meta": dict(self.meta),
        }
