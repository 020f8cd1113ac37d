"""The results documents committed under results/ load as results documents and obey physics:
no `ok` row reports a figure above its device's physical peak (workbench/datasheet.py) by more
than the engine's margin, and a failed check never carries speed figures. (Data checks of
committed files, not timing assertions.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.results import document as results
from workbench.datasheet import PEAK_MARGIN, peaks_for
from workbench.engine.measure.ceilings import compute_key
from workbench.registry import discover

ROOT = Path(__file__).resolve().parents[1] / "results"
DOCS = sorted(p for p in ROOT.rglob("*.json") if "results" in json.loads(p.read_text()))


def test_there_are_committed_results():
    assert len(DOCS) >= 5


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_committed_document_loads_and_obeys_physics(path):
    doc = results.load(path)
    peaks = peaks_for((doc.get("environment") or {}).get("device"))
    registry = discover()
    for rec in doc["results"]:
        traffic, check = rec.get("traffic") or {}, rec.get("check")
        if check is not None and not check["passed"]:
            assert rec["status"] == "failed" and not traffic.get("gbps"), rec["label"]
        if rec["status"] != "ok" or peaks is None:
            continue
        if traffic.get("gbps") and not traffic.get("l2_resident"):
            assert traffic["gbps"] <= PEAK_MARGIN * peaks.memory_gbps, (rec["label"], traffic["gbps"])
        op = registry.ops.get(rec["op"])  # a test plugin's op (oob) is not registered: not matmul-like
        key = compute_key(bool(op and op.matmul_like), rec["dtype"], rec.get("fp32_precision") or "ieee")
        peak = peaks.tflops(key)
        if traffic.get("tflops") and peak:
            assert traffic["tflops"] <= PEAK_MARGIN * peak, (rec["label"], rec["shape"], traffic["tflops"])
