"""Rank parts on the wire: what a host sends so that the cross-rank step runs elsewhere without the raw traces.

``encode_parts(parts, max_bytes)`` writes the ranks' ``api.RankPart`` as gzip of one JSON document
``{"schema": "dyno.trace_analysis.rank_parts", "version": 1, "parts": [...]}`` (each msgspec Struct an object of its
fields in their order, tuples as lists, enums as their values). Over ``max_bytes`` it thins the parts stage by stage
(``THINNING``) and says so; ``api.report_of`` over the decoded parts then renders the report of the original ones,
byte for byte, when nothing was thinned.

``decode_parts(data)`` reads what a remote host sent, so it trusts nothing: the inflated size is capped
(``MAX_INFLATED``: a gzip bomb stops there), lists are bounded, every field is checked against its type in the model
(no NaN / infinity; no negative count, duration or share: ``part_checks.SIGNED`` names the fields that may be
negative), and anything else raises ``PartFormatError`` naming the field. The model's Structs are read through
their type hints, so a field added to the model travels without a change here.

numpy and the report model are imported when a function runs, not with this module (the client imports it).
"""

from __future__ import annotations

import functools
import gzip
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dyno.gc_pause import gc_paused

from .part_checks import MAX_LIST, MAX_PARTS

if TYPE_CHECKING:
    from .api import RankPart

__all__ = [
    "MAX_INFLATED",
    "MAX_LIST",
    "MAX_PARTS",
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
TOP_ROWS_THINNED = 3  # top kernels / CPU ops kept per rank in the last thinning stages


class PartFormatError(ValueError):
    """Rank parts that are not what ``encode_parts`` writes; the message names the first bad field."""


class PartsTooLargeError(ValueError):
    """The parts do not fit in ``max_bytes`` even with everything thinnable left out."""


def _replace(obj: Any, **changes: Any) -> Any:
    """``msgspec.structs.replace`` (msgspec imported when a part is thinned, not with this module)."""
    import msgspec

    return msgspec.structs.replace(obj, **changes)


def _drop_timelines(p: RankPart) -> RankPart:
    return _replace(p, summary=_replace(p.summary, timelines=()))


def _drop_tables(p: RankPart) -> RankPart:
    return _replace(p, summary=_replace(p.summary, tables=None))


def _examples(p: RankPart, keep: int) -> RankPart:
    def cut(f: Any) -> Any:
        ev = f.evidence
        if len(ev.examples) <= keep:
            return f
        return _replace(f, evidence=_replace(ev, examples=tuple(ev.examples[:keep])))

    return _replace(p, rules=tuple((o, tuple(cut(f) for f in fs)) for o, fs in p.rules))


def _top_rows(p: RankPart) -> RankPart:
    s = p.summary
    cut = _replace(s, top_kernels=s.top_kernels[:TOP_ROWS_THINNED], top_cpu_ops=s.top_cpu_ops[:TOP_ROWS_THINNED])
    return _replace(p, summary=cut)


def _step_durations(p: RankPart) -> RankPart:
    s = p.summary
    if s.steps is None:
        return p
    return _replace(p, summary=_replace(s, steps=_replace(s.steps, durations_us=())))


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
    from msgspec import Struct
    from msgspec.structs import asdict

    doc = {"schema": SCHEMA, "version": SCHEMA_VERSION, "parts": list(parts)}

    # Structs as objects of their fields, enums as values, numpy scalars as numbers (a non-finite float in a field
    # that cannot be None is written as null, which decode_parts refuses: the model never holds one there). orjson,
    # not msgspec.json, writes it: the two write some floats differently (1e+16 / 1e16), and version 1's bytes are
    # orjson's.
    def plain(v: object) -> object:
        if isinstance(v, Struct):
            return asdict(v)
        if isinstance(v, Mapping):
            return dict(v)
        raise TypeError(f"cannot encode {type(v).__name__} in rank parts")

    raw = orjson.dumps(doc, default=plain, option=orjson.OPT_SERIALIZE_NUMPY)
    return gzip.compress(raw, compresslevel=6, mtime=0)


def decode_parts(data: bytes) -> list[RankPart]:
    """The rank parts ``encode_parts`` wrote, checked field by field (``PartFormatError`` naming the bad one).

    The document is validated whole against ``part_checks``' types, then decoded straight into the model, both by
    msgspec in C (a number in a float field becomes a float; ``counts`` keep their integers): ~0.3 ms per rank, so
    a job's thousands of ranks merge in a second."""
    import msgspec

    from .part_checks import header_type, validator

    raw = _inflate(data)
    try:
        head = msgspec.json.decode(raw, type=header_type())
    except msgspec.ValidationError:  # (a DecodeError too: first)
        raise PartFormatError(f"not a {SCHEMA} document (not a JSON object)") from None
    except msgspec.DecodeError as e:  # not JSON (a NaN, a bad byte, truncated)
        raise PartFormatError(f"rank parts are not valid JSON: {e}") from None
    except RecursionError:  # msgspec's own limit on nesting, wherever in the document
        raise PartFormatError("rank parts nest too deep") from None
    if head.schema != SCHEMA:
        raise PartFormatError(f"not a {SCHEMA} document (schema {head.schema!r:.80})")
    if head.version != SCHEMA_VERSION or isinstance(head.version, bool):
        reads = f"this dyno reads {SCHEMA_VERSION}"
        raise PartFormatError(f"{SCHEMA} version {head.version!r:.40} is not supported ({reads})")
    # The cyclic GC paused while decoding: the parts are trees (no cycle to collect), and the collections that their
    # ~100 objects per rank set off cost as much again as the decoding (1,024 ranks: 0.2 s of 0.5 s).
    try:
        with gc_paused():
            validator().decode(raw)
            return list(_document_decoder().decode(raw).parts)
    except msgspec.ValidationError as e:
        raise PartFormatError(_named(str(e))) from None
    except RecursionError:
        raise PartFormatError("rank parts nest too deep") from None


def _named(message: str) -> str:
    """msgspec's "Expected `float` >= 0.0 - at `$.parts[0].summary.span_us`" as "parts[0].summary.span_us: expected
    `float` >= 0.0"."""
    what, sep, where = message.partition(" - at `$.")
    if not sep:
        return f"rank parts: {message[:1].lower()}{message[1:]}"
    return f"{where.rstrip('`')}: {what[:1].lower()}{what[1:]}"


@functools.cache
def _document_decoder() -> Any:
    import msgspec

    from .api import RankPart

    fields = [("schema", str), ("version", int), ("parts", list[RankPart])]
    return msgspec.json.Decoder(msgspec.defstruct("RankPartsDocument", fields))


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
