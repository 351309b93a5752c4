"""Prometheus text exposition of the latest sample (prometheus_client, own registry, own HTTP port)."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import RestrictedRegistry

from dyno.daemon.dcgm_view import dcgm_families
from dyno.daemon.exposition import make_app
from dyno.daemon.history import History
from dyno.daemon.metrics_http import MetricsHTTPServer
from dyno.daemon.prom_series import SERIES
from dyno.daemon.samplers.base import GpuDevice, Reading, SamplerState

__all__ = [
    "PREFIX",
    "ExporterInfo",
    "DynoCollector",
    "build_registry",
    "DAEMON_GAUGES",
    "daemon_gauges",
    "serve_metrics",
]

log = logging.getLogger(__name__)
PREFIX = "dyno_"


@dataclass(frozen=True)
class ExporterInfo:
    hostname: str
    version: str


class DynoCollector:
    """Turns the newest history sample and the samplers' cumulative counters (`totals`) into metric families named
    by prom_series.SERIES (readings it does not list are not exported). Every series gets a `host` label; GPU series
    from a simulated backend get `simulated="true"` so they can never be mistaken for hardware."""

    def __init__(
        self,
        history: History,
        info: ExporterInfo,
        sampler_states: Callable[[], Sequence[SamplerState]],
        extra: Callable[[], Iterable[Metric]] = lambda: (),
        stalled: Callable[[], bool] = lambda: False,
        totals: Callable[[], Iterable[Reading]] = lambda: (),
        dcgm_devices: Callable[[], Sequence[GpuDevice]] | None = None,
        gpu_holders: Callable[[], Mapping[int, Sequence[str]]] = dict,
    ) -> None:
        self._history = history
        self._info = info
        self._states = sampler_states
        self._extra = extra
        self._stalled = stalled
        self._totals = totals
        self._dcgm_devices = dcgm_devices  # None: no DCGM-compatible series (dcgm_metrics off)
        self._gpu_holders = gpu_holders  # GPU index -> the job ids holding it: the DCGM view's hpc_job

    def _families(self, readings: Iterable[Reading], simulated_gpu: bool) -> list[Metric]:
        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
        label_names: dict[str, tuple[str, ...]] = {}
        for r in readings:
            series = SERIES.get(r.name)
            if series is None:
                continue  # a per-interval rate: its counter is exported instead (prom_series.RATE_READINGS)
            labels = dict(r.labels)
            labels["host"] = self._info.hostname
            if simulated_gpu and r.name.startswith("gpu_"):
                labels.setdefault("simulated", "true")
            keys = tuple(sorted(labels))
            fam = families.get(r.name)
            if fam is None:
                # counters are exposed with the _total suffix (prometheus_client adds it)
                cls = CounterMetricFamily if series.kind == "counter" else GaugeMetricFamily
                fam = cls(PREFIX + series.name, series.help, labels=keys)
                families[r.name] = fam
                label_names[r.name] = keys
            elif keys != label_names[r.name]:
                log.debug("dropping %s with inconsistent labels %s", r.name, keys)
                continue
            fam.add_metric([labels[k] for k in keys], series.value(r.value))
        return list(families.values())

    def collect(self) -> Iterable[Metric]:
        states = list(self._states())
        info = InfoMetricFamily(PREFIX + "build", "dyno daemon version", labels=["host"])
        info.add_metric([self._info.hostname], {"version": self._info.version})
        yield info
        up = GaugeMetricFamily(
            PREFIX + "sampler_up", "1 when the sampler works, 0 when unavailable", labels=["host", "sampler", "backend"]
        )
        for s in states:
            up.add_metric([self._info.hostname, s.name, s.backend], 1.0 if s.ok else 0.0)
        yield up
        sample = self._history.latest()
        if sample is not None:
            ts = GaugeMetricFamily(
                PREFIX + "last_sample_timestamp_seconds", "unix time of the newest sample", labels=["host"]
            )
            ts.add_metric([self._info.hostname], sample.timestamp_ms / 1000.0)
            yield ts
            # While the sampling loop is stuck (loop.Stall) the newest sample only gets older: its values are not
            # exported as current ones (Prometheus marks the series stale; dyno_sampler_up says 0 with the reason in
            # status, and the timestamp above shows since when).
            if not self._stalled():
                simulated_gpu = any(s.simulated for s in states if s.name == "gpu")
                yield from self._families(itertools.chain(sample.readings, self._totals()), simulated_gpu)
                if self._dcgm_devices is not None:
                    yield from dcgm_families(
                        sample.readings, self._dcgm_devices(), self._info.hostname, self._gpu_holders()
                    )
        yield from self._extra()


# The daemon's own state exported beside the sampled series (one gauge each, `host` label only): name -> HELP
DAEMON_GAUGES: Mapping[str, str] = {
    "registered_processes": "trainer processes registered (agent and libkineto)",
    "max_processes": "registry cap (max_processes): past it registrations are refused",
    "active_traces": "traces in flight",
    "trace_dir_bytes": "bytes under the trace dir at the last retention pass",
    "trace_retention_bytes": "trace dir size limit (trace_retention_bytes)",
}


def daemon_gauges(hostname: str, values: Mapping[str, float]) -> list[Metric]:
    """`dyno_<name>{host}` for every DAEMON_GAUGES name, from `values` (each one required)."""
    out: list[Metric] = []
    for name, help_text in DAEMON_GAUGES.items():
        family = GaugeMetricFamily(PREFIX + name, help_text, labels=["host"])
        family.add_metric([hostname], float(values[name]))
        out.append(family)
    return out


class _Selection(RestrictedRegistry):
    """What `name[]=` asks for: the samples of that name among everything collected now. prometheus_client's own
    looks the names up among those the collectors described when registered; dynod's collector describes none (its
    families come and go with the samplers), so every `name[]=` answer was empty."""

    def collect(self) -> Iterable[Metric]:
        for metric in self._registry.collect():
            samples = [s for s in metric.samples if s.name in self._name_set]
            if samples:
                selected = Metric(metric.name, metric.documentation, metric.type, metric.unit)
                selected.samples = samples
                yield selected


class _Registry(CollectorRegistry):
    def restricted_registry(self, names: Iterable[str]) -> RestrictedRegistry:
        return _Selection(names, self)


def build_registry(collector: DynoCollector) -> CollectorRegistry:
    registry = _Registry(auto_describe=False)
    registry.register(collector)  # type: ignore[arg-type]
    return registry


def serve_metrics(registry: CollectorRegistry, addr: str, port: int) -> MetricsHTTPServer:
    """Start the /metrics HTTP server (one thread, bounded connections: dyno.daemon.metrics_http) with the
    exposition's WSGI app (prometheus_client's answers, faster: dyno.daemon.exposition); returns the server
    (`.port`; `.close()` stops it). Raises OSError when the port cannot be bound."""
    return MetricsHTTPServer(make_app(registry), addr, port)
