"""Test plugin: the known-wrong implementations of tests/wrong_impls.py, added to every shipped op
as `manual_wrong_<kind>` (load with --kernels tests/plugins/known_wrong.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for wrong_impls

from wrong_impls import register  # noqa: E402

from workbench.registry import REGISTRY  # noqa: E402

register(REGISTRY)  # the shipped ops' entry points load before any --kernels path
