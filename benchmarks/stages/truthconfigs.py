"""Stage `truthconfigs`: the truth stage's matmul comparison (engine vs do_bench) per Triton config.

    python benchmarks/gpu_evidence.py --stage truthconfigs [--quick] [--out DIR]

Why (issue #11): in the truth stage the Triton bfloat16 8192^3 GEMM read 0.977-0.978 of do_bench
in two runs (15 and 30 rounds; cuBLAS 0.999-1.000 in the same runs), and 0.996-1.001 in four
runs before. The row runs whatever config the tuner picked, a stream-K one in most H200 runs
(kernels/_tma_gemm.py STREAMK: partial tiles through a workspace and flags). This stage times
fixed configs side by side, each with the three methods of the truth stage (the engine's loop
with its read flush, do_bench, the engine's loop with do_bench's zero flush), in rotating rounds,
so that a gap that follows the kernel is told from one that follows the method.

Writes `truthconfigs.json` ({"rows": [{"config", "rounds", "engine_ms", "do_bench_ms",
"engine_zero_ms", "ratio", "zero_ratio", "clock_matched"}]}) after every config. Without a GPU:
nothing timed, says why.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

TITLE = "truthconfigs: engine vs do_bench for fixed Triton GEMM configs (8192^3 bf16) and cuBLAS"
SHAPE = {"M": 8192, "N": 8192, "K": 8192}
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, SUBTILE, GROUP_M, STREAMK): the configs the
# tuner picked at 8192^3 on the H200 (results/history/h200/2026-12-03*/misses-call*/misses.json)
CONFIGS = ((128, 256, 64, 8, 3, 1, 8, 1), (128, 256, 64, 8, 3, 1, 16, 0), (128, 256, 64, 8, 4, 1, 8, 0))
ROUNDS, QUICK_ROUNDS = 15, 5


def run(quick: bool, out: Path) -> list[dict]:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    if not torch.cuda.is_available():
        print("truthconfigs stage: no CUDA GPU here (do_bench needs one): nothing timed", file=sys.stderr)
        return [{"item": "truthconfigs", "status": "skipped", "note": "no CUDA GPU"}]
    from benchmarks.stages._truth_core import clock_matched, interleave
    from benchmarks.stages._truth_gpu import GpuTruth
    from workbench.kernels._tma_gemm import CONFIG_KEYS, tma_runner

    gpu = GpuTruth("cuda:0", rounds=QUICK_ROUNDS if quick else ROUNDS, quick=quick)
    op = gpu.registry.op("matmul")
    spec = op.make_spec(SHAPE, "bfloat16")
    a, b = op.make_inputs(spec, "cuda:0", 0)
    sides = {"cuBLAS": lambda: torch.matmul(a, b)}
    for config in CONFIGS:
        runner = tma_runner(spec, dict(zip(CONFIG_KEYS, config)), "none", torch.cuda.get_device_properties(0).multi_processor_count)
        sides[f"triton {config}"] = (lambda runner=runner: runner(a, b))
    rows, table = [], []
    for name, call in sides.items():
        call()
        torch.cuda.synchronize()
        found = interleave(gpu.methods(call), gpu.rounds, settle=lambda: gpu._settle(call))
        med = {k: statistics.median(ms for ms, _ in v) for k, v in found.items()}
        row = {"config": name, "rounds": {k: [{"ms": ms, "sm_clock_mhz": mhz} for ms, mhz in v] for k, v in found.items()},
               "engine_ms": med["engine"], "do_bench_ms": med["do_bench"], "engine_zero_ms": med["engine_zero_flush"],
               "ratio": med["engine"] / med["do_bench"], "zero_ratio": med["engine_zero_flush"] / med["do_bench"],
               "clock_matched": clock_matched(found)}
        rows.append(row)
        (out / "truthconfigs.json").write_text(json.dumps({"shape": SHAPE, "dtype": "bfloat16", "rows": rows}, indent=1))
        table.append({"item": name, "median_ms": row["engine_ms"], "value": row["do_bench_ms"], "unit": "ms (do_bench)",
                      "note": f"ratio {row['ratio']:.3f}; zero-flush engine / do_bench {row['zero_ratio']:.3f}"})
        print(f"  truthconfigs {name}: ratio {row['ratio']:.3f}", file=sys.stderr)
    return table
