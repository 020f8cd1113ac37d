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

BUDGET_S = 260.0        # rows not started after this many seconds are skipped (full run ~4-5 min)
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
    """The rows: the memory-bound ones first, the builds that take longest (compiled, cuda) after
    them, matmul last. The power-limited GEMMs heat the GPU: run first (H200, 2026-12-01), the
    next rows' do_bench rounds ran at 1620-1755 MHz against the engine's 1920-1980, and the
    clock-sensitive ones (pytorch GeLU bf16, softmax fp32) came out 3-7% apart for that alone."""
    rows: list[Case] = []
    tiers = [("pytorch", "triton"), ("manual",)] + ([] if quick else [("compiled",), ("cuda",)])
    for impls in tiers:
        for op in ("gelu", "softmax", "add"):
            for dtype in ("float32", "bfloat16"):
                rows += [Case(op, impl, dtype, SQUARE) for impl in impls if not (op == "add" and impl == "manual")]
    return rows + [Case("matmul", impl, "bfloat16", MATMUL) for impl in ("pytorch", "triton")]


def interleave(methods: dict[str, Callable[[], tuple[float, float | None]]], rounds: int,
               settle: Callable[[], None] | None = None, max_rounds: int | None = None,
               unsettled: Callable[[dict[str, list]], bool] | None = None,
               resettle: Callable[[], None] | None = None) -> dict[str, list]:
    """Each method once per round, the order rotated each round (A B C, B C A, C A B, ...): drift
    and warm-up order do not favour one. settle: run once before the first round (the GPU brought
    to its steady clock: after the build and check it idled, and a power-limited kernel's first
    method ran boosted, 1980 against 1560 MHz). After `rounds`, while `unsettled(found)` says the
    rounds do not yet pin the medians down, more rounds up to `max_rounds`, each after `resettle`
    (on the H200 a power-limited row's rounds moved by up to 10% with the clock, and 5 rounds
    left medians 3-5% apart that more rounds bring together). Returns {name: [(ms,
    sm_clock_median_mhz), ...]}."""
    names, found = list(methods), {name: [] for name in methods}
    if settle is not None:
        settle()
    r = 0
    while r < rounds or (unsettled is not None and r < (max_rounds or rounds) and unsettled(found)):
        if r >= rounds and resettle is not None:
            resettle()
        for name in names[r % len(names):] + names[:r % len(names)]:
            found[name].append(methods[name]())
        r += 1
    return found


ROUNDS_REL_ERROR = 0.005  # a method's median over rounds is pinned down within 0.5% (its rel. SE)


def unsettled(found: dict[str, list]) -> bool:
    """Whether the rounds so far leave the engine's or do_bench's median over rounds uncertain:
    its estimated relative standard error (workbench.engine.stats.median_rel_error, MAD- and
    IQR-based, so a lone slow round is outvoted, not averaged in) above ROUNDS_REL_ERROR. Steady
    rows stop at the planned rounds; a row whose rounds move with the clock gets more. Whether the
    two agree is not asked: the rounds are added to measure the ratio, not to move it."""
    from workbench.engine.stats import median_rel_error

    return any(median_rel_error([ms for ms, _ in found[name]]) > ROUNDS_REL_ERROR for name in ("engine", "do_bench"))


def paired_ratio(found: dict[str, list]) -> float:
    """The median over rounds of engine / do_bench within the same round (adjacent in time: a
    drift slower than a round cancels), for truth-details.json beside the ratio of medians."""
    return statistics.median(e / d for (e, _), (d, _) in zip(found["engine"], found["do_bench"]))


def flush_split(found: dict[str, list]) -> dict:
    """For truth-details.json and the table: the engine/do_bench ratio split in two, where the
    rounds include `engine_zero_flush` (the engine's loop with do_bench's `zero_()` L2 flush):
    `same_flush_ratio` (engine_zero_flush / do_bench, medians over rounds, and `paired_same_flush_ratio`,
    the median per-round one): the two loops with the same flush, what is left of the method
    itself; `flush_effect` (engine / engine_zero_flush): the engine's read flush against the zero
    flush in the same loop (below 1: the dirty lines `zero_()` leaves in L2 are written back
    inside the timed kernel; MEASUREMENT.md rule 4). Empty without zero-flush rounds."""
    zero = [ms for ms, _ in found.get("engine_zero_flush") or []]
    if not zero:
        return {}
    engine = statistics.median(ms for ms, _ in found["engine"])
    theirs = statistics.median(ms for ms, _ in found["do_bench"])
    same = statistics.median(zero)
    return {"engine_zero_flush_ms": same, "same_flush_ratio": same / theirs,
            "paired_same_flush_ratio": statistics.median(z / d for z, (d, _) in zip(zero, found["do_bench"])),
            "flush_effect": engine / same}


CLOCK_MATCH = 0.02  # rounds whose two SM clock medians are within 2% count as clock-matched


def summary_row(case: Case, found: dict[str, list]) -> dict:
    """The truth-dobench.json row: medians over rounds and their ratio (engine / do_bench)."""
    engine = statistics.median(ms for ms, _ in found["engine"])
    theirs = statistics.median(ms for ms, _ in found["do_bench"])
    return {"op": case.op, "impl": case.impl, "dtype": case.dtype, "shape": dict(case.shape),
            "engine_ms": engine, "do_bench_ms": theirs, "ratio": engine / theirs}


def clock_matched(found: dict[str, list]) -> dict:
    """For truth-details.json: `clock_matched_ratio`, the median of the per-round ratios over the
    rounds where both methods ran at SM clock medians within CLOCK_MATCH of each other (None when
    no round did), and `matched`, how many rounds that was. On a power-limited GPU a round's
    clock, not the method, can move a clock-sensitive kernel by several percent."""
    pairs = [(e, d) for (e, e_mhz), (d, d_mhz) in zip(found["engine"], found["do_bench"])
             if e_mhz and d_mhz and abs(e_mhz - d_mhz) <= CLOCK_MATCH * max(e_mhz, d_mhz)]
    return {"clock_matched_ratio": statistics.median(e / d for e, d in pairs) if pairs else None,
            "matched": len(pairs)}


class TruthFiles:
    """Both output files, rewritten atomically after every change."""

    def __init__(self, out: Path):
        self.out = out
        self.rows: list[dict] = []
        self.matched: list[dict] = []  # per row: clock_matched() and flush_split() of its rounds, for the table
        self.details: dict[str, Any] = {"environment": None, "references": None, "rows": [], "skipped": []}

    def add(self, row: dict | None, detail: dict) -> None:
        if row is not None:
            self.rows.append(row)
            self.matched.append({**(detail.get("clock_matched") or {}), **(detail.get("flush_split") or {})})
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
                                                                                     else " (outside 2%)")
                 + (f"; clock-matched {m['clock_matched_ratio']:.3f} ({m['matched']} rounds)"
                    if m.get("clock_matched_ratio") else "; no clock-matched round")
                 + (f"; same flush {m['same_flush_ratio']:.3f}; read/zero flush {m['flush_effect']:.3f}"
                    if m.get("same_flush_ratio") else "")}
                for r, m in zip(self.rows, self.matched)]
        rows += [{"item": f"{d['op']} {d['impl']} {d['dtype']}", "status": "failed", "note": d["error"]}
                 for d in self.details["rows"] if d.get("error")]
        rows += [{"item": f"{s['op']} {s['impl']} {s['dtype']}", "status": "skipped", "note": s["why"]}
                 for s in self.details["skipped"]]
        return rows


def _write_json(path: Path, data: Any) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=2, default=str)
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would make the evidence unreadable to others
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
