"""Stage `ops`: every implementation of the lecture's other ops, checked and timed in each dtype.

    python benchmarks/gpu_evidence.py --stage ops [--quick] [--out DIR]

softmax, matmul, matmul_gelu, add, cdist, mlp and sleep (GeLU has its own stage), each at a
mid-size shape (--quick: small), every registered implementation in each of the op's dtypes,
through the engine's run_plan: check against float64, then median ms and GB/s (memory-bound
ops) or TFLOP/s (products). Without a GPU: CPU-sized shapes, CUDA rows unavailable, Triton
interpreted. Writes ops_results.json (the results document) and ops_log.txt to `out`.
Time: rows not started within BUDGET_S are reported skipped ("cancelled"); the runs go dtype
by dtype (bfloat16 first), so a cut loses float32 rows first.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.stages._op_runs import OpRun, has_gpu, run_session, session_of, table_rows
from workbench.session.model import Settings

TITLE = "ops: every implementation of softmax, matmul, matmul_gelu, add, cdist, mlp, sleep, each dtype"
BUDGET_S = 200       # for run_plan, after the warm-up
WARM_BUDGET_S = 75  # parallel builds
ALL = ("bfloat16", "float16", "float32")
ONLY: tuple[str, ...] | None = None  # dtypes to run, in this order (gpu_evidence.py --only)

GPU_RUNS = [
    OpRun("softmax", {"M": 8192, "N": 4096}, ALL),
    OpRun("matmul", {"M": 4096, "N": 4096, "K": 4096}, ALL),
    OpRun("matmul_gelu", {"M": 4096, "N": 4096, "K": 4096}, ("bfloat16", "float16")),
    OpRun("add", {"M": 8192, "N": 8192}, ALL),
    OpRun("cdist", {"M": 4096, "N": 4096, "D": 64}, ("float32",)),
    OpRun("mlp", {"batch": 1024, "dim": 2048, "layers": 4, "steps": 2}, ALL),
    OpRun("sleep", {"sleep_ms": 10}, ("float32",)),
]
QUICK_SHAPES = {"softmax": {"M": 2048, "N": 1024}, "matmul": {"M": 1024, "N": 1024, "K": 1024},
                "matmul_gelu": {"M": 1024, "N": 1024, "K": 1024}, "add": {"M": 2048, "N": 2048},
                "cdist": {"M": 1024, "N": 1024, "D": 64}, "mlp": {"batch": 256, "dim": 256, "layers": 4, "steps": 2},
                "sleep": {"sleep_ms": 10}}
CPU_SHAPES = {"softmax": {"M": 64, "N": 1000}, "matmul": {"M": 96, "N": 80, "K": 64},
              "matmul_gelu": {"M": 96, "N": 80, "K": 64}, "add": {"M": 64, "N": 1000},
              "cdist": {"M": 40, "N": 30, "D": 16}, "mlp": {"batch": 16, "dim": 64, "layers": 2, "steps": 2},
              "sleep": {"sleep_ms": 2}}


def runs_for(gpu: bool, quick: bool) -> list[OpRun]:
    if gpu and not quick:
        return GPU_RUNS
    shapes = QUICK_SHAPES if gpu else CPU_SHAPES
    return [OpRun(r.op, shapes[r.op], r.dtypes, r.impls, r.params) for r in GPU_RUNS]


def settings_for(gpu: bool, quick: bool) -> Settings:
    if not gpu:
        return Settings(device="cpu", warmup_ms=2, rep_ms=10, min_samples=3, target_rel_error=0.5,
                        timeout_s=300, flush_l2=False)
    return Settings(device="cuda", warmup_ms=10, rep_ms=20 if quick else 50, min_samples=5, timeout_s=240)


def run(quick: bool, out: Path) -> list[dict]:
    gpu = has_gpu()
    if not gpu:
        print("ops stage: no CUDA GPU here: CPU-sized shapes, CUDA rows unavailable, Triton interpreted")
    runs = runs_for(gpu, quick)
    if ONLY:
        runs = [OpRun(r.op, r.shape, tuple(d for d in ONLY if d in r.dtypes), r.impls, r.params) for r in runs]
        runs = [r for r in runs if r.dtypes]
    session = session_of("ops", runs, settings_for(gpu, quick), dtype_major=True)
    return table_rows(run_session(session, out, BUDGET_S, WARM_BUDGET_S))
