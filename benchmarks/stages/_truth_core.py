"""The pure half of stage `truth` (benchmarks/stages/truth.py): the cases, the interleaving of
methods, the summary row and the output files. No torch, no GPU: unit-tested on CPU."""

from __future__ import annotations

import json
import os
import random
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
    them, matmul last. The power-limited GEMMs heat the GPU: run first (measured on H200), the
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
               resettle: Callable[[], None] | None = None, rng: random.Random | None = None,
               orders: list[list[str]] | None = None) -> dict[str, list]:
    """Each method once per round. Order: with `rng`, a random permutation each round (appended
    to `orders` when given); without, rotated each round (A B C, B C A, C A B, ...). Rotation lets
    neither method always go first, but its period (three rounds of three ~0.12 s calls, 1.1 s)
    nearly matches the H200's power-cap cycle at 700 W (a slow state every ~1 s, 5-30% slower,
    starting a fixed time after the load does): under rotation do_bench's calls fell in the slow
    state 10, 7 and 8 times in 12 rounds on torch.compile's rows where the engine's did 4, 3 and 4
    (benchmarks/truth_trace.py, results/history/h200/2026-12-03f), so the medians over rounds were 2.5-5%
    apart where the calls in the same state agreed within 0.6%. A random order takes the schedule
    out of phase with the cycle. settle: run once before the first round (the GPU brought to its
    steady clock: after the build and check it idled, and a power-limited kernel's first method
    ran boosted, 1980 against 1560 MHz). After `rounds`, while `unsettled(found)` says the rounds
    do not yet pin the medians down, more rounds up to `max_rounds`, each after `resettle` (on
    the H200 a power-limited row's rounds moved by up to 10% with the clock). Returns {name:
    [(ms, sm_clock_median_mhz), ...]}."""
    names, found = list(methods), {name: [] for name in methods}
    if settle is not None:
        settle()
    r = 0
    while r < rounds or (unsettled is not None and r < (max_rounds or rounds) and unsettled(found)):
        if r >= rounds and resettle is not None:
            resettle()
        order = rng.sample(names, len(names)) if rng is not None else names[r % len(names):] + names[:r % len(names)]
        if orders is not None:
            orders.append(order)
        for name in order:
            found[name].append(methods[name]())
        r += 1
    return found


ROUNDS_REL_ERROR = 0.005  # a method's median over rounds is pinned down within 0.5% (its rel. SE)


def unsettled(found: dict[str, list]) -> bool:
    """Whether the rounds so far leave the engine's or do_bench's median over rounds uncertain:
    its estimated relative standard error (workbench.engine.measure.stats.median_rel_error, MAD- and
    IQR-based, so a lone slow round is outvoted, not averaged in) above ROUNDS_REL_ERROR. Steady
    rows stop at the planned rounds; a row whose rounds move with the clock gets more. Whether the
    two agree is not asked: the rounds are added to measure the ratio, not to move it."""
    from workbench.engine.measure.stats import median_rel_error

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


SLOW_STATE = 1.03   # a sample above 1.03 x the row's pooled 10th percentile is in the slow state
FAST_CALL = 0.10    # a call with at most 10% of its samples in the slow state is a fast-state call
MIN_STATE_CALLS = 3  # the same-state medians need this many fast-state calls of each method


