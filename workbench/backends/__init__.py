"""Implementation kinds as registered backends (workbench/backends/base.py: the protocol).

Every module of this package is a built-in backend and registers itself on import, in the
order below (library kinds first); a plugin adds a kind by creating a `Backend` in its own
module. Torch-free: backends import torch or Triton only inside the functions that need them.
"""

from __future__ import annotations

import importlib
import pkgutil

from workbench.backends.base import Action, Backend, Need, backend, describe_all, kinds

BUILTIN_ORDER = ("library", "compiled", "cuda", "triton")  # then the rest, by name

_modules = [m.name for m in pkgutil.iter_modules(__path__) if m.name != "base"]
for _name in sorted(_modules, key=lambda n: (BUILTIN_ORDER.index(n) if n in BUILTIN_ORDER else 99, n)):
    importlib.import_module(f"{__name__}.{_name}")

__all__ = ["Action", "Backend", "Need", "backend", "describe_all", "kinds"]
