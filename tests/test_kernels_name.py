"""The checkout's kernels/ folder, imported as a top-level `kernels` (python run from the root, as a
probe for Hugging Face's `kernels` package does through transformers), raises ImportError instead of
registering every op a second time; as `workbench.kernels` it loads as always."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_kernels_folder_as_a_top_level_package_is_refused(monkeypatch):
    import workbench.kernels  # noqa: F401  (the ops registered once, under their real name)
    from workbench.registry import REGISTRY

    before = sorted(REGISTRY.ops)
    monkeypatch.syspath_prepend(str(ROOT))
    for name in [m for m in sys.modules if m == "kernels" or m.startswith("kernels.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ImportError, match="workbench.kernels"):
        importlib.import_module("kernels")
    assert "kernels" not in sys.modules and sorted(REGISTRY.ops) == before
    assert importlib.util.find_spec("workbench.kernels") is not None