def state_split(samples: dict[str, list[list[float]]]) -> dict:
    """The GPU's state during each call, from the samples themselves, for the row's headline.

    On the H200 at its 700 W cap the GPU cycles about once a second between a fast state and a
    slow one 5-30% slower (clock and power ramps that NVML's 20-100 ms readings do not resolve);
    a 100 ms call falls in one or the other, or straddles them (benchmarks/truth_trace.py). With
    calls in random order, even two identical methods' medians over 15-60 rounds then come out
    more than 2% apart in 5-30% of runs on such rows (bootstrap of the recorded calls). Comparing
    the calls made in the same state removes the cycle and keeps the methods' own difference.

    samples: {method: [every sample of one call, ms], ...} in round order. Pooled over all of the
    row's samples, p10 = their 10th percentile; a sample above SLOW_STATE x p10 is slow; a call
    with at most FAST_CALL of its samples slow is a fast-state call. Returns {} without samples,
    else p10_ms, slow_above_ms, slow_share ({method: [share per call]}), fast_calls ({method:
    count}) and, where engine and do_bench each have MIN_STATE_CALLS fast-state calls,
    engine_ms / do_bench_ms / ratio: the medians of their fast-state calls' medians. A method
    slower by more than about 3% has no fast-state calls and gets no same-state figures: the
    row then keeps its ratio over all rounds (summary_row), so a bias cannot hide here."""
    from workbench.engine.measure.stats import quantile

    pooled = sorted(s for calls in samples.values() for call in calls for s in call)
    if not pooled:
        return {}
    p10 = quantile(pooled, 0.1)
    limit = SLOW_STATE * p10
    shares = {name: [sum(s > limit for s in call) / len(call) if call else None for call in calls]
              for name, calls in samples.items()}
    fast = {name: [statistics.median(call) for call, share in zip(calls, shares[name])
                   if share is not None and share <= FAST_CALL] for name, calls in samples.items()}
    out: dict[str, Any] = {"p10_ms": p10, "slow_above_ms": limit,
                           "slow_share": {name: [None if x is None else round(x, 3) for x in xs] for name, xs in shares.items()},
                           "fast_calls": {name: len(xs) for name, xs in fast.items()}}
    if all(len(fast.get(name) or []) >= MIN_STATE_CALLS for name in ("engine", "do_bench")):
        engine, theirs = statistics.median(fast["engine"]), statistics.median(fast["do_bench"])
        out.update(engine_ms=engine, do_bench_ms=theirs, ratio=engine / theirs)
    return out


def summary_row(case: Case, found: dict[str, list], state: dict | None = None) -> dict:
    """The truth-dobench.json row: engine_ms and do_bench_ms are the medians of the calls made in
    the same GPU state (state_split's, where it has them), else the medians over all rounds;
    ratio = engine / do_bench. all_rounds() gives the latter always."""
    if state and state.get("ratio") is not None:
        engine, theirs = state["engine_ms"], state["do_bench_ms"]
    else:
        medians = all_rounds(found)
        engine, theirs = medians["engine_ms"], medians["do_bench_ms"]
    return {"op": case.op, "impl": case.impl, "dtype": case.dtype, "shape": dict(case.shape),
            "engine_ms": engine, "do_bench_ms": theirs, "ratio": engine / theirs}


def all_rounds(found: dict[str, list]) -> dict:
    """The medians over all rounds (engine_ms, do_bench_ms) and their ratio."""
    engine = statistics.median(ms for ms, _ in found["engine"])
    theirs = statistics.median(ms for ms, _ in found["do_bench"])
    return {"engine_ms": engine, "do_bench_ms": theirs, "ratio": engine / theirs}


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
        self.matched: list[dict] = []  # per row: clock_matched(), flush_split() and the statistic, for the table
        self.details: dict[str, Any] = {"environment": None, "references": None, "rows": [], "skipped": []}

    def add(self, row: dict | None, detail: dict) -> None:
        if row is not None:
            self.rows.append(row)
            state = detail.get("state_split") or {}
            self.matched.append({**(detail.get("clock_matched") or {}), **(detail.get("flush_split") or {}),
                                 "statistic": detail.get("statistic"), "fast_calls": state.get("fast_calls"),
                                 "all_rounds_ratio": (detail.get("all_rounds") or {}).get("ratio")})
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
                 + (f" same state ({m['fast_calls'].get('engine', 0)}+{m['fast_calls'].get('do_bench', 0)} fast calls);"
                    f" all rounds {m['all_rounds_ratio']:.3f}" if m.get("statistic") == "same_state" else "")
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
