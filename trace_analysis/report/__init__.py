"""Report data model and renderers (terminal text, versioned JSON, standalone HTML).

Each name is loaded from its module on first use: `dyno-cli analyze --json` imports neither the text nor the HTML
renderer (a module that imports ``report.model`` runs this file first, so it must import nothing itself)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dyno.lazy_names import lazy_getattr

if TYPE_CHECKING:
    from .html import render_html
    from .jsonout import render_json
    from .model import SCHEMA, SCHEMA_VERSION, Report
    from .text import render_text

__all__ = ["SCHEMA", "SCHEMA_VERSION", "Report", "render_html", "render_json", "render_text"]

# the submodule that defines each public name
_HOME = {
    "SCHEMA": "model",
    "SCHEMA_VERSION": "model",
    "Report": "model",
    "render_html": "html",
    "render_json": "jsonout",
    "render_text": "text",
}

__getattr__ = lazy_getattr(__name__, _HOME)
