"""Type-check the whole ``dyno`` package with mypy, cross-module calls included.

Why a link tree: pyproject maps one import namespace over several folders (``dyno`` = core/, ``dyno.daemon`` =
daemon/, ...), which mypy cannot express. Checked folder by folder, every ``from dyno.x import y`` was an
unresolved import (``ignore_missing_imports``), so calls between modules went unchecked. This script lays the
folders out as the installed package (symlinks under build/typecheck/, a fixed place so mypy's cache stays
valid), runs ``mypy -p dyno`` there, and prints the findings with the repository's own paths.

    python scripts/typecheck.py [extra mypy options]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[1]


def package_dirs(pyproject: Path) -> dict[str, str]:
    """pyproject's ``[tool.setuptools] package-dir``: import name -> folder relative to the repository."""
    with open(pyproject, "rb") as fh:
        return dict(tomllib.load(fh)["tool"]["setuptools"]["package-dir"])


def build_tree(root: Path, dirs: dict[str, str], repo: Path = REPO) -> None:
    """Under ``root``, one folder per package of ``dirs`` whose entries link to the repository's files; a package
    mapped inside another (``dyno.daemon`` in ``dyno``) becomes a link to its own folder."""
    for name in sorted(dirs, key=lambda n: n.count(".")):
        target = root.joinpath(*name.split("."))
        source = repo / dirs[name]
        if name.count(".") == 0:
            target.mkdir(parents=True)
            for entry in source.iterdir():
                if entry.name != "__pycache__":
                    (target / entry.name).symlink_to(entry)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.exists():
                raise SystemExit(f"typecheck: {name} is mapped over an existing entry of its parent package")
            target.symlink_to(source, target_is_directory=True)


def repo_paths(text: str, dirs: dict[str, str]) -> str:
    """mypy's output with each tree path (``dyno/daemon/x.py``) replaced by the repository's (``daemon/x.py``)."""
    prefixes = sorted(((n.replace(".", "/") + "/", d.rstrip("/") + "/") for n, d in dirs.items()), reverse=True)
    lines = []
    for line in text.splitlines(keepends=True):
        for tree, real in prefixes:  # longest first: dyno/daemon/ before dyno/
            if line.startswith(tree):
                line = real + line[len(tree) :]
                break
        lines.append(line)
    return "".join(lines)


def main(argv: list[str], repo: Path = REPO) -> int:
    dirs = package_dirs(repo / "pyproject.toml")
    root = repo / "build" / "typecheck"
    shutil.rmtree(root, ignore_errors=True)
    build_tree(root, dirs, repo)
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(repo / "pyproject.toml")]
    cmd += ["--cache-dir", str(repo / ".mypy_cache"), *argv]
    for top in sorted({name.split(".")[0] for name in dirs}):
        cmd += ["-p", top]
    r = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    sys.stdout.write(repo_paths(r.stdout + r.stderr, dirs))
    return r.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
