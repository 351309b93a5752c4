"""dyno.trace_analysis.rule_texts: the rules' titles and fixes, readable without numpy, equal to the rules' own."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dyno.trace_analysis.rule_texts import RULE_TEXTS
from dyno.trace_analysis.rules import ALL_RULES

pytestmark = pytest.mark.unit


def test_the_table_says_what_every_rule_says() -> None:
    assert list(RULE_TEXTS) == [r.id for r in ALL_RULES]
    for rule in ALL_RULES:
        assert (RULE_TEXTS[rule.id].title, RULE_TEXTS[rule.id].fix) == (rule.title, rule.fix), rule.id


def test_reading_it_loads_no_numpy() -> None:
    code = "import sys, dyno.trace_analysis.rule_texts; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"
