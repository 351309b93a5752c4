"""The job records of `dyno-cli jobs`, read from a Prometheus server's job series instead of the daemons: one PromQL
instant query per field over the last `since` seconds, grouped by (job_id, user, host, instance), turned into the same
JobRecord values ListJobs answers, so that the table is computed by the same code (jobs_table.from_records).

Counters are read with max_over_time: a job's total on a host is its counter's highest value in the range (dynod
resumes a running job's totals after a restart, so they only reset when a record was lost).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from dyno.v1 import dyno_pb2

__all__ = ["PrometheusError", "check_url", "instant_query", "label_value", "records_from_prometheus", "query_url"]

_KEY = ("job_id", "user", "host", "instance")  # instance: the scrape target, one per daemon
# JobRecord field <- (aggregation over a host's series, PromQL over the range, how a value becomes the field)
_FIELDS: dict[str, tuple[str, str, Callable[[float], Any]]] = {
    "gpu_seconds": ("max", "max_over_time(dyno_job_gpu_seconds_total{sel}[{r}])", float),
    "busy_gpu_seconds": ("max", "max_over_time(dyno_job_gpu_busy_seconds_total{sel}[{r}])", float),
    "sm_active_gpu_seconds": ("max", "max_over_time(dyno_job_sm_active_seconds_total{sel}[{r}])", float),
    "gpm_gpu_seconds": ("max", "max_over_time(dyno_job_gpm_seconds_total{sel}[{r}])", float),
    "traces": ("max", "max_over_time(dyno_job_traces_total{sel}[{r}])", int),
    "gpus_max": ("max", "max_over_time(dyno_job_gpus_max{sel}[{r}])", int),
    "first_seen_ms": ("min", "min_over_time(dyno_job_start_timestamp_seconds{sel}[{r}])", lambda v: int(v * 1000)),
    "last_seen_ms": ("max", "max_over_time(dyno_job_last_seen_timestamp_seconds{sel}[{r}])", lambda v: int(v * 1000)),
    "running": ("max", "last_over_time(dyno_job_running{sel}[2m])", lambda v: v >= 1),
    "simulated": ("max", "max_over_time(dyno_job_gpus_max{sim}[{r}]) >= bool 0", lambda v: v >= 1),
}


class PrometheusError(Exception):
    """The Prometheus server cannot be asked or answered with an error; the message says which."""


def label_value(value: str) -> str:
    """`value` as a PromQL label matcher's quoted string."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def query_url(base: str, promql: str) -> str:
    return base.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})


def instant_query(base: str, promql: str, timeout_s: float) -> list[tuple[dict[str, str], float]]:
    """The instant vector `promql` evaluates to now: (labels, value) per series. Raises PrometheusError."""
    url = query_url(base, promql)
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:  # noqa: S310 - the user's own URL
            body = json.loads(answer.read())
    except urllib.error.HTTPError as e:
        detail = ""
        try:
            detail = json.loads(e.read()).get("error", "")
        except (ValueError, OSError):
            pass
        raise PrometheusError(f"{base}: HTTP {e.code} {e.reason}{': ' + detail if detail else ''}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise PrometheusError(f"cannot reach Prometheus at {base}: {reason}") from None
    except ValueError:
        raise PrometheusError(f"{base} did not answer with Prometheus' JSON (is it a Prometheus server?)") from None
    if body.get("status") != "success":
        raise PrometheusError(f"{base}: {body.get('error', 'query failed')}")
    data = body.get("data", {})
    if data.get("resultType") != "vector":
        raise PrometheusError(f"{base}: unexpected result type {data.get('resultType')!r}")
    return [(r["metric"], float(r["value"][1])) for r in data.get("result", [])]


def check_url(base: str) -> None:
    """PrometheusError unless `base` looks like a server's URL."""
    if not base.startswith(("http://", "https://")) or not urllib.parse.urlsplit(base).netloc:
        raise PrometheusError(f"--prometheus {base!r}: give the server's URL, e.g. http://prometheus:9090")


def records_from_prometheus(
    base: str, since_s: float, *, job_id: str = "", user: str = "", running_only: bool = False, timeout_s: float = 30.0
) -> list[tuple[str, dyno_pb2.JobRecord]]:
    """One (scrape target, JobRecord) per (job_id, user, host) with job series in the last `since_s` seconds."""
    check_url(base)
    matchers = [f"job_id={label_value(job_id)}"] if job_id else []
    matchers += [f"user={label_value(user)}"] if user else []
    sel = "{" + ",".join(matchers) + "}" if matchers else ""
    sim = "{" + ",".join([*matchers, 'simulated="true"']) + "}"  # the sim backend's series carry it
    r = f"{max(1, int(since_s))}s"
    rows: dict[tuple[str, ...], dict[str, Any]] = {}
    for field, (agg, template, convert) in _FIELDS.items():
        expr = f"{agg} by (job_id, user, host, instance) ({template.format(sel=sel, sim=sim, r=r)})"
        for labels, value in instant_query(base, expr, timeout_s):
            key = tuple(labels.get(k, "") for k in _KEY)
            rows.setdefault(key, {})[field] = convert(value)
    out = []
    for (job, who, host, instance), fields in rows.items():
        if "gpu_seconds" not in fields:
            continue
        rec = dyno_pb2.JobRecord(job_id=job, user=who, hostname=host, **fields)
        if running_only and not rec.running:
            continue
        out.append((instance or host, rec))
    return out
