"""The pure half of stage `truth` (benchmarks/stages/truth.py): the cases, the interleaving of
methods, the summary row and the output files. No torch, no GPU: unit-tested on CPU."""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

BUDGET_S = 200.0        # rows not started after this many seconds are skipped (full run ~4 min)
QUICK_BUDGET_S = 80.0   # --quick: well under 2 minutes with start-up and references
SQUARE = {"M": 16384, "N": 16384}
MATMUL = {"M": 8192, "N": 8192, "K": 8192}
WARMUP_MS, REP_MS = 25.0, 100.0   # do_bench's defaults, used by both sides


@dataclass(frozen=True)
class Case:
    op: str
    impl: str
    dtype: str
    shape: dict


def cases(quick: bool) -> list[Case]:
    """The rows, most telling first (matmul's duty-cycle effect, then the fused kernels; the
    builds that take longest, compiled and cuda, last so a tight budget drops them first)."""
    rows = [Case("matmul", impl, "bfloat16", MATMUL) for impl in ("pytorch", "triton")]
    tiers = [("pytorch", "triton"), ("manual",)] + ([] if quick else [("compiled",), ("cuda",)])
    for impls in tiers:
        for op in ("gelu", "softmax", "add"):
            for dtype in ("float32", "bfloat16"):
                rows += [Case(op, impl, dtype, SQUARE) for impl in impls if not (op == "add" and impl == "manual")]
    return rows


def interleave(methods: dict[str, Callable[[], tuple[float, float | None]]], rounds: int,
               settle: Callable[[], None] | None = None) -> dict[str, list]:
    """Each method once per round, the order rotated each round (A B C, B C A, C A B, ...): drift
    and warm-up order do not favour one. settle: run once before the first round (the GPU brought
    to its steady clock: after the build and check it idled, and a power-limited kernel's first
    method ran boosted, 1980 against 1560 MHz). Returns {name: [(ms, sm_clock_median_mhz), ...]}."""
    names, found = list(methods), {name: [] for name in methods}
    if settle is not None:
        settle()
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            found[name].append(methods[name]())
    return found


def summary_row(case: Case, found: dict[str, list]) -> dict:
    """The truth-dobench.json row: medians over rounds and their ratio (engine / do_bench)."""
    engine = statistics.median(ms for ms, _ in found["engine"])
    theirs = statistics.median(ms for ms, _ in found["do_bench"])
    return {"op": case.op, "impl": case.impl, "dtype": case.dtype, "shape": dict(case.shape),
            "engine_ms": engine, "do_bench_ms": theirs, "ratio": engine / theirs}


class TruthFiles:
    """Both output files, rewritten atomically after every change."""

    def __init__(self, out: Path):
        self.out = out
        self.rows: list[dict] = []
        self.details: dict[str, Any] = {"environment": None, "references": None, "rows": [], "skipped": []}

    def add(self, row: dict | None, detail: dict) -> None:
        if row is not None:
            self.rows.append(row)
        self.details["rows"].append(detail)
        self.write()

    def skip(self, case: Case, why: str) -> None:
        self.details["skipped"].append({"op": case.op, "impl": case.impl, "dtype": case.dtype, "why": why})
        self.write()

    def write(self) -> None:
        _write_json(self.out / "truth-dobench.json", {"rows": self.rows})
        _write_json(self.out / "truth-details.json", self.details)

    def table(self) -> list[dict]:
        rows = [{"item": f"{r['op']} {r['impl']} {r['dtype']}", "median_ms": r["engine_ms"], "value": r["do_bench_ms"],
                 "unit": "ms (do_bench median)", "note": f"ratio {r['ratio']:.3f}" + ("" if abs(r["ratio"] - 1) <= 0.02
                                                                                     else " (outside 2%)")}
                for r in self.rows]
        rows += [{"item": f"{d['op']} {d['impl']} {d['dtype']}", "status": "failed", "note": d["error"]}
                 for d in self.details["rows"] if d.get("error")]
        rows += [{"item": f"{s['op']} {s['impl']} {s['dtype']}", "status": "skipped", "note": s["why"]}
                 for s in self.details["skipped"]]
        return rows


def _write_json(path: Path, data: Any) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=2, default=str)
    os.replace(tmp, path)


def run_cases(todo: list[Case], files: TruthFiles, time_case: Callable[[Case], tuple[dict | None, dict]],
              budget_s: float, clock: Callable[[], float] = time.perf_counter) -> None:
    """Time each case (`time_case` -> (row or None, detail)), writing after each; cases not
    started within `budget_s` are skipped; one failing case is recorded and the rest still run."""
    t0 = clock()
    for case in todo:
        if clock() - t0 > budget_s:
            files.skip(case, f"not started within the stage budget ({budget_s:g} s)")
            continue
        try:
            row, detail = time_case(case)
        except Exception as exc:  # a build or launch failure: recorded with its one line
            row, detail = None, {"op": case.op, "impl": case.impl, "dtype": case.dtype,
                                 "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
        files.add(row, detail)
        print(f"  truth {case.op} {case.impl} {case.dtype}: "
              + (f"ratio {row['ratio']:.3f}" if row else detail.get("error", "no row")), file=sys.stderr)
