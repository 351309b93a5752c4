"""String-valued fields of one batch -> id columns into the trace's ``StringTable`` (names, categories of flows,
pid/tid labels such as "Spans", JSON-serialized args), for every load path: each path interns in first-seen
order, so all paths give the same ids.

Used by ``dyno.trace_analysis.builder`` and ``assembly``.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import repeat
from operator import is_not
from typing import Any, cast

import msgspec
import numpy as np
import orjson

from dyno.trace_analysis.strings import StringTable

__all__ = ["Interner"]

_INT_TYPE = {int}
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class Interner:
    """Id columns of one trace's batches, all against ``strings`` (one per load)."""

    def __init__(self, strings: StringTable | None = None) -> None:
        self.strings = strings if strings is not None else StringTable()
        self._raw_json_ids_known: dict[bytes, int] = {}

    def ids(self, values: Any) -> list[int]:
        """String ids of a batch's values (names, flow cats): strings as they are, None -> "", others -> str()."""
        table = self.strings
        try:
            out = list(map(table._ids.get, values))  # fast path: one dict hit per value, in C
        except TypeError:  # an unhashable value (e.g. a list as name)
            out = [None] * len(values)
        if None in out:  # new strings, or values that are not strings
            out = [
                i if i is not None else table.intern(v if type(v) is str else ("" if v is None else str(v)))
                for i, v in zip(out, values, strict=True)
            ]
        return out  # type: ignore[return-value]

    def proc_ids(self, values: Any) -> np.ndarray:
        """pid/tid column: ints kept, anything else (e.g. "Spans") -> -(1 + string id)."""
        if set(map(type, values)) <= _INT_TYPE:
            try:
                return np.array(values, dtype=np.int64)
            except OverflowError:  # beyond int64: kept as a label, as a string is
                pass
        out = [
            v if type(v) is int and _INT64_MIN <= v <= _INT64_MAX else -(1 + self.strings.intern(str(v)))
            for v in values
        ]
        return np.array(out, dtype=np.int64)

    def json_ids(self, values: Any) -> list[int]:
        """String ids of values serialized as compact JSON; -1 for None / JSON null."""
        return [-1 if v is None else self.strings.intern(orjson.dumps(v).decode()) for v in values]

    def raw_json_ids(self, values: list[msgspec.Raw | None]) -> np.ndarray:
        """``json_ids`` of raw JSON texts from the typed decoder (None where absent): each distinct text is
        re-serialized once, so both parsers give the same strings."""
        out = np.full(len(values), -1, dtype=np.int32)
        present = np.fromiter(map(is_not, values, repeat(None)), dtype=bool, count=len(values))
        texts = list(map(bytes, filter(None, values)))  # a Raw is never empty, hence truthy
        known = self._raw_json_ids_known
        ids = list(map(known.get, texts))
        if None in ids:
            self._learn_raw_texts(t for t, i in zip(texts, ids, strict=True) if i is None)
            ids = list(map(known.__getitem__, texts))
        out[present] = cast("list[int]", ids)  # every None was resolved above
        return out

    def _learn_raw_texts(self, texts: Iterable[bytes]) -> None:
        """Intern the compact JSON of raw texts not seen yet, in first-seen order (JSON null -> -1)."""
        known = self._raw_json_ids_known
        for text in dict.fromkeys(texts):
            if text not in known:
                parsed = orjson.loads(text)
                known[text] = -1 if parsed is None else self.strings.intern(orjson.dumps(parsed).decode())

    def native_ids(self, local: bytearray, strings: list[str]) -> np.ndarray:
        """Global string ids of a native string column: local ids into ``strings`` (-1: absent, kept)."""
        ids = np.array([*self.strings.intern_all(strings), -1], dtype=np.int32)
        return ids[np.frombuffer(local, dtype=np.int32)]  # local -1 picks the appended -1

    def native_json_ids(self, local: bytearray, values: list[str | bytes]) -> np.ndarray:
        """Ids of a native raw-JSON column: each distinct value is its compact JSON (str) where the native decoder
        could write it exactly, else its raw text (bytes), normalized here as ``raw_json_ids`` does."""
        known = self._raw_json_ids_known
        table = self.strings
        by_text = cast("dict[str | bytes, int]", table._ids)  # a bytes value is simply never found
        ids: list[int | None] = list(map(by_text.get, values))  # most repeat across batches: one dict hit each
        for i in [i for i, v in enumerate(ids) if v is None]:  # first-seen order, as the other paths intern them
            v = values[i]
            if isinstance(v, str):
                ids[i] = table.intern(v)
            else:
                if v not in known:
                    self._learn_raw_texts((v,))
                ids[i] = known[v]
        ids.append(-1)
        return np.array(ids, dtype=np.int32)[np.frombuffer(local, dtype=np.int32)]  # local -1 -> the appended -1

    def native_proc_ids(self, c: dict[str, Any], key: str) -> np.ndarray:
        """pid/tid column of a native batch: ints kept, strings -> -(1 + string id) as in ``proc_ids``."""
        vals = np.frombuffer(c[key], dtype=np.int64)
        if c[key + "_s"] is None:
            return vals
        ids = np.array([-(1 + self.strings.intern(s)) for s in c[key + "_u"]], dtype=np.int64)
        local = np.frombuffer(c[key + "_s"], dtype=np.int32)
        return np.where(local >= 0, ids[local], vals)
