"""The /metrics WSGI app: prometheus_client's `make_wsgi_app`, answer for answer (content negotiation, gzip,
`name[]`, OPTIONS, 405, /favicon.ico), with faster encoders for the formats Prometheus and curl ask for.

Why: prometheus_client's encoders escape every label name and value of every sample on every scrape (~10 us a
sample), and compress at gzip level 9: most of dynod's cost when scraped every second. dynod's label sets repeat
from scrape to scrape, so the encoders here render each one once (LabelCache) and otherwise write what
prometheus_client writes, byte for byte (tests/unit/daemon/test_exposition.py compares both over every format); gzip is
level 1. Whatever they do not cover (another format, escaping or version, an exemplar, a timestamp, a unit, a name
outside the legacy character set) goes to prometheus_client's own encoder.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

__all__ = ["LabelCache", "encode_text", "encode_openmetrics", "make_app"]

WsgiApp = Callable[..., Any]

_LEGACY_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LEGACY_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_TEXT_TYPES = {"gauge": "gauge", "counter": "counter", "info": "gauge", "unknown": "untyped"}
_TEXT_SUFFIX = {"counter": "_total", "info": "_info"}


class _Unsupported(Exception):
    """A family the fast encoders do not write: prometheus_client's encoder answers instead."""


def _escape_help(text: str) -> str:  # the text format's HELP: quotes stay as they are
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _escape_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class LabelCache:
    """`{name="value",...}` per label set (as a sample's label dict's items), rendered once: dynod's label sets are
    the same every scrape. Bounded: cleared when full (devices that come and go make new sets)."""

    MAX_ENTRIES = 20_000

    def __init__(self) -> None:
        self._rendered: dict[tuple[tuple[str, str], ...], str] = {}

    def render(self, labels: dict[str, str]) -> str:
        key = tuple(labels.items())
        text = self._rendered.get(key)
        if text is None:
            if not labels:
                return ""
            if not all(_LEGACY_LABEL.fullmatch(k) for k in labels):
                raise _Unsupported(f"label name in {list(labels)}")
            text = "{" + ",".join(f'{k}="{_escape_value(v)}"' for k, v in sorted(labels.items())) + "}"
            if len(self._rendered) >= self.MAX_ENTRIES:
                self._rendered.clear()
            self._rendered[key] = text
        return text


def _sample_line(s: Sample, labels: LabelCache) -> str:
    if s.timestamp is not None or s.exemplar is not None or s.native_histogram is not None:
        raise _Unsupported(s.name)
    return f"{s.name}{labels.render(s.labels)} {floatToGoString(s.value)}\n"


def encode_text(metrics: Iterable[Any], labels: LabelCache) -> bytes:
    """The text format 0.0.4, as prometheus_client.generate_latest writes it. Raises _Unsupported."""
    out: list[str] = []
    for metric in metrics:
        kind = _TEXT_TYPES.get(metric.type)
        if kind is None or metric.unit or not _LEGACY_NAME.fullmatch(metric.name):
            raise _Unsupported(metric.name)
        name = metric.name + _TEXT_SUFFIX.get(metric.type, "")
        out.append(f"# HELP {name} {_escape_help(metric.documentation)}\n")
        out.append(f"# TYPE {name} {kind}\n")
        for s in metric.samples:
            if s.name in (metric.name + "_created", metric.name + "_gsum", metric.name + "_gcount"):
                raise _Unsupported(s.name)  # written apart by prometheus_client
            out.append(_sample_line(s, labels))
    return "".join(out).encode("utf-8")


def encode_openmetrics(metrics: Iterable[Any], labels: LabelCache) -> bytes:
    """OpenMetrics 1.0.0, as prometheus_client.openmetrics.exposition.generate_latest writes it. Raises
    _Unsupported."""
    out: list[str] = []
    for metric in metrics:
        if metric.type not in _TEXT_TYPES or metric.unit or not _LEGACY_NAME.fullmatch(metric.name):
            raise _Unsupported(metric.name)
        out.append(f"# HELP {metric.name} {_escape_value(metric.documentation)}\n")
        out.append(f"# TYPE {metric.name} {metric.type}\n")
        for s in metric.samples:
            out.append(_sample_line(s, labels))
    out.append("# EOF\n")
    return "".join(out).encode("utf-8")


# prometheus_client.exposition.choose_encoder's content types -> the encoder here that writes the same bytes
_FAST: dict[str, Callable[[Iterable[Any], LabelCache], bytes]] = {
    "text/plain; version=0.0.4; charset=utf-8": encode_text,
    "text/plain; version=1.0.0; charset=utf-8; escaping=underscores": encode_text,
    "application/openmetrics-text; version=1.0.0; charset=utf-8": encode_openmetrics,
    "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores": encode_openmetrics,
}


def make_app(registry: CollectorRegistry) -> WsgiApp:
    """The WSGI app serving `registry` (what prometheus_client.make_wsgi_app(registry) answers, faster)."""
    labels = LabelCache()

    def bake(environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
        encoder, content_type = choose_encoder(environ.get("HTTP_ACCEPT") or "")
        params = parse_qs(environ.get("QUERY_STRING", ""))
        source: Collector = registry
        if "name[]" in params:
            source = registry.restricted_registry(params["name[]"])
        fast = _FAST.get(content_type)
        output: bytes | None = None
        if fast is not None:
            try:
                output = fast(source.collect(), labels)
            except _Unsupported:
                output = None
        if output is None:
            output = encoder(source)
        headers = [("Content-Type", content_type)]
        if gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING") or ""):
            # level 1, not prometheus_client's 9: ~5x less CPU for ~12% more bytes (every Prometheus asks for gzip)
            output = gzip.compress(output, compresslevel=1)
            headers.append(("Content-Encoding", "gzip"))
        return "200 OK", headers, output

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        method = environ["REQUEST_METHOD"]
        if method == "OPTIONS":
            status, headers, output = "200 OK", [("Allow", "OPTIONS,GET")], b""
        elif method != "GET":
            status = "405 Method Not Allowed"
            headers = [("Allow", "OPTIONS,GET")]
            output = f"# HTTP {status}: {method}; use OPTIONS or GET\n".encode()
        elif environ["PATH_INFO"] == "/favicon.ico":
            status, headers, output = "200 OK", [], b""
        else:
            status, headers, output = bake(environ)
        start_response(status, headers)
        return [output]

    return app
