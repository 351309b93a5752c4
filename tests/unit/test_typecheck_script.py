"""scripts/typecheck.py: mypy over the package as installed, so calls between modules in different folders are
checked (folder by folder they were unresolved imports, i.e. Any)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("typecheck_script", REPO / "scripts" / "typecheck.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fake_repo(tmp: Path, call: str) -> Path:
    """Two folders mapped into one namespace (as pyproject maps core/ and daemon/ into dyno)."""
    tmp.mkdir()
    (tmp / "pyproject.toml").write_text(
        '[tool.setuptools]\npackage-dir = { "pkg" = "top", "pkg.sub" = "sub" }\n'
        "[tool.mypy]\nignore_missing_imports = true\n"
    )
    (tmp / "top").mkdir()
    (tmp / "top" / "__init__.py").write_text("")
    (tmp / "top" / "util.py").write_text("def twice(n: int) -> int:\n    return 2 * n\n")
    (tmp / "sub").mkdir()
    (tmp / "sub" / "__init__.py").write_text("")
    (tmp / "sub" / "use.py").write_text(f"from pkg.util import twice\n\n\ndef f() -> int:\n    return {call}\n")
    return tmp


def test_package_dirs_are_pyprojects():
    dirs = _script().package_dirs(REPO / "pyproject.toml")
    assert (
        dirs["dyno"] == "core" and dirs["dyno.daemon"] == "daemon" and dirs["dyno.trace_analysis"] == "trace_analysis"
    )


def test_tree_lays_folders_out_as_the_installed_package(tmp_path):
    tc = _script()
    root = tmp_path / "tree"
    tc.build_tree(root, tc.package_dirs(REPO / "pyproject.toml"), REPO)
    assert (root / "dyno" / "daemon" / "tracing" / "manager.py").resolve() == (
        REPO / "daemon" / "tracing" / "manager.py"
    )
    assert (root / "dyno" / "argtypes.py").resolve() == (REPO / "core" / "argtypes.py")
    assert (root / "dyno" / "v1" / "dyno.proto").resolve() == (REPO / "protos" / "dyno" / "v1" / "dyno.proto")


def test_output_paths_are_the_repositorys():
    tc = _script()
    dirs = {"dyno": "core", "dyno.daemon": "daemon", "dyno.v1": "protos/dyno/v1"}
    out = tc.repo_paths("dyno/daemon/app.py:3: error: x\ndyno/argtypes.py:1: note: y\nFound 1 error\n", dirs)
    assert out == "daemon/app.py:3: error: x\ncore/argtypes.py:1: note: y\nFound 1 error\n"


def test_a_wrong_call_across_folders_is_caught(tmp_path, capsys):
    pytest.importorskip("mypy")
    tc = _script()
    bad = _fake_repo(tmp_path / "bad", 'twice("2")')
    assert tc.main([], bad) == 1
    out = capsys.readouterr().out
    assert 'sub/use.py:5: error: Argument 1 to "twice" has incompatible type "str"' in out, out
    good = _fake_repo(tmp_path / "good", "twice(2)")
    assert tc.main([], good) == 0, capsys.readouterr().out
