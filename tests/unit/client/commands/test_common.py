"""The commands' JSON output (client/commands/_common.py): a pre-rendered document placed as it is."""

from __future__ import annotations

import json

import orjson

from dyno.client.commands._common import JsonText, json_document


def test_plain_objects_are_indented_as_the_stdlib_does() -> None:
    obj = {"a": [1, 2], "b": {"c": None}}
    assert json_document(obj) == json.dumps(obj, indent=2)
    assert json_document([1]) == json.dumps([1], indent=2)


def test_json_text_is_placed_as_it_is_and_parses_to_the_same_document() -> None:
    report = {"schema": "r", "ranks": [{"rank": 0, "share": 0.25}, {"rank": 1, "share": None}], "empty": {}}
    indented = orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n"
    outer = {"exit_code": 0, "report": JsonText(indented), "after": ["x"]}
    out = json_document(outer)
    assert json.loads(out) == {"exit_code": 0, "report": report, "after": ["x"]}
    # the same text as encoding the decoded report with the stdlib, indentation included
    assert out == json.dumps({"exit_code": 0, "report": report, "after": ["x"]}, indent=2)


def test_compact_json_text_stays_one_line() -> None:
    out = json_document({"report": JsonText('{"a":[1,2]}\n'), "b": 1})
    assert '"report": {"a":[1,2]},' in out
    assert json.loads(out) == {"report": {"a": [1, 2]}, "b": 1}


def test_nested_values_beside_json_text_are_laid_out_as_the_stdlib_does() -> None:
    others = {"summaries": [{"host": "a", "ranks": [0, 1]}, {}], "empty": [], "text": "line\nbreak"}
    out = json_document({**others, "report": JsonText("{}\n")})
    assert out == json.dumps({**others, "report": {}}, indent=2)
