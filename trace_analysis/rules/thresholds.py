"""Threshold overrides: ``rule.key=value`` strings (CLI) or mappings (library), validated against rule defaults.

The type of a value is the type of the rule's default (bool, int or float); a float may be written as a
percentage (``50%`` = 0.5). Unknown rules, unknown keys and bad values (wrong type; NaN, infinite or negative; above
1 for a :class:`~.base.Share`) raise :class:`ThresholdError` with a message that lists what would have been valid.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from .base import Share, ThresholdValue

__all__ = ["ThresholdError", "parse_threshold_args", "resolve_thresholds"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class ThresholdError(ValueError):
    """A threshold override names an unknown rule or key, or has a value of the wrong type."""


def _coerce(rule_id: str, key: str, default: ThresholdValue, raw: object) -> ThresholdValue:
    where = f"threshold {rule_id}.{key}"
    if isinstance(default, bool):
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ThresholdError(f"{where}: expected true/false, got {raw!r}")
    if isinstance(raw, bool):
        raise ThresholdError(f"{where}: expected a number, got {raw!r}")
    if isinstance(raw, int | float):
        value = float(raw)
    else:
        text = str(raw).strip()
        scale = 1.0
        if text.endswith("%") and isinstance(default, float):
            text, scale = text[:-1].rstrip(), 0.01
        try:
            value = float(text) * scale
        except ValueError:
            raise ThresholdError(f"{where}: expected a number, got {raw!r}") from None
    # NaN or negative: no rule threshold is meaningful below zero; infinite: int() of it raises, and the JSON
    # report could not show the value used (non-finite floats are written as null)
    if not math.isfinite(value) or value < 0:
        raise ThresholdError(f"{where}: must be a finite non-negative number, got {raw!r}")
    if isinstance(default, Share) and value > 1:
        if str(raw).strip().endswith("%"):
            raise ThresholdError(f"{where} is a share (0..1): {str(raw).strip()} is above 100%")
        hint = f"; did you mean {value:g}%?" if value <= 100 else ""
        raise ThresholdError(f"{where} is a share (0..1): {value:g} would be {value:.0%}{hint}")
    if isinstance(default, int):
        if value != int(value):
            raise ThresholdError(f"{where}: expected an integer, got {raw!r}")
        return int(value)
    return value


def _plain(value: ThresholdValue) -> ThresholdValue:
    return float(value) if isinstance(value, Share) else value


def resolve_thresholds(
    defaults: Mapping[str, Mapping[str, ThresholdValue]],
    overrides: Mapping[str, object] | None,
) -> dict[str, dict[str, ThresholdValue]]:
    """Merge overrides into per-rule defaults.

    ``overrides`` is either flat (``{"low-gpu-util.min_util": 0.4}``) or nested (``{"low-gpu-util": {"min_util":
    0.4}}``); both forms may be mixed.
    """
    # plain values (a Share default is a float subclass, which e.g. orjson does not serialize)
    merged = {rule_id: {k: _plain(v) for k, v in values.items()} for rule_id, values in defaults.items()}
    for name, raw in (overrides or {}).items():
        if not isinstance(name, str):  # a library caller's mapping: say what is wrong, not AttributeError
            raise ThresholdError(f"threshold {name!r}: expected RULE.KEY (e.g. low-gpu-util.min_util)")
        if isinstance(raw, Mapping):
            pairs: Iterable[tuple[str, str, object]] = ((name, k, v) for k, v in raw.items())
        else:
            rule_id, dot, key = name.rpartition(".")
            if not dot or not rule_id or not key:
                raise ThresholdError(f"threshold {name!r}: expected RULE.KEY (e.g. low-gpu-util.min_util)")
            pairs = [(rule_id, key, raw)]
        for rule_id, key, value in pairs:
            if rule_id not in merged:
                known = ", ".join(sorted(merged))
                raise ThresholdError(f"threshold {rule_id}.{key}: unknown rule {rule_id!r} (rules: {known})")
            rule_defaults = defaults[rule_id]
            if key not in rule_defaults:
                known = ", ".join(sorted(rule_defaults)) or "none"
                raise ThresholdError(f"threshold {rule_id}.{key}: unknown key {key!r} (keys of {rule_id}: {known})")
            merged[rule_id][key] = _coerce(rule_id, key, rule_defaults[key], value)
    return merged


def parse_threshold_args(args: Iterable[str]) -> dict[str, str]:
    """Split CLI ``rule.key=value`` strings into a flat override mapping (values validated later)."""
    out: dict[str, str] = {}
    for arg in args:
        name, eq, value = arg.partition("=")
        if not eq or not name.strip() or not value.strip():
            raise ThresholdError(f"--threshold {arg!r}: expected RULE.KEY=VALUE (e.g. low-gpu-util.min_util=0.4)")
        out[name.strip()] = value.strip()
    return out
