"""Report data model and renderers (terminal text, versioned JSON, standalone HTML)."""

from .html import render_html
from .jsonout import render_json
from .model import SCHEMA, SCHEMA_VERSION, Report
from .text import render_text

__all__ = ["SCHEMA", "SCHEMA_VERSION", "Report", "render_html", "render_json", "render_text"]
