"""Stage `truth`: the engine's timing loop against triton.testing.do_bench, in one process, interleaved.

    python benchmarks/gpu_evidence.py --stage truth [--quick] [--out DIR] [--only gelu.pytorch.bfloat16,matmul]

Rows (MEASUREMENT.md rules 1-4, issue 11): the lecture's gelu and softmax at 16384 x 16384 in
float32 and bfloat16 (manual, pytorch, compiled, triton, cuda), add at 16384 x 16384 (pytorch,
compiled, triton, cuda) and matmul bfloat16 8192^3 (pytorch = cuBLAS, triton). --quick drops the
compiled and cuda rows (their builds dominate) and runs 3 rounds instead of 5: do_bench's zero
flush swung by up to 6% between rounds on memory-bound rows (measured on H200), and a median of
3 or 5 rounds follows the majority where one of 2 could not.

Each row is built, checked (workbench.check.row), then timed in ROUNDS rounds (more, up to
_truth_gpu.MAX_ROUNDS, while _truth_core.unsettled finds either median over rounds uncertain by
over 0.5%), the methods in a random order each round (seeded by the row's name, logged as
`orders`: a rotating order ran in step with the H200's ~1 s power-cap cycle, _truth_core.interleave):
the engine's loop (engine/timing.measure_run: batched events, read flush), triton.testing.do_bench
(every sample of its call, return_mode="all", whose median is do_bench's; where it has no such
mode its 0.5 quantile or median statistic; keywords feature-detected), and, in
`truth-details.json` only, the engine's loop with do_bench's zero flush (isolates the flush from
the loop). matmul rows run _truth_gpu.MATMUL_ROUNDS rounds (up to MATMUL_MAX_ROUNDS). The SM
clock is sampled during each. A row's `engine_ms` and `do_bench_ms` are the medians of the calls
each made in the GPU's fast state (_truth_core.state_split: at most 10% of a call's samples above
1.03 x the row's pooled 10th percentile; at least 3 such calls of each method), else the medians
over all rounds (a method biased by more than ~3% has no fast-state calls, so its bias shows);
`truth-details.json` keeps both (`statistic`, `state_split`, `all_rounds`). ratio = engine /
do_bench. (Earlier versions of this stage also ran matmul rows with the former method, a
synchronize after every sample plus a fixed 100 us spin, and the engine with its former warm-up,
and rotated the order, every row's figures being the medians over all rounds: their runs are in
results/history/h200/2026-12-0*/truth*/truth-details.json.)

Writes, after every row (nothing finished is lost): `truth-dobench.json` shaped exactly
{"rows": [{"op", "impl", "dtype", "shape", "engine_ms", "do_bench_ms", "ratio"}]}, and
`truth-details.json` (environment, the references with SM clocks, per row and round every
measurement, checks, skipped rows). Rows not started within BUDGET_S are skipped and say so.
Without a GPU it writes empty files and says why (do_bench needs CUDA); the logic is unit-tested
on CPU with fakes (tests/test_stage_truth.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks.stages._truth_core import BUDGET_S, QUICK_BUDGET_S, TruthFiles, cases, run_cases

TITLE = "truth: engine timing loop vs triton.testing.do_bench (median), same process, interleaved"
ONLY: tuple[str, ...] | None = None  # --only: rows named op.impl.dtype (or an op), e.g. gelu.pytorch.bfloat16


def selected(todo: list, only: tuple[str, ...] | None) -> list:
    """The cases `only` names ("op.impl.dtype" or "op"), in the stage's order; all without it."""
    if not only:
        return todo
    names = {c.op for c in todo} | {f"{c.op}.{c.impl}.{c.dtype}" for c in todo}
    unknown = [name for name in only if name not in names]
    if unknown:
        raise ValueError(f"truth --only: no row {', '.join(map(repr, unknown))}; rows: {', '.join(sorted(names))}")
    return [c for c in todo if c.op in only or f"{c.op}.{c.impl}.{c.dtype}" in only]


def run(quick: bool, out: Path) -> list[dict]:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    files = TruthFiles(out)
    if not torch.cuda.is_available():
        files.details["environment"] = "no CUDA GPU: do_bench needs one; nothing timed"
        files.write()
        print("truth stage: no CUDA GPU here (triton.testing.do_bench needs one): nothing timed", file=sys.stderr)
        return [{"item": "truth", "status": "skipped", "note": "no CUDA GPU"}]
    from benchmarks.stages._truth_gpu import GpuTruth

    gpu = GpuTruth("cuda:0", rounds=3 if quick else 5, quick=quick)
    files.details["environment"] = gpu.environment()
    files.details["references"] = gpu.references()
    files.write()
    run_cases(selected(cases(quick), ONLY), files, gpu.time_case, min(BUDGET_S, QUICK_BUDGET_S) if quick else BUDGET_S)
    return files.table()
