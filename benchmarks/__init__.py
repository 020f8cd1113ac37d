"""GPU evidence and measuring scripts (not installed with the package)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a `python -m benchmarks...` child: the checkout's root first on
    PYTHONPATH. The engine sets PYTHONSAFEPATH=1 in its own process (workbench/helper_python.py:
    no working folder on a child's sys.path), so a child started after a run would not find
    `benchmarks` from its cwd alone."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env
