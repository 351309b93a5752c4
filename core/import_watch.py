"""Run a callback right after a module has been imported, on the importing thread. Stdlib only and cheap: dyno-run's
bootstrap imports it in every Python process it starts, most of which never import torch and must not pay for the
agent (its imports cost ~0.2 s per process, and its connection thread woke twice a second for the process's life).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["after_import"]


class _ImportWatcher:
    """A sys.meta_path finder that, when `name` is looked up, wraps its loader's exec_module to call
    `callback(module)` once the module has executed; it removes itself then, not at the lookup: a lookup without an
    import (`importlib.util.find_spec("torch")`, how transformers, accelerate or lightning check what is installed)
    returned a spec whose loader is never used, and the import that followed was not seen."""

    def __init__(self, name: str, callback: Callable[[Any], None]) -> None:
        self.name = name
        self.callback = callback
        self._done = False
        self._searching: set[int] = set()  # threads inside find_spec: the others finders may ask again (no loop)

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        me = threading.get_ident()
        if fullname != self.name or self._done or me in self._searching:
            return None
        self._searching.add(me)
        try:
            spec = None
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None) if finder is not self else None
                spec = find(fullname, path, target) if find else None
                if spec is not None:
                    break
        finally:
            self._searching.discard(me)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module: Any) -> None:
            original(module)
            self._fire(module)

        loader.exec_module = exec_module
        return spec

    def _fire(self, module: Any) -> None:
        if self._done:
            return
        self._done = True
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        _call(self.callback, module)


def _call(callback: Callable[[Any], None], module: Any) -> None:
    try:
        callback(module)
    except Exception:  # never break the program's import over ours
        pass


def after_import(name: str, callback: Callable[[Any], None]) -> None:
    """Call `callback(module)` right after module `name` is executed, on the thread importing it: at once when it
    is already imported. Exceptions from the callback are dropped (it must report its own). One watcher per
    (name, callback)."""
    module = sys.modules.get(name)
    if module is not None:
        _call(callback, module)
        return
    if not any(isinstance(f, _ImportWatcher) and f.name == name and f.callback == callback for f in sys.meta_path):
        sys.meta_path.insert(0, _ImportWatcher(name, callback))
