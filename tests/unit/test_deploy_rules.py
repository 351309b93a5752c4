"""The shipped Prometheus rules and Grafana dashboard (deploy/): promtool checks and unit-tests the rules, and every
expression of the dashboard names only series dynod exports or the rules record."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dyno.client.opportunities.prometheus import RATIO, TIMESTAMP
from dyno.daemon.jobs.prometheus import JOB_COUNTERS, JOB_GAUGES

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "dyno-jobs.rules.yml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian: prometheus)")


@needs_promtool
def test_promtool_checks_and_unit_tests_the_rules() -> None:
    for args in (["check", "rules", RULES.name], ["test", "rules", "dyno-jobs.rules.test.yml"]):
        done = subprocess.run([PROMTOOL, *args], cwd=RULES.parent, capture_output=True, text=True, timeout=120)  # type: ignore[list-item]
        assert done.returncode == 0, done.stdout + done.stderr
        assert "SUCCESS" in done.stdout


def _names(expr: str) -> set[str]:
    """Metric and recorded names in a PromQL expression (identifiers with a ':' or the dyno_ prefix)."""
    return {n for n in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", expr) if ":" in n or n.startswith("dyno_")}


def test_rules_and_dashboard_use_only_exported_or_recorded_series() -> None:
    # the analysis gauges (RATIO, TIMESTAMP): the agreed names `dyno-cli opportunities --prometheus` reads
    exported = {f"dyno_{n}_total" for n in JOB_COUNTERS} | {f"dyno_{n}" for n in JOB_GAUGES} | {RATIO, TIMESTAMP}
    rules_text = RULES.read_text()
    recorded = set(re.findall(r"- record: (\S+)", rules_text))
    rule_exprs = re.findall(r"expr: (.+)", rules_text)
    assert recorded and rule_exprs
    for expr in rule_exprs:
        assert _names(expr) <= exported | recorded, expr
    dashboard = json.loads((DEPLOY / "grafana" / "dyno-jobs.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert exprs
    for expr in exprs:
        assert _names(expr) and _names(expr) <= exported | recorded, expr
    assert "job=" not in rules_text.replace("job_id=", "")  # `job` is the scrape job's label, never dyno's
