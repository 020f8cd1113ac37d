"""Stage `gelu`: all GeLU implementations checked and timed at 16384 x 16384 in each dtype.

    python benchmarks/gpu_evidence.py --stage gelu [--quick] [--out DIR]

Every registered GeLU implementation (manual, pytorch, pytorch_erf, compiled, cuda_naive, cuda,
triton) in float32, float16 and bfloat16 through the engine's run_plan: check against the
float64 reference of its variant, then median ms and GB/s (--quick: 4096 x 4096). Without a
GPU: 256 x 256, CUDA rows unavailable, Triton interpreted. Writes gelu_results.json and
gelu_log.txt to `out`; rows not started within BUDGET_S are reported skipped ("cancelled").
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.stages._op_runs import OpRun, has_gpu, run_session, session_of, table_rows
from workbench.session.model import Settings

TITLE = "gelu: every implementation at 16384x16384, each dtype (GB/s)"
BUDGET_S = 100       # for run_plan, after the warm-up
WARM_BUDGET_S = 50  # parallel builds


def run(quick: bool, out: Path) -> list[dict]:
    gpu = has_gpu()
    size = (4096 if quick else 16384) if gpu else 256
    if gpu:
        settings = Settings(device="cuda", warmup_ms=10, rep_ms=20 if quick else 50, min_samples=5, timeout_s=240)
    else:
        print("gelu stage: no CUDA GPU here: 256x256, CUDA rows unavailable, Triton interpreted")
        settings = Settings(device="cpu", warmup_ms=2, rep_ms=10, min_samples=3, target_rel_error=0.5,
                            timeout_s=300, flush_l2=False)
    run_ = OpRun("gelu", {"M": size, "N": size}, ("float32", "float16", "bfloat16"))
    session = session_of("gelu", [run_], settings, dtype_major=False)
    return table_rows(run_session(session, out, BUDGET_S, WARM_BUDGET_S))
