"""Rank parts on the wire (trace_analysis.part_codec): the report over decoded parts is the report over the parts,
on the shared GPU traces and on generated jobs; thinning keeps the figures and says so; and decode_parts refuses
whatever a hostile host could send (gzip bombs, deep nesting, wrong types, NaN, negative durations, huge lists)
with a PartFormatError naming the field, quickly."""

from __future__ import annotations

import enum
import gzip
import json
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest
from multirank_jobs import cpu_job, gpu_job

from dyno.trace_analysis.api import RankPart, analyze_rank, report_of
from dyno.trace_analysis.loader import load_traces
from dyno.trace_analysis.part_codec import (
    MAX_INFLATED,
    MAX_LIST,
    MAX_PARTS,
    SCHEMA,
    PartFormatError,
    PartsTooLargeError,
    decode_parts,
    encode_parts,
)
from dyno.trace_analysis.report import render_html, render_json, render_text
from dyno.trace_analysis.rules import select_rules
from dyno.trace_analysis.rules.engine import resolve_rule_thresholds

from conftest import SHARED_TRACES

pytestmark = pytest.mark.unit

RULES = select_rules(None)
RESOLVED = resolve_rule_thresholds(None)
BIG = 64 * 2**20


def parts_of(folder: Path) -> list[RankPart]:
    return [analyze_rank(t, RULES, RESOLVED) for t in load_traces([str(folder)])]


def report(parts: list[RankPart]) -> tuple[str, str, str]:
    r = report_of(parts, RULES, RESOLVED, (), ())
    return render_json(r), render_text(r), render_html(r)


SHARED = sorted(p.name for p in SHARED_TRACES.iterdir() if p.is_dir()) if SHARED_TRACES.is_dir() else []


@pytest.mark.skipif(not SHARED, reason=f"shared GPU traces not found at {SHARED_TRACES}")
@pytest.mark.parametrize("name", SHARED)
def test_round_trip_renders_the_same_report_on_the_shared_traces(name: str) -> None:
    parts = parts_of(SHARED_TRACES / name)
    data, thinned = encode_parts(parts, 3 * 2**20)
    assert not thinned and data[:2] == b"\x1f\x8b"
    assert report(decode_parts(data)) == report(parts)


def _fields_in_order(v: object) -> object:
    """Version 1's layout, written out independently of the codec: each model object an object of its fields in
    declaration order, tuples as lists, enums as their values (hosts of other versions read these bytes)."""
    if isinstance(v, msgspec.Struct):
        return {f: _fields_in_order(getattr(v, f)) for f in v.__struct_fields__}
    if isinstance(v, enum.Enum):
        return v.value
    if isinstance(v, tuple | list):
        return [_fields_in_order(x) for x in v]
    if isinstance(v, Mapping):
        return {k: _fields_in_order(x) for k, x in v.items()}
    return v


def _assert_version_1_bytes(parts: list[RankPart]) -> None:
    # a float that msgspec.json would write differently (1e16, where orjson and version 1 write 1e+16)
    parts[0] = msgspec.structs.replace(parts[0], summary=msgspec.structs.replace(parts[0].summary, span_us=1e16))
    doc = {"schema": SCHEMA, "version": 1, "parts": [_fields_in_order(p) for p in parts]}
    want = orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)
    assert gzip.decompress(encode_parts(parts, BIG)[0]) == want


@pytest.mark.skipif(not SHARED, reason=f"shared GPU traces not found at {SHARED_TRACES}")
@pytest.mark.parametrize("name", SHARED)
def test_the_document_is_version_1s_bytes_on_the_shared_traces(name: str) -> None:
    _assert_version_1_bytes(parts_of(SHARED_TRACES / name))


@pytest.mark.torch
def test_round_trip_of_real_torch_cpu_traces(cpu_traces: dict[str, Path]) -> None:
    for path in cpu_traces.values():
        parts = parts_of(path)
        assert report(decode_parts(encode_parts(parts, BIG)[0])) == report(parts)


@pytest.fixture(scope="module")
def gpu_parts(tmp_path_factory: pytest.TempPathFactory) -> list[RankPart]:
    return parts_of(gpu_job(tmp_path_factory.mktemp("gpu"), [100_000, 101_000, 99_500, 160_000]))


def test_the_document_is_version_1s_bytes_on_generated_jobs(gpu_parts: list[RankPart], tmp_path: Path) -> None:
    _assert_version_1_bytes(list(gpu_parts))
    _assert_version_1_bytes(parts_of(cpu_job(tmp_path / "cpu", [100_000, 99_000, 150_000])))


def test_round_trip_of_a_generated_job_keeps_its_straggler(gpu_parts: list[RankPart], tmp_path: Path) -> None:
    cpu = parts_of(cpu_job(tmp_path / "cpu", [100_000, 99_000, 150_000]))
    for parts in (gpu_parts, cpu):
        back = decode_parts(encode_parts(parts, BIG)[0])
        assert report(back) == report(parts)
        assert [p.rank for p in back] == [p.rank for p in parts]
    r = report_of(decode_parts(encode_parts(gpu_parts, BIG)[0]), RULES, RESOLVED, (), ())
    (f,) = r.findings_of("straggler")
    assert f.rank == 3 and "straggler among 4 ranks" in f.title


