"""Run a callback right after a module has been imported, on the importing thread. Stdlib only and cheap: dyno-run's
bootstrap imports it in every Python process it starts, most of which never import torch and must not pay for the
agent (its imports cost ~0.2 s per process, and its connection thread woke twice a second for the process's life).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["after_import"]


class _ImportWatcher:
    """A sys.meta_path finder that, when `name` is imported, wraps its loader's exec_module to call
    `callback(module)` once the module has executed; then removes itself."""

    def __init__(self, name: str, callback: Callable[[Any], None]) -> None:
        self.name = name
        self.callback = callback

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module
        callback = self.callback

        def exec_module(module: Any) -> None:
            original(module)
            try:
                callback(module)
            except Exception:  # never break the program's import over ours
                pass

        loader.exec_module = exec_module
        return spec


def after_import(name: str, callback: Callable[[Any], None]) -> None:
    """Call `callback(module)` right after module `name` is executed, on the thread importing it: at once when it
    is already imported. Exceptions from the callback are dropped (it must report its own). One watcher per
    (name, callback)."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    if not any(isinstance(f, _ImportWatcher) and f.name == name and f.callback == callback for f in sys.meta_path):
        sys.meta_path.insert(0, _ImportWatcher(name, callback))
