"""The optional native trace decoder: setup.py declares it optional (pip install works without a compiler), and it
builds from a clean setup.py build and works, independently of how the test venv was installed."""

from __future__ import annotations

import ast
import importlib.util
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
MODULE = "dyno.trace_analysis._native"


def _extension_call() -> ast.Call:
    tree = ast.parse((REPO / "setup.py").read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Extension"]
    assert len(calls) == 1, "setup.py declares exactly one Extension"
    return calls[0]


def test_setup_py_declares_the_native_extension_optional() -> None:
    call = _extension_call()
    kw = {k.arg: k.value for k in call.keywords}
    assert ast.literal_eval(call.args[0]) == MODULE
    assert ast.literal_eval(kw["optional"]) is True, "without a compiler, pip install must still succeed"
    sources = ast.literal_eval(kw["sources"])
    assert sources and all((REPO / src).is_file() for src in sources)
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert MODULE.rsplit(".", 1)[0] in pyproject["tool"]["setuptools"]["packages"]
    assert "name" not in kw and "version" not in kw, "metadata stays in pyproject.toml"


def _have_compiler() -> bool:
    include = sysconfig.get_paths().get("include")
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return bool(include and (Path(include) / "Python.h").is_file() and shutil.which(cc))


@pytest.mark.skipif(not _have_compiler(), reason="no C compiler or Python headers")
def test_extension_builds_with_setup_py_and_decodes(tmp_path: Path) -> None:
    pytest.importorskip("setuptools")
    proc = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(tmp_path / "lib")]
        + ["--build-temp", str(tmp_path / "tmp")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    built = list((tmp_path / "lib").rglob("_native*"))
    assert len(built) == 1, proc.stderr[-2000:]
    spec = importlib.util.spec_from_file_location(MODULE, built[0])
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cols = mod.decode_batch(b'[{"ph":"X","ts":1712195495519695.8,"name":"a\\u00e9","pid":"Spans","tid":2},{"ph":"i"}]')
    assert cols["x_n"] == 1 and cols["x_float_ts"] and cols["x_name_u"] == ["a\u00e9"] and cols["x_pid_u"] == ["Spans"]
    assert np.frombuffer(cols["x_ts"], dtype=np.float64).tolist() == [1712195495519695.8]
    assert np.frombuffer(cols["group"], dtype=np.int8).tolist() == [0, 2]
    assert mod.decode_batch(b'[{"ph":"X","ts":"1"}]') is None  # declines: the Python path handles it