def test_over_the_limit_parts_are_thinned_stage_by_stage(gpu_parts: list[RankPart]) -> None:
    full, _ = encode_parts(gpu_parts, BIG)
    data, thinned = encode_parts(gpu_parts, len(full) - 1)
    assert thinned and len(data) < len(full)
    back = decode_parts(data)
    assert all(not p.summary.timelines for p in back)  # the first stage
    assert any(p.summary.timelines for p in gpu_parts)
    # the figures stay: findings, time lost, step statistics, breakdowns
    a, b = (report_of(x, RULES, RESOLVED, (), ()) for x in (gpu_parts, back))
    assert [(f.rule_id, f.rank, f.evidence.time_lost_us) for f in a.findings] == [
        (f.rule_id, f.rank, f.evidence.time_lost_us) for f in b.findings
    ]
    assert [r.breakdown for r in a.ranks] == [r.breakdown for r in b.ranks]
    assert [r.steps.mean_us for r in a.ranks if r.steps] == [r.steps.mean_us for r in b.ranks if r.steps]


def test_the_last_stage_drops_every_example_and_then_refuses(gpu_parts: list[RankPart]) -> None:
    sizes = []
    limit = len(encode_parts(gpu_parts, BIG)[0])
    while True:
        try:
            data, thinned = encode_parts(gpu_parts, limit)
        except PartsTooLargeError as e:
            assert "over the" in str(e) and isinstance(e, ValueError)
            break
        sizes.append(len(data))
        limit = len(data) - 1
    assert len(sizes) >= 3 and sizes == sorted(sizes, reverse=True)
    last = decode_parts(gpu_parts and encode_parts(gpu_parts, sizes[-1])[0])
    assert all(not f.evidence.examples for p in last for _, fs in p.rules for f in fs)
    assert all(p.summary.tables is None for p in last)


