"""Typed decoding of a batch of Chrome-trace events: only the fields the model uses, no Python dict per event.

Why: building a dict per event (with an args dict of ~10 keys, most never read) and then reading it back with
``.get`` chains was most of the load time. ``msgspec`` decodes each element straight into a small slotted
``Event`` struct and skips unknown keys without creating objects for them; the args values the model keeps are
fields of ``EventArgs``. ``Input Dims`` / ``Input type`` stay raw JSON bytes (``msgspec.Raw``): the model interns
them as JSON strings anyway.

Every field but ``ph`` is typed ``Any`` (``args`` must be an object or null) so that a value of an unexpected
JSON type is carried as is and converted by the same code as before. A batch that does not fit (an element that
is not an object, ``ph`` that is not a string, ``args`` that is not an object, or anything msgspec rejects) makes
``decode_events`` return None, and the caller parses that batch the general way (orjson dicts), which also
produces the error message for invalid JSON. One leniency: keys the structs skip are not validated as strictly
as orjson does (invalid UTF-8 inside an unused string value is accepted).

Native accelerator: when the optional C extension ``dyno.trace_analysis._native`` is built (``_native.c``),
``decode_native`` is tried first. It writes the columns of complete and flow events straight into buffers (no
Python object per event) and declines (None) whatever it does not reproduce exactly, so the decoders here run
for those batches. ``DYNO_NATIVE_PARSE=0`` in the environment turns it off (tests compare both paths).
"""

from __future__ import annotations

import logging
import os
from types import ModuleType
from typing import Any

import msgspec
import orjson

__all__ = [
    "Event",
    "EventArgs",
    "EMPTY_ARGS",
    "NativeBatch",
    "decode_batch",
    "decode_events",
    "decode_fast",
    "decode_native",
    "element_texts",
    "native_available",
    "native_enabled",
]

logger = logging.getLogger(__name__)

_native: ModuleType | None
try:
    from dyno.trace_analysis import _native  # type: ignore[attr-defined,no-redef]
except ImportError:  # built without a C compiler: the Python decoders do all the work
    _native = None

NATIVE_ENV = "DYNO_NATIVE_PARSE"  # "0": never use the native decoder

_f = msgspec.field


class EventArgs(msgspec.Struct, gc=False):
    """The args keys the columns of complete events read; others are skipped. Declared in the order Kineto
    writes them (msgspec tries the next declared field first, ~8% faster than another order)."""

    external_id: Any = _f(default=None, name="External id")
    device: Any = None
    stream: Any = None
    correlation: Any = None
    # raw JSON text; None when absent (a declared "msgspec.Raw | None" would decode the value instead)
    input_dims: msgspec.Raw = _f(default=None, name="Input Dims")  # type: ignore[assignment]
    input_types: msgspec.Raw = _f(default=None, name="Input type")  # type: ignore[assignment]
    seq: Any = _f(default=None, name="Sequence number")
    bytes: Any = None
    in_nelems: Any = _f(default=None, name="In msg nelems")
    out_nelems: Any = _f(default=None, name="Out msg nelems")
    group_size: Any = _f(default=None, name="Group size")
    coll_name: Any = _f(default=None, name="Collective name")
    dtype: Any = None


class Event(msgspec.Struct, gc=False):
    """One traceEvents element; a missing key reads as the default (as ``dict.get`` did). Instant, metadata and
    other rare events are re-parsed whole by the caller, so only what complete and flow events need is here."""

    ph: str | None = None  # a phase of another JSON type sends the batch to the general parser
    cat: Any = None
    name: Any = ""
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = 0
    id: Any = None
    args: EventArgs | None = None


EMPTY_ARGS = EventArgs()

_DECODER = msgspec.json.Decoder(list[Event])
_ELEMENTS = msgspec.json.Decoder(list[msgspec.Raw])


def decode_events(batch: bytes | bytearray | memoryview) -> list[Event] | None:
    """The elements of a JSON array of events as ``Event`` structs; None when the batch needs the general parser."""
    try:
        return _DECODER.decode(batch)
    # DecodeError includes ValidationError (a well-formed value of an unexpected shape); RecursionError: values
    # nested deeper than msgspec decodes (the general parser then reports the batch as invalid JSON)
    except (msgspec.DecodeError, RecursionError):
        return None


def element_texts(batch: bytes | bytearray | memoryview) -> list[bytes]:
    """The raw JSON text of each element of a batch (for the few events that keep more than ``Event`` holds)."""
    return [bytes(r) for r in _ELEMENTS.decode(batch)]


class NativeBatch:
    """One batch decoded by the native extension: ``cols`` maps column names to bytearrays (wrapped with
    ``numpy.frombuffer`` by the builder), counts and per-field lists of distinct strings (see ``_native.c``)."""

    __slots__ = ("cols",)

    def __init__(self, cols: dict[str, Any]) -> None:
        self.cols = cols

    def __len__(self) -> int:
        return int(self.cols["n"])


def native_available() -> bool:
    """Whether the C extension was built and imports."""
    return _native is not None


def native_enabled() -> bool:
    """Whether loads use the C extension now (built, and not turned off with ``DYNO_NATIVE_PARSE=0``)."""
    return _native is not None and os.environ.get(NATIVE_ENV, "1") != "0"


def decode_native(batch: bytes | bytearray | memoryview) -> NativeBatch | None:
    """Columns of a JSON array of events from the C extension; None when it is off, absent, or declines."""
    if _native is None or os.environ.get(NATIVE_ENV, "1") == "0":
        return None
    cols = _native.decode_batch(batch)
    return None if cols is None else NativeBatch(cols)


def decode_fast(batch: bytes | bytearray | memoryview) -> list[Any] | NativeBatch | None:
    """A speculative cut (see ``jsonscan``): native columns, else ``Event`` structs; None when both decline."""
    native = decode_native(batch)
    return native if native is not None else decode_events(batch)


def decode_batch(batch: bytes) -> list[Any] | NativeBatch:
    """``decode_fast``'s columns or structs when the batch fits (the common case), else the general parser (dicts),
    which also raises the error for invalid JSON."""
    fast = decode_fast(batch)
    return fast if fast is not None else orjson.loads(batch)
