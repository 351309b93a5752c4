"""The renderers of `dyno-cli opportunities`: the --json document's schema, the offline HTML page (escaped daemon
text, one chart bar per rule in ranked order, nothing fetched) and the terminal table (bounded widths)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
from opportunity_cases import analysis, case_records, job_hosts, record

from dyno.client.opportunities.html import render_html
from dyno.client.opportunities.jsondoc import SCHEMA, VERSION, to_json
from dyno.client.opportunities.model import Opportunities
from dyno.client.opportunities.ranking import rank
from dyno.client.opportunities.text import render

pytestmark = pytest.mark.unit

EVIL_JOB = '<script>alert("job")</script>&'
EVIL_USER = "<img src=x onerror=alert(1)>"


def _case() -> Opportunities:
    return rank(job_hosts(case_records("a:1778", "b:1778")), since_s=7 * 86400, source="daemons")


def _evil() -> Opportunities:
    records = [
        *case_records("a:1778", "b:1778"),
        ("a:1778", record(EVIL_JOB, EVIL_USER, "host-<a>", 50, analysis(("straggler", 0.5)))),
        ("b:1778", record(EVIL_JOB + "2", EVIL_USER, "host-b", 1, analysis(failed="<b>bold</b> \x1b[31mred"))),
    ]
    return rank(job_hosts(records), since_s=7 * 86400, source="daemons", failed_hosts=[("c:1778", "<down>")])


def test_json_document_schema() -> None:
    doc = json.loads(json.dumps(to_json(_case())))
    assert (doc["schema"], doc["version"], doc["source"], doc["since_s"]) == (SCHEMA, VERSION, "daemons", 604800)
    assert doc["totals"] == {
        "gpu_hours": pytest.approx(72.0),
        "analysed_gpu_hours": pytest.approx(60.0),
        "never_analysed_gpu_hours": pytest.approx(12.0),
        "jobs": 4,
        "analysed_jobs": 2,
        "users": 4,
        "hosts": 2,
    }
    first = doc["rules"][0]
    assert set(first) == {
        "rank", "rule", "title", "fix", "recoverable_gpu_hours", "share_of_analysed", "jobs", "users", "hosts",
        "top_jobs",
    }  # fmt: skip
    assert (first["rank"], first["rule"], first["jobs"], first["users"], first["hosts"]) == (1, "dataloader", 1, 1, 2)
    assert first["recoverable_gpu_hours"] == pytest.approx(11.0) and first["share_of_analysed"] == pytest.approx(
        11 / 60
    )
    assert first["top_jobs"] == [
        {
            "job_id": "wide",
            "user": "alice",
            "gpu_hours": pytest.approx(40.0),
            "share": pytest.approx(11 / 40),
            "recoverable_gpu_hours": pytest.approx(11.0),
            "hosts": ["host-a", "host-b"],
        }
    ]
    never = doc["never_analysed"]
    assert (never["gpu_hours"], never["jobs"], never["failed_analyses"]) == (pytest.approx(12.0), 2, 1)
    assert never["top_jobs"][1] == {
        "job_id": "broken",
        "user": "dave",
        "gpu_hours": pytest.approx(4.0),
        "hosts": ["host-a"],
        "failures": [{"host": "host-a", "reason": "timed out: worker killed after 120 s"}],
    }
    assert doc["failed_hosts"] == [] and doc["store_problems"] == []


class _Page(HTMLParser):
    """What a browser would see: elements (tag, attributes) and the text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(page: str) -> _Page:
    p = _Page()
    p.feed(page)
    p.close()
    return p


def test_html_has_one_bar_per_rule_in_ranked_order() -> None:
    o = _evil()
    page = _parse(render_html(o))
    bars = [attrs.get("data-rule") for tag, attrs in page.tags if tag == "g" and attrs.get("class") == "bar"]
    assert bars == [r.rule for r in o.rules] == ["straggler", "dataloader", "sync-calls"]
    widths = [float(attrs["width"] or 0) for tag, attrs in page.tags if tag == "rect"]
    assert len(widths) == 3 and widths == sorted(widths, reverse=True)


def test_html_escapes_daemon_text_and_fetches_nothing() -> None:
    html = render_html(_evil())
    page = _parse(html)
    tags = {tag for tag, _ in page.tags}
    assert "script" not in tags and "img" not in tags and "b" not in tags
    text = "".join(page.text)
    assert EVIL_JOB in text and EVIL_USER in text and "<b>bold</b>" in text and "<down>" in text
    assert "host-<a>" in text
    # offline: no URL, no external resource
    assert not re.search(r"https?://|//[a-z]", html, re.IGNORECASE)
    assert not any(k in attrs for _, attrs in page.tags for k in ("src", "href"))


def test_terminal_table_fits_the_width_and_cleans_control_characters() -> None:
    o = _evil()
    out = render(o, max_width=80)
    assert all(len(line) <= 80 for line in out.splitlines()), max(out.splitlines(), key=len)
    assert "\x1b" not in out
    assert out.index("straggler") < out.index("dataloader") < out.index("sync-calls")
    assert "Never analysed: 13.00 GPU-hours of 3 jobs (no" in out and "1 job of 1 user on 1 host" in out
    assert "analysis failed on host-b" in out
    wide = render(o)  # into a pipe: the tables keep every character, prose stays at 100 columns
    assert "wide" in wide and "host-a,host-b" in wide


def test_nothing_analysed_says_so() -> None:
    o = rank(job_hosts([("a", record("dark", "u", "h", 3))]), since_s=86400, source="daemons")
    out = render(o)
    assert "0.00 analysed, 3.00 never analysed" in out and "RANK" not in out
    assert "<svg" not in render_html(o)


def test_a_short_jobs_gpu_hours_do_not_read_as_zero() -> None:
    o = rank(
        job_hosts([("a", record("short", "u", "h", 0.0022, analysis(("tiny-ops", 0.5))))]), since_s=3600, source="x"
    )
    out = render(o)
    assert "0.0022 GPU-hours in the last 1 hour" in out and "1. tiny-ops: 0.0011 GPU-hours recoverable" in out
    assert ">0.0011<" in render_html(o)
