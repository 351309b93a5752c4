"""Antipattern rules (ANTIPATTERNS.md): one small unit per rule, an engine that runs them, threshold parsing."""

from .base import CrossRankRule, Evidence, Example, Finding, Rule, Severity, Share, Skip, severity_for_share
from .context import RuleContext
from .engine import ALL_RULES, RuleOutcome, RulesResult, UnknownRuleError, run_rules, select_rules, sort_findings
from .thresholds import ThresholdError, parse_threshold_args, resolve_thresholds

__all__ = [
    "ALL_RULES",
    "CrossRankRule",
    "Evidence",
    "Example",
    "Finding",
    "Rule",
    "RuleContext",
    "RuleOutcome",
    "RulesResult",
    "Severity",
    "Share",
    "Skip",
    "ThresholdError",
    "UnknownRuleError",
    "parse_threshold_args",
    "resolve_thresholds",
    "run_rules",
    "select_rules",
    "severity_for_share",
    "sort_findings",
]
