"""A dataclass to and from the dyno.v1 message whose fields have the same names and types: one copy of each field
list, the dataclass's. A converter that renames or converts a field on the way spells that field out itself.

Each pair is looked at once (its field names, which of them are repeated) and served by one C-level attrgetter
after: ListJobs pages and fleet summaries convert many records, as fast as a hand-written field list."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from operator import attrgetter
from typing import Any, TypeVar

__all__ = ["from_message", "message_kwargs"]

T = TypeVar("T")

_NAMES: dict[type, tuple[str, ...]] = {}
_GETTERS: dict[type, Callable[[Any], tuple[Any, ...]]] = {}
_READERS: dict[tuple[type, Any], Callable[[Any], Any]] = {}


def _names(cls: type) -> tuple[str, ...]:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def _getter(cls: type) -> Callable[[Any], tuple[Any, ...]]:
    """Reads `cls`'s fields, in their order, off an object (of `cls`, or a message with those fields)."""
    get = _GETTERS.get(cls)
    if get is None:
        names = _names(cls)
        get = _GETTERS[cls] = attrgetter(*names) if len(names) > 1 else lambda o: (getattr(o, names[0]),)
    return get


def message_kwargs(obj: Any) -> dict[str, Any]:
    """The dataclass instance `obj`'s fields by name: the keyword arguments of its message."""
    return dict(zip(_names(type(obj)), _getter(type(obj))(obj), strict=True))


def _reader(cls: type[T], descriptor: Any) -> Callable[[Any], T]:
    names, get = _names(cls), _getter(cls)
    repeated = [i for i, name in enumerate(names) if descriptor.fields_by_name[name].is_repeated]
    if not repeated:
        return lambda m: cls(*get(m))

    def read(m: Any) -> T:
        values = list(get(m))
        for i in repeated:
            values[i] = tuple(values[i])
        return cls(*values)

    return read


def from_message(cls: type[T], message: Any) -> T:
    """A `cls` from `message`, which has each of its fields (and maybe more); a repeated field becomes a tuple."""
    key = (cls, message.DESCRIPTOR)
    read = _READERS.get(key)
    if read is None:
        read = _READERS[key] = _reader(cls, message.DESCRIPTOR)
    return read(message)  # type: ignore[no-any-return]
