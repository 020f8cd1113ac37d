"""Stage `diagnose`: measured bytes (ncu) against the model, the lecture rows' diagnoses, A/B.

    python benchmarks/gpu_evidence.py --stage diagnose [--quick] [--out DIR]

Three parts (benchmarks/stages/_diagnose_core.py), each a session whose runs go through the
engine's `run_plan` one run at a time; after every run its part's document is rewritten, so a
later failure or the budget loses nothing that finished:
  OUT/diagnose-counters.json   counters (ncu --clock-control none) vs the cost model
  OUT/diagnose-lecture.json    the lecture's rows with every record's `diagnosis`
  OUT/diagnose-ab.json         the A/B entries (`ab`) with their intervals
  OUT/diagnose-summary.json    the table rows below, and the runs skipped and why
Runs not started within BUDGET_S (QUICK_BUDGET_S with --quick) are skipped and say so.
--quick keeps one run of every item of the issue's Evidence list (_diagnose_core.EVIDENCE; about
90 s on an H200, most of it ncu's subprocesses). Without a GPU the same runs go through the same
code at tiny shapes on the CPU (counters and CUDA graphs then say why they are unavailable), so
the stage can be tried anywhere; the summary says that nothing of it is evidence.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

from benchmarks.stages._diagnose_core import ab_rows, counters_rows, lecture_rows, merge, parts

TITLE = "diagnose: ncu bytes vs model, lecture diagnoses, A/B with confidence"
BUDGET_S = 300.0
QUICK_BUDGET_S = 90.0
SUMMARIES = {"counters": counters_rows, "lecture": lecture_rows, "ab": ab_rows}


def _write(path: Path, data) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=1, default=str)
    os.replace(tmp, path)


def run(quick: bool, out: Path) -> list[dict]:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    cpu = not torch.cuda.is_available()
    summary = {"quick": quick, "cpu": cpu, "rows": [], "skipped": []}
    if cpu:
        print("diagnose stage: no CUDA GPU here: the same runs at tiny shapes on the CPU (what needs a GPU "
              "is unavailable and says why)", file=sys.stderr)
        summary["skipped"].append("no CUDA GPU here: tiny CPU shapes, no figure of this run is evidence")
    from workbench.engine.plan import RunOptions, new_pool

    options = RunOptions(argv=tuple(sys.argv))
    pool = new_pool(options)  # one warm worker per key for the whole stage, as the TUI keeps one
    budget, start = (QUICK_BUDGET_S if quick else BUDGET_S), time.monotonic()
    try:
        for name, data in parts(quick, cpu=cpu):
            doc = None
            for run_data in data["runs"]:
                label = f"{name}: {run_data['op']} {run_data['dtype']} {run_data['impls']}"
                if time.monotonic() - start > budget:
                    summary["skipped"].append(f"{label}: not started, stage budget {budget:g} s spent")
                    continue
                part = _one_run(data, run_data, label, summary, options, pool)
                if part is not None:
                    doc = merge(doc, part)
                    _write(out / f"diagnose-{name}.json", doc)
            summary["rows"] += SUMMARIES[name](doc or {})
            _write(out / "diagnose-summary.json", summary)
    finally:
        pool.close()
    return summary["rows"] + [{"item": "skipped", "note": why} for why in summary["skipped"]]


def _one_run(data: dict, run_data: dict, label: str, summary: dict, options, pool) -> dict | None:
    from workbench.engine.plan import run_plan
    from workbench.session.api import session_from_data

    t0 = time.monotonic()
    try:
        session = session_from_data({**data, "runs": [run_data]})
        doc = run_plan(session, on_event=lambda _e: None, stop=threading.Event(), options=options, workers=pool)
    except Exception as exc:  # one run's failure is reported; the others still run
        traceback.print_exc()
        summary["skipped"].append(f"{label}: {type(exc).__name__}: {exc}")
        return None
    print(f"diagnose stage: {label}: {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return doc  # run_plan filled every record's diagnosis
