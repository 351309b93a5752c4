"""A package's public names imported on first use (PEP 562 module ``__getattr__``): importing the package, or one of
its light submodules (a command's parser), must not load what its names need (numpy, grpc, the analysis stack)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of `package`: a name of `homes` (name -> the submodule, relative to the package, that
    defines it) is imported from its submodule and kept in the package, so the lookup runs once a name."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{home}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
