"""Interned strings of one trace (names, categories, JSON-serialized args): ids in the model's columns index
this table. Part of the model (``dyno.trace_analysis.model`` re-exports ``StringTable``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

__all__ = ["StringTable"]


class StringTable:
    """Interned strings: id -> str via indexing, str -> id via ``lookup`` (-1 when absent)."""

    __slots__ = ("_strings", "_ids")

    def __init__(self, strings: Iterable[str] = ()) -> None:
        self._strings: list[str] = []
        self._ids: dict[str, int] = {}
        for s in strings:
            self.intern(s)

    def intern(self, s: str) -> int:
        i = self._ids.get(s)
        if i is None:
            i = len(self._strings)
            self._ids[s] = i
            self._strings.append(s)
        return i

    def intern_all(self, strings: Sequence[str]) -> list[int]:
        """``[self.intern(s) for s in strings]`` for a sequence of str, with the new strings added at once."""
        ids = self._ids
        out = list(map(ids.get, strings))
        if None in out:
            new = dict.fromkeys(s for s, i in zip(strings, out, strict=True) if i is None)
            base = len(self._strings)
            ids.update(zip(new, range(base, base + len(new)), strict=True))
            self._strings.extend(new)
            out = list(map(ids.__getitem__, strings))
        return out  # type: ignore[return-value]

    def lookup(self, s: str) -> int:
        return self._ids.get(s, -1)

    def __getitem__(self, i: int) -> str:
        return self._strings[int(i)]

    def __len__(self) -> int:
        return len(self._strings)

    def __iter__(self) -> Iterator[str]:
        return iter(self._strings)
