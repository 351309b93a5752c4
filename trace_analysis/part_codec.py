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
    # dataclasses as objects of their fields, enums as values, numpy scalars as numbers (a non-finite float in a field
    # that cannot be None is written as null, which decode_parts refuses: the model never holds one there)
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
    decode, budget = _decoder(RankPart), _Budget()
    out: list[RankPart] = []
    try:
        for p in parts:
            out.append(decode(p, budget))
    except _Bad as e:
        e.where += [len(out), "parts"]
        raise e.error() from None
    return out


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


class _Bad(Exception):
    """A bad value deep in a part: each level it passes on its way up adds its key (``where``, innermost first)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.where: list[object] = []

    def error(self) -> PartFormatError:
        out = ""
        for k in reversed(self.where):
            out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
        return PartFormatError(f"{out}: {self.message}")


class _Budget:
    """The values one document may still hold (``MAX_VALUES``): every list item and object field counts."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = MAX_VALUES

    def take(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise _Bad(f"rank parts hold more than {MAX_VALUES:,} values")


def _shown(v: object) -> str:
    return f"{v!r:.80}" if isinstance(v, str | int | float | type(None)) else type(v).__name__


def _expected(what: str, v: object) -> _Bad:
    return _Bad(f"expected {what}, got {_shown(v)}")


# Decoders compiled once per (type hint, signed): a value, the document's budget -> the model's value. The checks are
# chained comparisons (false for NaN) on exact types: orjson makes exactly int, float, str, bool, None, list, dict.
_Decode = Callable[[Any, _Budget], Any]
_INF = math.inf
_INT_MAX = 2**63


def _number(signed: bool) -> _Decode:
    def decode_signed(v: Any, budget: _Budget) -> Any:
        t = type(v)
        if (t is float and -_INF < v < _INF) or (t is int and -_INT_MAX < v < _INT_MAX):
            return v  # an int stays an int: the report renders it as the original did
        raise _expected("a finite number", v)

    def decode(v: Any, budget: _Budget) -> Any:
        t = type(v)
        if (t is float and 0.0 <= v < _INF) or (t is int and 0 <= v < _INT_MAX):
            return v
        raise _expected("a finite non-negative number", v)

    return decode_signed if signed else decode


def _integer(signed: bool) -> _Decode:
    def decode(v: Any, budget: _Budget) -> Any:
        if type(v) is int and (-_INT_MAX if signed else 0) <= v < _INT_MAX:  # bool is not int here
            return v
        raise _expected("an integer" if signed else "a non-negative integer", v)

    return decode


def _exact(t: type, what: str) -> _Decode:
    def decode(v: Any, budget: _Budget) -> Any:
        if type(v) is t:
            return v
        raise _expected(what, v)

    return decode


def _optional(inner: _Decode) -> _Decode:
    def decode(v: Any, budget: _Budget) -> Any:
        return None if v is None else inner(v, budget)

    return decode


def _items(item: _Decode) -> _Decode:
    def decode(v: Any, budget: _Budget) -> Any:
        if type(v) is not list:
            raise _expected("a list", v)
        if len(v) > MAX_LIST:
            raise _Bad(f"{len(v):,} items, at most {MAX_LIST:,}")
        budget.take(len(v))
        i = 0
        try:
            for i, x in enumerate(v):
                v[i] = item(x, budget)  # in place: the document is ours
        except _Bad as e:
            e.where.append(i)
            raise
        return tuple(v)

    return decode


def _fixed(items: tuple[_Decode, ...]) -> _Decode:
    def decode(v: Any, budget: _Budget) -> Any:
        if type(v) is not list:
            raise _expected("a list", v)
        if len(v) != len(items):
            raise _Bad(f"expected {len(items)} items, got {len(v)}")
        budget.take(len(v))
        i = 0
        try:
            for i, x in enumerate(v):
                v[i] = items[i](x, budget)
        except _Bad as e:
            e.where.append(i)
            raise
        return tuple(v)

    return decode


def _mapping(value: _Decode) -> _Decode:
    def decode(v: Any, budget: _Budget) -> Any:
        if type(v) is not dict:
            raise _expected("an object", v)
        if len(v) > MAX_LIST:
            raise _Bad(f"{len(v):,} keys, at most {MAX_LIST:,}")
        budget.take(len(v))
        k = ""
        try:
            for k, x in v.items():
                v[k] = value(x, budget)
        except _Bad as e:
            e.where.append(k)
            raise
        return v

    return decode


def _enum(cls: type[enum.Enum]) -> _Decode:
    def decode(v: Any, budget: _Budget) -> Any:
        try:
            return cls(v)
        except (ValueError, TypeError):
            raise _expected(f"one of {', '.join(str(m.value) for m in cls)}", v) from None

    return decode


_MISSING = object()


def _dataclass(cls: Any) -> _Decode:
    fields = [(name, _decoder(hint, name in SIGNED), required) for name, hint, required in _fields(cls)]

    def decode(v: Any, budget: _Budget) -> Any:
        if type(v) is not dict:
            raise _expected("an object", v)
        budget.take(len(fields))
        kw = {}
        name = ""
        try:
            for name, field_decode, required in fields:
                x = v.get(name, _MISSING)
                if x is _MISSING:
                    if required:
                        raise _Bad("missing")
                    continue  # a field this writer did not have: its default
                kw[name] = field_decode(x, budget)
        except _Bad as e:
            e.where.append(name)
            raise
        return cls(**kw)

    return decode


@functools.cache
def _decoder(hint: Any, signed: bool = False) -> _Decode:
    """The decoder of a model field of type ``hint`` (``signed``: it may be negative)."""
    if hint is float:
        return _number(signed)
    if hint is int:
        return _integer(signed)
    if hint is str:
        return _exact(str, "a string")
    if hint is bool:
        return _exact(bool, "true/false")
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is types.UnionType or origin is typing.Union:
        (inner,) = (a for a in args if a is not type(None))  # the model has X | None only
        return _optional(_decoder(inner, signed))
    if origin is Sequence or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        return _items(_decoder(args[0], signed))
    if origin is tuple:
        return _fixed(tuple(_decoder(a, signed) for a in args))
    if origin is Mapping or origin is dict:
        return _mapping(_decoder(args[1], signed))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum(hint)
    if dataclasses.is_dataclass(hint):
        return _dataclass(hint)
    raise TypeError(f"rank parts cannot carry a {hint!r} field")  # a model change to follow here


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
