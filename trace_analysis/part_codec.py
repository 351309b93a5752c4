"""Rank parts on the wire: what a host sends so that the cross-rank step runs elsewhere without the raw traces.

``encode_parts(parts, max_bytes)`` writes the ranks' ``api.RankPart`` as gzip of one JSON document
``{"schema": "dyno.trace_analysis.rank_parts", "version": 1, "parts": [...]}`` (each dataclass an object of its
fields, tuples as lists, enums as their values). Over ``max_bytes`` it thins the parts stage by stage (``THINNING``)
and says so; ``api.report_of`` over the decoded parts then renders the report of the original ones, byte for byte,
when nothing was thinned.

``decode_parts(data)`` reads what a remote host sent, so it trusts nothing: the inflated size is capped
(``MAX_INFLATED``: a gzip bomb stops there), lists and the number of values are bounded, every field is checked
against its type in the model (no NaN / infinity; no negative count, duration or share: ``SIGNED`` names the fields
that may be negative), and anything else raises ``PartFormatError`` naming the field. The model's dataclasses are
read through their type hints, so a field added to the model travels without a change here.

numpy and the report model are imported when a function runs, not with this module (the client imports it).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import gzip
import math
import types
import typing
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import RankPart

__all__ = [
    "MAX_INFLATED",
    "SCHEMA",
    "SCHEMA_VERSION",
    "PartFormatError",
    "PartsTooLargeError",
    "decode_parts",
    "encode_parts",
]

SCHEMA = "dyno.trace_analysis.rank_parts"
SCHEMA_VERSION = 1
MAX_INFLATED = 64 * 2**20  # bytes of JSON one document may inflate to
MAX_PARTS = 4096  # ranks in one document (one host's)
MAX_LIST = 65_536  # items in any one list or object of a part
MAX_VALUES = 8_000_000  # values in one document, all lists together: decoding time stays bounded
# Fields that may hold a negative number: timestamps (a trace's own clock), ranks/devices/streams, distributions of
# signed quantities (launch delay), and rules' free-form counts.
SIGNED = frozenset({"ts_us", "offset_us", "edges_us", "span", "rank", "device", "stream", "counts"}) | frozenset(
    {"mean", "min", "max", "p25", "p50", "p75"}
)
TOP_ROWS_THINNED = 3  # top kernels / CPU ops kept per rank in the last thinning stages


class PartFormatError(ValueError):
    """Rank parts that are not what ``encode_parts`` writes; the message names the first bad field."""


class PartsTooLargeError(ValueError):
    """The parts do not fit in ``max_bytes`` even with everything thinnable left out."""


def _drop_timelines(p: RankPart) -> RankPart:
    return dataclasses.replace(p, summary=dataclasses.replace(p.summary, timelines=()))


def _drop_tables(p: RankPart) -> RankPart:
    return dataclasses.replace(p, summary=dataclasses.replace(p.summary, tables=None))


def _examples(p: RankPart, keep: int) -> RankPart:
    def cut(f: Any) -> Any:
        ev = f.evidence
        if len(ev.examples) <= keep:
            return f
        return dataclasses.replace(f, evidence=dataclasses.replace(ev, examples=tuple(ev.examples[:keep])))

    return dataclasses.replace(p, rules=tuple((o, tuple(cut(f) for f in fs)) for o, fs in p.rules))


def _top_rows(p: RankPart) -> RankPart:
    s = p.summary
    cut = dataclasses.replace(
        s, top_kernels=s.top_kernels[:TOP_ROWS_THINNED], top_cpu_ops=s.top_cpu_ops[:TOP_ROWS_THINNED]
    )
    return dataclasses.replace(p, summary=cut)


def _step_durations(p: RankPart) -> RankPart:
    s = p.summary
    if s.steps is None:
        return p
    return dataclasses.replace(p, summary=dataclasses.replace(s, steps=dataclasses.replace(s.steps, durations_us=())))


# Applied in turn, each on top of the ones before, until the document fits: what matters least to the job-wide report
# first. The figures (breakdown, step statistics, findings and their time lost, the digests) are never thinned.
THINNING: tuple[tuple[str, Callable[[RankPart], RankPart]], ...] = (
    ("GPU utilization timelines", _drop_timelines),
    ("per-rank GPU tables", _drop_tables),
    ("examples beyond one per finding", functools.partial(_examples, keep=1)),
    (f"top-table rows beyond {TOP_ROWS_THINNED}", _top_rows),
    ("per-step durations", _step_durations),
    ("every example", functools.partial(_examples, keep=0)),
)


def encode_parts(parts: Sequence[RankPart], max_bytes: int) -> tuple[bytes, bool]:
    """(gzip of the parts' document, whether it was thinned to fit ``max_bytes``). ``PartsTooLargeError`` when even
    the last thinning stage leaves it over."""
    data = _compress(parts)
    if len(data) <= max_bytes:
        return data, False
    for _, thin in THINNING:
        parts = [thin(p) for p in parts]
        data = _compress(parts)
        if len(data) <= max_bytes:
            return data, True
    raise PartsTooLargeError(
        f"{len(parts)} rank parts take {len(data):,} bytes compressed with everything thinnable left out,"
        f" over the {max_bytes:,} allowed"
    )


def _compress(parts: Sequence[RankPart]) -> bytes:
    import orjson

    doc = {"schema": SCHEMA, "version": SCHEMA_VERSION, "parts": list(parts)}
    # dataclasses as objects of their fields, enums as values, numpy scalars as numbers; a non-finite float would be
    # written as null and refused by decode_parts, so it is refused here, where the bug is
    raw = orjson.dumps(doc, default=_plain, option=orjson.OPT_SERIALIZE_NUMPY)
    return gzip.compress(raw, compresslevel=6, mtime=0)


def _plain(v: object) -> object:
    if isinstance(v, Mapping):
        return dict(v)
    raise TypeError(f"cannot encode {type(v).__name__} in rank parts")


def decode_parts(data: bytes) -> list[RankPart]:
    """The rank parts ``encode_parts`` wrote, checked field by field (``PartFormatError`` naming the bad one)."""
    import orjson

    from .api import RankPart

    raw = _inflate(data)
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as e:  # also too deep a nesting (orjson stops at 1024 levels)
        raise PartFormatError(f"rank parts are not valid JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        got = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise PartFormatError(f"not a {SCHEMA} document (schema {got!r:.80})")
    version = doc.get("version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise PartFormatError(f"{SCHEMA} version {version!r:.40} is not supported (this dyno reads {SCHEMA_VERSION})")
    parts = doc.get("parts")
    if not isinstance(parts, list):
        raise PartFormatError(f"parts: expected a list, got {type(parts).__name__}")
    if len(parts) > MAX_PARTS:
        raise PartFormatError(f"parts: {len(parts)} ranks, at most {MAX_PARTS} in one document")
    reader = _Reader()
    return [reader.read(RankPart, p, (((), "parts"), i)) for i, p in enumerate(parts)]


def _inflate(data: bytes) -> bytes:
    if not isinstance(data, bytes | bytearray | memoryview) or bytes(data[:2]) != b"\x1f\x8b":
        raise PartFormatError("rank parts are not gzip data")
    d = zlib.decompressobj(wbits=31)
    try:
        out = d.decompress(data, MAX_INFLATED + 1)
    except zlib.error as e:
        raise PartFormatError(f"rank parts: corrupt gzip data ({e})") from None
    if len(out) > MAX_INFLATED or d.unconsumed_tail:
        raise PartFormatError(f"rank parts inflate to more than {MAX_INFLATED // 2**20} MiB")
    if not d.eof:
        raise PartFormatError("rank parts: truncated gzip data")
    if d.unused_data:
        raise PartFormatError("rank parts: data after the gzip stream")
    return out


_Path = tuple[object, ...]  # (parent path, key) pairs, formatted only for an error message


def _where(path: _Path) -> str:
    keys: list[object] = []
    node: Any = path
    while node:
        node, key = node
        keys.append(key)
    out = ""
    for k in reversed(keys):
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out


class _Reader:
    """Reads plain JSON values into the model's dataclasses by their type hints, counting values (``MAX_VALUES``)."""

    def __init__(self) -> None:
        self.left = MAX_VALUES

    def read(self, hint: Any, v: object, path: _Path, signed: bool = False) -> Any:
        self.left -= 1
        if self.left < 0:
            raise PartFormatError(f"rank parts hold more than {MAX_VALUES:,} values")
        if hint is float:
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or (v < 0 and not signed):
                raise self._bad(path, "a finite number" if signed else "a finite non-negative number", v)
            return v  # an int stays an int: the report renders it as the original did
        if hint is int:
            if isinstance(v, bool) or not isinstance(v, int) or abs(v) >= 2**63 or (v < 0 and not signed):
                raise self._bad(path, "an integer" if signed else "a non-negative integer", v)
            return v
        if hint is str or hint is bool:
            if not isinstance(v, hint):
                raise self._bad(path, "a string" if hint is str else "true/false", v)
            return v
        origin = typing.get_origin(hint)
        if origin is types.UnionType or origin is typing.Union:
            args = typing.get_args(hint)
            if v is None and type(None) in args:
                return None
            (inner,) = (a for a in args if a is not type(None))  # the model has X | None only
            return self.read(inner, v, path, signed)
        if origin is tuple or origin is Sequence:
            return self._sequence(hint, v, path, signed)
        if origin is Mapping or origin is dict:
            return self._mapping(typing.get_args(hint)[1], v, path, signed)
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            try:
                return hint(v)
            except ValueError:
                raise self._bad(path, f"one of {', '.join(str(m.value) for m in hint)}", v) from None
        if dataclasses.is_dataclass(hint):
            return self._dataclass(hint, v, path)
        raise PartFormatError(f"{_where(path)}: a {hint!r} field cannot be decoded")  # a model change to follow here

    def _sequence(self, hint: Any, v: object, path: _Path, signed: bool) -> tuple[Any, ...]:
        if not isinstance(v, list):
            raise self._bad(path, "a list", v)
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis or typing.get_origin(hint) is Sequence:
            if len(v) > MAX_LIST:
                raise PartFormatError(f"{_where(path)}: {len(v):,} items, at most {MAX_LIST:,}")
            return tuple(self.read(args[0], x, (path, i), signed) for i, x in enumerate(v))
        if len(v) != len(args):
            raise PartFormatError(f"{_where(path)}: expected {len(args)} items, got {len(v)}")
        return tuple(self.read(a, x, (path, i), signed) for i, (a, x) in enumerate(zip(args, v, strict=True)))

    def _mapping(self, value_hint: Any, v: object, path: _Path, signed: bool) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self._bad(path, "an object", v)
        if len(v) > MAX_LIST:
            raise PartFormatError(f"{_where(path)}: {len(v):,} keys, at most {MAX_LIST:,}")
        return {k: self.read(value_hint, x, (path, k), signed) for k, x in v.items()}

    def _dataclass(self, cls: Any, v: object, path: _Path) -> Any:
        if not isinstance(v, dict):
            raise self._bad(path, "an object", v)
        values = {}
        for name, hint, required in _fields(cls):
            if name not in v:
                if required:
                    raise PartFormatError(f"{_where((path, name))}: missing")
                continue  # a field this writer did not have: its default
            values[name] = self.read(hint, v[name], (path, name), name in SIGNED)
        return cls(**values)

    @staticmethod
    def _bad(path: _Path, expected: str, got: object) -> PartFormatError:
        shown = f"{got!r:.80}" if isinstance(got, str | int | float | type(None)) else type(got).__name__
        return PartFormatError(f"{_where(path)}: expected {expected}, got {shown}")


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, Any, bool], ...]:
    """(name, resolved type hint, required) of each field of the model dataclass ``cls``."""
    hints = typing.get_type_hints(cls)
    return tuple(
        (
            f.name,
            hints[f.name],
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for f in dataclasses.fields(cls)
    )
