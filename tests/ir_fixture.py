"""A TUI fixture whose PTX rows are compiled here and now (Triton ahead of time for sm_90, nvcc):
the committed GeLU fixture (tui_helpers.GELU_H200) with its `triton` and `cuda` rows' `ptx`
records and texts replaced by live ones, so the split view shows real source maps. Written once
per test session under a temporary folder."""

from __future__ import annotations

import json
from pathlib import Path

from tui_helpers import GELU_H200, SOFTMAX_SWEEP
from workbench.ptx.extract import ptx_record
from workbench.registry import discover


def _live(op_name: str, impl: str, shape: dict, dtype: str = "float32") -> tuple[dict, dict]:
    op = discover().op(op_name)
    return ptx_record(op, impl, op.make_spec(shape, dtype), target="sm_90")


def gelu_fixture(folder: Path, impls: tuple[str, ...] = ("triton", "cuda")) -> Path:
    """tui_gelu_h200.json with live ptx for `impls` (an impl whose compile is unavailable here
    keeps the committed record)."""
    data = json.loads(GELU_H200.read_text())
    for record in data["doc"]["results"]:
        if record["label"] in impls:
            ptx, texts = _live("gelu", record["impl"], record["shape"], record["dtype"])
            if ptx["kernels"]:
                record["ptx"], data["ptx_texts"][record["label"]] = ptx, texts
    path = folder / "tui_gelu_live.json"
    path.write_text(json.dumps(data))
    return path


def softmax_fixture(folder: Path, columns: tuple[int, ...] = (1000, 1024)) -> Path:
    """A softmax run of the triton row at M=64 and N in `columns` (a sweep), with live ptx:
    the lecture's 1000-against-1024 case. ptx_texts are keyed `label@N` (one per sweep point)."""
    data = json.loads(SOFTMAX_SWEEP.read_text())
    template = next(r for r in data["doc"]["results"] if r["label"] == "triton")
    rows = []
    for n in columns:
        ptx, texts = _live("softmax", "triton", {"M": 64, "N": n})
        rows.append({**template, "shape": {"M": 64, "N": n}, "sweep_value": n, "ptx": ptx})
        data["ptx_texts"][f"triton@{n}"] = texts
    data["doc"]["results"] = rows
    path = folder / "tui_softmax_live.json"
    path.write_text(json.dumps(data))
    return path
