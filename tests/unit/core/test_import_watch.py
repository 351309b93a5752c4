"""dyno.import_watch.after_import: the callback runs when the module is really imported, also after a lookup that
did not import it (`importlib.util.find_spec("torch")`, as transformers, accelerate and lightning do)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dyno.import_watch import _ImportWatcher, after_import

pytestmark = pytest.mark.unit


@pytest.fixture
def module_dir(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in [n for n in sys.modules if n.startswith("review1_watched")]:
        del sys.modules[name]
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _ImportWatcher)]


def test_callback_runs_at_the_import_after_a_find_spec_probe(module_dir: Path) -> None:
    (module_dir / "review1_watched_a.py").write_text("VALUE = 42\n")
    seen: list[Any] = []
    after_import("review1_watched_a", seen.append)
    assert importlib.util.find_spec("review1_watched_a") is not None  # a probe: nothing imported yet
    assert seen == [] and "review1_watched_a" not in sys.modules
    import review1_watched_a  # type: ignore[import-not-found]

    assert [m.VALUE for m in seen] == [42] and seen[0] is review1_watched_a
    assert not any(isinstance(f, _ImportWatcher) for f in sys.meta_path)  # gone once it has fired


def test_two_watchers_of_one_module_both_fire_once(module_dir: Path) -> None:
    (module_dir / "review1_watched_b.py").write_text("")
    first: list[Any] = []
    second: list[Any] = []
    after_import("review1_watched_b", first.append)
    after_import("review1_watched_b", second.append)
    importlib.import_module("review1_watched_b")
    importlib.reload(sys.modules["review1_watched_b"])  # executed again: the callbacks ran already
    assert len(first) == 1 and len(second) == 1


def test_a_failing_callback_is_dropped_when_the_module_is_already_imported(module_dir: Path) -> None:
    (module_dir / "review1_watched_c.py").write_text("")
    importlib.import_module("review1_watched_c")

    def boom(_module: Any) -> None:
        raise RuntimeError("the callback's own bug")

    after_import("review1_watched_c", boom)  # as documented: dropped, as when it runs at the import itself


def test_dyno_run_starts_the_agent_when_torch_is_probed_before_its_import(tmp_path: Path) -> None:
    (tmp_path / "torch.py").write_text("")  # a stand-in: the bootstrap only needs `import torch` to happen
    probe = (
        "import importlib.util, sys, threading\n"
        "assert importlib.util.find_spec('torch') is not None\n"  # transformers' is_torch_available()
        "import torch\n"
        "print('dyno.client.agent' in sys.modules, threading.active_count())\n"
    )
    env = {
        **os.environ,
        "DYNO_AGENT_SOCKET": str(tmp_path / "no-daemon.sock"),
        "PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p),
    }
    res = subprocess.run(
        [sys.executable, "-m", "dyno.client.run", "--", sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    loaded, threads = res.stdout.split()
    assert loaded == "True" and int(threads) >= 3  # was "False 1": no agent at all
