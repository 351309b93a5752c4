"""dyno-cli's --json form of a dyno.v1 message: protobuf's JSON mapping with the proto field names, every field
present, and 64-bit integers as JSON numbers.

protobuf's mapping writes int64/uint64 as strings (JavaScript's numbers hold 53 bits), so `jq
'.samples[0].timestamp_ms / 1000'` failed on a string. The values dyno sends (unix ms, byte counts, sizes) are far
below 2**53, and the tools reading --json (jq, Python, Go's encoding/json) read big integers exactly anyway.
Doubles that are not finite stay the strings "NaN", "Infinity", "-Infinity" (JSON has no such numbers).

JSON_SCHEMA is the version of this form (docs/API.md, "dyno-cli --json"): it grows by fields the protos add,
and changes number only when a field a tool may read changes its type or meaning.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

__all__ = ["JSON_SCHEMA", "proto_to_dict"]

JSON_SCHEMA = 1

_INT64 = (FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT64)


def proto_to_dict(msg: Message) -> dict[str, Any]:
    d = json_format.MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    _numbers(msg.DESCRIPTOR, d)
    return d


def _value(field: FieldDescriptor, value: Any) -> Any:
    if field.cpp_type in _INT64:
        return int(value)
    if field.message_type is not None and isinstance(value, dict):
        _numbers(field.message_type, value)
    return value


def _numbers(descriptor: Descriptor, d: dict[str, Any]) -> None:
    """In place: the 64-bit integers of `d` (MessageToDict of a `descriptor` message) as ints."""
    for field in descriptor.fields:
        if field.name not in d:
            continue
        value = d[field.name]
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            inner = entry.fields_by_name["value"]
            d[field.name] = {k: _value(inner, v) for k, v in value.items()}
        elif isinstance(value, list):
            d[field.name] = [_value(field, v) for v in value]
        else:
            d[field.name] = _value(field, value)
