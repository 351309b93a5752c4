"""The daemon never imports the client (dyno.client): what both need lives in the dyno core package (core/), e.g. the
trace files' names (dyno.trace_layout) and the error reasons (dyno.error_reasons). Read from the source (AST), so a
lazy import inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

DAEMON = Path(__file__).resolve().parents[3] / "daemon"


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
    return names


def test_no_daemon_module_imports_the_client() -> None:
    files = sorted(DAEMON.rglob("*.py"))
    assert len(files) > 40  # the daemon's sources were found
    offending = [
        f"{f.relative_to(DAEMON)}: {name}"
        for f in files
        for name in _imports(f)
        if name == "dyno.client" or name.startswith("dyno.client.")
    ]
    assert offending == []
