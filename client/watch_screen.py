"""`dyno-cli metrics --watch` on a terminal: one screen that fits the terminal's width and height.

The full view (every metric, one table per kind of entity) is ~80 lines for 8 GPUs and wider than 200 columns: on
an 80x24 terminal its rows wrapped and the header scrolled away at each redraw. A screen is tables (Block) fitted
to the terminal: the columns that fit in width are kept (the first, naming the row, always), the rows that fit in
height, and the last lines say what was left out and how to see it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from dyno.client.format import table

__all__ = ["Block", "fit_screen"]

_MIN_WIDTH = 20
_MIN_HEIGHT = 8
_NOTE_LINES = 2  # what was left out: at most this many lines


@dataclass(frozen=True)
class Block:
    """One table: `headers`, `rows` of formatted cells, and `what` it is called in the note ("GPU table")."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    what: str
    text: tuple[str, ...] = ()  # columns of names (left-aligned even when they start with a digit)


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def _columns(block: Block, width: int) -> tuple[Block, list[str]]:
    """`block` with the columns that fit in `width` (the first always), and the headers left out."""
    widths = [max([len(h), *(len(r[i]) for r in block.rows)]) for i, h in enumerate(block.headers)]
    keep, used = 1, widths[0]
    while keep < len(widths) and used + 2 + widths[keep] <= width:
        used += 2 + widths[keep]
        keep += 1
    if keep == len(widths):
        return block, []
    rows = tuple(r[:keep] for r in block.rows)
    return Block(block.headers[:keep], rows, block.what, block.text), list(block.headers[keep:])


def _rows_for(blocks: Sequence[Block], room: int) -> list[int]:
    """How many rows of each block fit in `room` lines (a block takes a blank line, its header and rule, then its
    rows): the earlier blocks first, each keeping at least one row while there is room for it."""
    wanted = [len(b.rows) for b in blocks]
    shown = [min(1, n) for n in wanted]
    left = room - sum(3 + s for s in shown)
    for i, n in enumerate(wanted):
        more = max(0, min(n - shown[i], left))
        shown[i] += more
        left -= more
    return shown


def fit_screen(title: str, blocks: Sequence[Block], width: int, height: int, always_left_out: str = "") -> str:
    """`title`, then `blocks`, within `width` x `height` characters; the last lines say what was left out (each
    block's columns and rows, and `always_left_out`, e.g. the metrics the screen never shows), when anything was."""
    width, height = max(width, _MIN_WIDTH), max(height, _MIN_HEIGHT)
    fitted, notes, column_notes = [], [], []  # what is missing from the screen first, then what is cut narrower
    for b in blocks:
        kept, dropped = _columns(b, width)
        fitted.append(kept)
        if dropped:
            column_notes.append(f"{len(dropped)} column(s) of the {b.what} ({', '.join(dropped)})")
    room = height - 1 - _NOTE_LINES - 1  # the title, the note, and the line the cursor rests on
    shown = _rows_for(fitted, room)
    out = [_cut(title, width)]
    for b, n in zip(fitted, shown, strict=True):
        if 3 + n > room or (b.rows and n == 0):
            notes.append(f"the {b.what} ({len(b.rows)} row(s))")
            continue
        room -= 3 + n
        if n < len(b.rows):
            notes.append(f"{len(b.rows) - n} of {len(b.rows)} rows of the {b.what}")
        out.append("")
        lines = table(list(b.headers), [list(r) for r in b.rows[:n]], text=b.text).splitlines()
        out += [_cut(line, width) for line in lines]
    notes += column_notes
    if always_left_out:
        notes.append(always_left_out)
    if notes:
        note = textwrap.wrap(f"not shown ({width}x{height}): " + "; ".join(notes), width)
        if len(note) > _NOTE_LINES:
            note = [*note[: _NOTE_LINES - 1], _cut(" ".join(note[_NOTE_LINES - 1 :]), width)]
        out += note
    return "\n".join(out)
