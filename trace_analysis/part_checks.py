"""What a rank-parts document may hold, as msgspec types: ``part_codec.decode_parts`` validates a remote host's
document against them in C before decoding it into the model.

The types are derived from the model's msgspec Structs (their type hints), so a field added to the model is checked
without a change here: every field has its type (no NaN or infinity: not JSON; no bool for a number), numbers are
non-negative and integers below 2**63 unless the field is in ``SIGNED``, lists and objects hold at most ``MAX_LIST``
items, a document at most ``MAX_PARTS`` ranks, and a required field must be there. msgspec names the bad field
(``$.parts[2].summary.steps.durations_us[1]``); unknown fields (a newer writer's) are skipped.
"""

from __future__ import annotations

import enum
import functools
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

__all__ = ["MAX_LIST", "MAX_PARTS", "SIGNED", "header_type", "validator"]

MAX_PARTS = 4096  # ranks in one document (one host's)
MAX_LIST = 65_536  # items in any one list or object of a part
# Fields that may hold a negative number: timestamps (a trace's own clock), ranks/devices/streams, distributions of
# signed quantities (launch delay), and rules' free-form counts.
SIGNED = frozenset({"ts_us", "offset_us", "edges_us", "span", "rank", "device", "stream", "counts"}) | frozenset(
    {"mean", "min", "max", "p25", "p50", "p75"}
)
_INT_MAX = 2**63 - 1


@functools.cache
def header_type() -> Any:
    """The document's schema and version, its parts skipped (read first: a wrong document is said as such)."""
    import msgspec

    return msgspec.defstruct("RankPartsHeader", [("schema", object, None), ("version", object, None)])


@functools.cache
def validator() -> Any:
    """A msgspec JSON decoder that checks a whole rank-parts document (its answer is thrown away)."""
    import msgspec

    from .api import RankPart

    parts = Annotated[list[_checked(RankPart)], msgspec.Meta(max_length=MAX_PARTS)]  # type: ignore[misc,valid-type]
    document = msgspec.defstruct("RankPartsDocument", [("schema", str), ("version", int), ("parts", parts)])
    return msgspec.json.Decoder(document)


@functools.cache
def _checked(hint: Any, signed: bool = False) -> Any:
    """The checked msgspec type of a model field of type ``hint`` (``signed``: it may be negative)."""
    import msgspec

    if hint is float:
        return float if signed else Annotated[float, msgspec.Meta(ge=0)]
    if hint is int:
        return Annotated[int, msgspec.Meta(ge=-_INT_MAX if signed else 0, le=_INT_MAX)]
    if hint is str or hint is bool:
        return hint
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is types.UnionType or origin is typing.Union:
        return typing.Union[tuple(type(None) if a is type(None) else _checked(a, signed) for a in args)]  # noqa: UP007
    if origin is Sequence or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        return Annotated[list[_checked(args[0], signed)], msgspec.Meta(max_length=MAX_LIST)]  # type: ignore[misc]
    if origin is tuple:
        return tuple[tuple(_checked(a, signed) for a in args)]  # type: ignore[misc]
    if origin is Mapping or origin is dict:
        value = _checked(args[1], signed)
        return Annotated[dict[str, value], msgspec.Meta(max_length=MAX_LIST)]  # type: ignore[valid-type]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint
    if isinstance(hint, type) and issubclass(hint, msgspec.Struct):
        return _struct(hint)
    raise TypeError(f"rank parts cannot carry a {hint!r} field")  # a model change to follow here


def _struct(cls: type) -> Any:
    """The checked struct of the model Struct ``cls``: its fields checked, the optional ones left out or not."""
    import msgspec

    hints = typing.get_type_hints(cls)
    fields: list[tuple[Any, ...]] = []
    for f in msgspec.structs.fields(cls):
        checked = _checked(hints[f.name], f.name in SIGNED)
        fields.append((f.name, checked) if f.required else (f.name, checked, None))
    # required fields first (msgspec's rule; the order of fields does not matter in JSON)
    fields.sort(key=len)
    return msgspec.defstruct(f"Checked{cls.__name__}", fields)
