"""docs/ARCHITECTURE.md's module map names exactly the packages and modules of the source folders."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
_LINE = re.compile(r"^- `(?P<path>[^`]+)` — (?P<purpose>.*)$")


def mapped(doc: str) -> dict[str, str]:
    """The map's `path — purpose` lines: the bullet lines of the "## Module map" section."""
    section = doc.split("\n## Module map\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("- ")]
    entries: dict[str, str] = {}
    for line in lines:
        match = _LINE.match(line)
        assert match, f"not a `path` — purpose line: {line!r}"
        assert match["path"] not in entries, f"named twice: {match['path']}"
        entries[match["path"]] = match["purpose"]
    return entries


def source_tree(repo: Path) -> set[str]:
    """Each package folder (with a trailing /) and each module but __init__.py and generated code, repo-relative."""
    with (repo / "pyproject.toml").open("rb") as fh:
        folders: dict[str, str] = tomllib.load(fh)["tool"]["setuptools"]["package-dir"]
    paths: set[str] = set()
    for folder in folders.values():
        for path in (repo / folder).rglob("*.py"):
            rel = path.relative_to(repo).as_posix()
            if path.name == "__init__.py":
                paths.add(rel.removesuffix("__init__.py"))
            elif "_pb2" not in path.name:
                paths.add(rel)
    return paths


def test_the_module_map_matches_the_tree() -> None:
    entries = mapped((REPO / "docs" / "ARCHITECTURE.md").read_text())
    tree = source_tree(REPO)
    missing, gone = sorted(tree - set(entries)), sorted(set(entries) - tree)
    assert not missing, "add to docs/ARCHITECTURE.md's Module map (`path` — purpose):\n" + "\n".join(missing)
    assert not gone, "in docs/ARCHITECTURE.md's Module map but not in the tree:\n" + "\n".join(gone)


def test_every_line_of_the_map_says_a_purpose() -> None:
    blank = [path for path, purpose in mapped((REPO / "docs" / "ARCHITECTURE.md").read_text()).items() if not purpose]
    assert not blank


def test_the_map_check_sees_a_missing_and_a_stale_module(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools]\npackage-dir = { "dyno" = "core" }\n')
    (tmp_path / "core" / "sub").mkdir(parents=True)
    for rel in ("core/__init__.py", "core/a.py", "core/sub/__init__.py", "core/sub/b.py", "core/x_pb2.py"):
        (tmp_path / rel).write_text("")
    doc = "# t\n## Module map\n- `core/` — root\n- `core/a.py` — a\n- `core/gone.py` — g\n"
    doc += "## Next\n- `core/sub/b.py` — x\n"  # another section's bullets are not the map's
    assert source_tree(tmp_path) - set(mapped(doc)) == {"core/sub/", "core/sub/b.py"}
    assert set(mapped(doc)) - source_tree(tmp_path) == {"core/gone.py"}
