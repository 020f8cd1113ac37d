"""The results documents committed under results/ load as results documents and obey physics:
no `ok` row reports a figure above its ceiling by more than the engine's margin, and a failed
check never carries speed figures. (Data checks of committed files, not timing assertions.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench import results
from workbench.engine.traffic import CEILING_MARGIN

ROOT = Path(__file__).resolve().parents[1] / "results"
DOCS = sorted(p for p in ROOT.rglob("*.json") if "results" in json.loads(p.read_text()))


def test_there_are_committed_results():
    assert len(DOCS) >= 5


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_committed_document_loads_and_obeys_its_ceilings(path):
    doc = results.load(path)
    ceilings = (doc.get("environment") or {}).get("ceilings") or {}
    for rec in doc["results"]:
        traffic, check = rec.get("traffic") or {}, rec.get("check")
        if check is not None and not check["passed"]:
            assert rec["status"] == "failed" and not traffic.get("gbps"), rec["label"]
        if rec["status"] != "ok" or traffic.get("l2_resident"):
            continue
        if traffic.get("gbps") and ceilings.get("copy_gbps"):
            assert traffic["gbps"] <= CEILING_MARGIN * ceilings["copy_gbps"], (rec["label"], traffic["gbps"])
        pct = traffic.get("pct_of_ceiling")
        assert pct is None or pct <= 100 * CEILING_MARGIN, (rec["label"], rec["shape"], pct)