def test_no_numpy_is_imported_with_the_codec() -> None:
    code = (
        "import sys, dyno.trace_analysis.part_codec, dyno.trace_analysis.host_summary; "
        "print(sorted(m for m in ('numpy', 'dyno.trace_analysis.api', 'dyno.trace_analysis.report')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


# --- hostile input -------------------------------------------------------------------------------------------


def doc_of(gpu_parts: list[RankPart]) -> dict[str, Any]:
    return json.loads(gzip.decompress(encode_parts(gpu_parts, BIG)[0]))


def packed(doc: object) -> bytes:
    return gzip.compress(json.dumps(doc).encode())  # json writes Infinity / NaN literals as given


def refused(data: bytes, *words: str) -> str:
    t0 = time.perf_counter()
    with pytest.raises(PartFormatError) as e:
        decode_parts(data)
    assert time.perf_counter() - t0 < 10  # bounded: a generous ceiling, not a timing target
    for w in words:
        assert w in str(e.value)
    return str(e.value)


def test_not_gzip_truncated_or_trailing_data_are_refused(gpu_parts: list[RankPart]) -> None:
    good = encode_parts(gpu_parts, BIG)[0]
    refused(b"", "not gzip")
    refused(b'{"schema": 1}', "not gzip")
    refused(good[: len(good) // 2], "truncated")
    refused(good + good, "after the gzip stream")
    refused(good[:20] + bytes(len(good) - 20), "corrupt")


def test_a_gzip_bomb_stops_at_the_cap() -> None:
    bomb = gzip.compress(b"[" + b" " * (MAX_INFLATED + 10) + b"]", compresslevel=9)
    assert len(bomb) < 200_000
    refused(bomb, f"more than {MAX_INFLATED // 2**20} MiB")


def test_deep_nesting_and_invalid_json_are_refused() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    refused(gzip.compress(deep), "not a dyno.trace_analysis.rank_parts document")
    for key in (b"schema", b"extra", b"parts"):
        doc = b'{"version": 1, "' + key + b'": ' + deep + b', "schema": "' + SCHEMA.encode() + b'"}'
        refused(gzip.compress(doc), "nest too deep")
    refused(gzip.compress(b'{"schema": "' + SCHEMA.encode() + b'", "version": 1, "parts": [NaN]}'), "not valid JSON")
    refused(gzip.compress(b"\xff\xfe"), "not valid JSON")


def test_wrong_schema_version_or_container_is_refused(gpu_parts: list[RankPart]) -> None:
    doc = doc_of(gpu_parts)
    refused(packed([1, 2]), "not a dyno.trace_analysis.rank_parts document")
    refused(packed({**doc, "schema": "x"}), "schema 'x'")
    refused(packed({**doc, "version": 2}), "version 2 is not supported")
    refused(packed({**doc, "version": True}), "not supported")
    refused(packed({**doc, "parts": {}}), "parts: expected `array`, got `object`")


def test_more_parts_than_the_cap_are_refused(gpu_parts: list[RankPart], monkeypatch: pytest.MonkeyPatch) -> None:
    import dyno.trace_analysis.part_checks as checks

    assert checks.MAX_PARTS == MAX_PARTS == 4096
    monkeypatch.setattr(checks, "MAX_PARTS", 3)  # 4,097 real parts would pass the inflate cap only just
    checks.validator.cache_clear()
    try:
        refused(encode_parts(gpu_parts, BIG)[0], "parts: expected `array` of length <= 3")
    finally:
        checks.validator.cache_clear()


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        (("summary", "span_us"), "12", "parts[0].summary.span_us: expected `float`, got `str`"),
        (("summary", "span_us"), -1.0, "parts[0].summary.span_us: expected `float` >= 0.0"),
        (("summary", "span_us"), 1e999, "not valid JSON"),  # orjson refuses an infinite literal
        (("summary", "events"), 1.5, "parts[0].summary.events: expected `int`, got `float`"),
        (("summary", "events"), True, "parts[0].summary.events: expected `int`, got `bool`"),
        (("summary", "events"), 2**70, "parts[0].summary.events: expected `int` <= 9223372036854775807"),
        (("summary", "has_gpu"), 1, "parts[0].summary.has_gpu: expected `bool`, got `int`"),
        (("summary", "source"), None, "parts[0].summary.source: expected `str`, got `null`"),
        (("summary", "steps"), [], "parts[0].summary.steps: expected `object | null`, got `array`"),
        (("summary", "steps", "durations_us"), [1.0, -5.0], "summary.steps.durations_us[1]: expected `float` >= 0.0"),
        (
            ("summary", "steps", "durations_us"),
            [1.0] * (MAX_LIST + 1),
            f"durations_us: expected `array` of length <= {MAX_LIST}",
        ),
        (("summary", "breakdown", "idle_us"), -3, "summary.breakdown.idle_us"),
        (("rules", 0, 0, "status"), 5, "parts[0].rules[0][0].status: expected `str`, got `int`"),
        (("rules", 0), [], "parts[0].rules[0]: expected `array` of length 2"),
        (("digest", "span"), [1.0, 2.0, 3.0], "parts[0].digest.span: expected `array` of length 2"),
        (("digest", "timing", "comm_us"), -1.0, "digest.timing.comm_us"),
    ],
)
def test_a_bad_field_is_named(gpu_parts: list[RankPart], path: tuple[Any, ...], value: object, words: str) -> None:
    doc = doc_of(gpu_parts)
    node = doc["parts"][0]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    refused(packed(doc), words)


def test_findings_fields_are_checked(gpu_parts: list[RankPart]) -> None:
    doc = doc_of(gpu_parts)
    i, (outcome, findings) = next((i, r) for i, r in enumerate(doc["parts"][0]["rules"]) if r[1])
    findings[0]["severity"] = "catastrophic"
    refused(packed(doc), f"parts[0].rules[{i}][1][0].severity: invalid enum value 'catastrophic'")
    findings[0]["severity"] = "high"
    findings[0]["evidence"]["time_lost_us"] = -1
    refused(packed(doc), f"parts[0].rules[{i}][1][0].evidence.time_lost_us")
    findings[0]["evidence"]["time_lost_us"] = 0
    del findings[0]["title"]
    refused(packed(doc), f"parts[0].rules[{i}][1][0]: object missing required field `title`")


def test_the_bad_part_is_named_by_its_place(gpu_parts: list[RankPart]) -> None:
    doc = doc_of(gpu_parts)
    doc["parts"][2]["digest"]["timing"]["n_steps"] = -1
    refused(packed(doc), "parts[2].digest.timing.n_steps: expected `int` >= 0")


def test_a_negative_number_where_one_may_be_is_taken(gpu_parts: list[RankPart]) -> None:
    doc = doc_of(gpu_parts)
    doc["parts"][0]["rules"][0][0]["rank"] = -1  # ranks are signed
    doc["parts"][0]["rules"][0][0]["findings"] = 3
    back = decode_parts(packed(doc))
    assert back[0].rules[0][0].rank == -1 and back[0].rules[0][0].findings == 3
    # whitespace before the sign hides nothing: a negative duration is refused however it is written
    text = json.dumps(doc_of(gpu_parts), separators=(", ", ":  "))
    bad = text.replace('"span_us":  ', '"span_us":  -', 1)
    refused(gzip.compress(bad.encode()), "parts[0].summary.span_us: expected `float` >= 0.0")


def test_integer_counts_stay_integers(gpu_parts: list[RankPart]) -> None:
    counts = [f.evidence.counts for p in decode_parts(encode_parts(gpu_parts, BIG)[0]) for _, fs in p.rules for f in fs]
    assert any(isinstance(v, int) for c in counts for v in c.values())


def test_unknown_keys_of_a_newer_writer_are_ignored(gpu_parts: list[RankPart]) -> None:
    doc = doc_of(gpu_parts)
    doc["parts"][0]["summary"]["new_figure"] = {"x": [1, 2]}
    doc["extra"] = "later"
    assert report(decode_parts(packed(doc))) == report(gpu_parts)
