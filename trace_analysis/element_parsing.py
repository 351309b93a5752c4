"""Elements of a batch of trace events parsed again on their own with orjson: the few events (instants, metadata,
rare categories' args) that the fast decoders leave to the general path."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import orjson

from dyno.trace_analysis.jsonerrors import invalid_element_reason
from dyno.trace_analysis.jsonscan import ScanError

__all__ = ["parse_element", "parse_elements"]


def parse_elements(view: memoryview, spans: np.ndarray, rows: list[int]) -> list[Any]:
    """The elements ``rows`` of a batch (``spans``: start, end byte of each element) parsed with orjson, in one
    call; when that fails, one by one, so that the error names the first bad element as ``parse_element`` does."""
    bounds = spans.reshape(-1, 2)[rows].tolist()
    texts = [view[lo:hi] for lo, hi in bounds]
    try:
        return cast("list[Any]", orjson.loads(b"".join((b"[", b",".join(texts), b"]"))))
    except orjson.JSONDecodeError:
        return [parse_element(t.tobytes()) for t in texts]


def parse_element(text: bytes) -> Any:
    """One element's JSON with orjson. The typed decoder skips unused keys without validating them, so orjson can
    still find invalid JSON there (e.g. bad UTF-8): reported like invalid JSON found while scanning."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise ScanError(invalid_element_reason(text, e, f"element {text[:60]!r}...")) from None
