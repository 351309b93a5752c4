"""The import layers (docs/ARCHITECTURE.md, "Import layers"), checked on the source's AST.

dyno.v1 (generated) -> dyno (core/) -> dyno.trace_analysis -> {dyno.daemon, dyno.client} -> dyno.demo.
A module imports from its own layer and the layers below it; dyno.daemon and dyno.client never import each
other. Every import counts: module level, inside functions and under TYPE_CHECKING alike.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]

# Each layer and the layers it may import (itself included).
MAY_IMPORT: dict[str, frozenset[str]] = {
    "dyno.v1": frozenset({"dyno.v1"}),
    "dyno": frozenset({"dyno", "dyno.v1"}),
    "dyno.trace_analysis": frozenset({"dyno.trace_analysis", "dyno", "dyno.v1"}),
    "dyno.daemon": frozenset({"dyno.daemon", "dyno.trace_analysis", "dyno", "dyno.v1"}),
    "dyno.client": frozenset({"dyno.client", "dyno.trace_analysis", "dyno", "dyno.v1"}),
    "dyno.demo": frozenset({"dyno.demo", "dyno.daemon", "dyno.client", "dyno.trace_analysis", "dyno", "dyno.v1"}),
}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    where: str  # path:line, for the failure message


def layer_of(module: str) -> str | None:
    """The layer a dyno module belongs to (the longest layer name it starts with); None: not ours."""
    matches = [name for name in MAY_IMPORT if module == name or module.startswith(name + ".")]
    return max(matches, key=len) if matches else None


def source_modules(repo: Path) -> dict[str, Path]:
    """Every Python module of the package, by import name, from pyproject's package-dir (generated code included)."""
    with (repo / "pyproject.toml").open("rb") as fh:
        package_dir: dict[str, str] = tomllib.load(fh)["tool"]["setuptools"]["package-dir"]
    modules: dict[str, Path] = {}
    for package, folder in package_dir.items():
        for path in sorted((repo / folder).rglob("*.py")):
            parts = list(path.relative_to(repo / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            # a folder mapped on its own (dyno.daemon = daemon/) is not also a subfolder of another mapping
            modules.setdefault(name, path)
    return modules


def _absolute(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(name: str, path: Path, known: set[str]) -> Iterator[Import]:
    tree = ast.parse(path.read_text(), filename=str(path))
    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(name, path.name == "__init__.py", node)
            # `from dyno import daemon` imports the module dyno.daemon, not a name of dyno
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            targets = [node.args[0].value]
        for target in targets:
            yield Import(name, target, f"{where}:{node.lineno}")


def layer_breaks(modules: dict[str, Path]) -> list[Import]:
    known = set(modules)
    breaks = []
    for name, path in modules.items():
        own = layer_of(name)
        assert own is not None, f"{name} ({path}) is in no layer: add its package to MAY_IMPORT"
        for imp in imports_of(name, path, known):
            target = layer_of(imp.imported)
            if target is not None and target not in MAY_IMPORT[own]:
                breaks.append(imp)
    return breaks


def test_every_import_follows_the_layers() -> None:
    breaks = [b for b in layer_breaks(source_modules(REPO))]
    assert not breaks, "imports against the layers (docs/ARCHITECTURE.md, Import layers):\n" + "\n".join(
        f"  {b.where}: {b.importer} imports {b.imported}" for b in breaks
    )


def test_every_package_folder_is_in_a_layer() -> None:
    unplaced = sorted(name for name in source_modules(REPO) if layer_of(name) is None)
    assert not unplaced


def test_the_checker_finds_each_kind_of_break(tmp_path: Path) -> None:
    """A fake tree with one break of each kind: plain, relative, `from dyno import x`, lazy and import_module."""
    files = {
        "core/__init__.py": "",
        "core/util.py": "from dyno.client import cli\n",
        "daemon/__init__.py": "",
        "daemon/a.py": "def f() -> None:\n    import dyno.client.cli\n",
        "daemon/b.py": "from .. import client\n",
        "daemon/c.py": "from dyno import client\nfrom dyno import util\nfrom dyno.trace_analysis import api\n",
        "daemon/d.py": "import importlib\nimportlib.import_module('dyno.client.cli')\n",
        "client/__init__.py": "",
        "client/cli.py": "from dyno.daemon import a\nfrom dyno.v1 import dyno_pb2\n",
        "trace_analysis/__init__.py": "",
        "trace_analysis/api.py": "from dyno.daemon.a import f\n",
        "protos/dyno/v1/__init__.py": "",
        "protos/dyno/v1/dyno_pb2.py": "",
        "pyproject.toml": (
            '[tool.setuptools]\npackage-dir = { "dyno" = "core", "dyno.v1" = "protos/dyno/v1", '
            '"dyno.daemon" = "daemon", "dyno.client" = "client", "dyno.trace_analysis" = "trace_analysis" }\n'
        ),
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = {(b.importer, b.imported) for b in layer_breaks(source_modules(tmp_path))}
    assert found == {
        ("dyno.util", "dyno.client.cli"),
        ("dyno.daemon.a", "dyno.client.cli"),
        ("dyno.daemon.b", "dyno.client"),
        ("dyno.daemon.c", "dyno.client"),
        ("dyno.daemon.d", "dyno.client.cli"),
        ("dyno.client.cli", "dyno.daemon.a"),
        ("dyno.trace_analysis.api", "dyno.daemon.a"),
    }


def test_dynod_does_not_load_trace_analysis() -> None:
    """The daemon may import dyno.trace_analysis, but only in the analysis worker: dynod's own process stays free of
    it (and of the numpy it brings)."""
    code = "import sys, dyno.daemon.main; print(sorted(m for m in sys.modules if m.startswith('dyno.trace_analysis')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
