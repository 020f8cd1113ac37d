"""The program ncu runs for a row's `counters` action (workbench/counters.py, engine/counters_run.py).

    python -m workbench.engine.measure.counters_entry JOB.json

JOB.json: {"plugin_paths", "op", "impl", "params", "shape", "dtype", "device", "fp32_precision",
"seed", "build_dir", "warmup_calls"}. It builds the implementation as the engine does (the
builder, then a first synchronised call), warms up `warmup_calls` more calls, and makes ONE call
between cudaProfilerStart and cudaProfilerStop: under `ncu --profile-from-start off` only that
call's kernels are profiled. Exit 0 on success; 3 with one line on stderr on any error.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

EXIT_ERROR = 3


def profiled_call(job: dict) -> int:
    """Build, warm up, profile one call; returns the number of calls made before the profiled one."""
    import torch

    from workbench.engine.worker.precision import effective_fp32_precision, set_fp32_precision
    from workbench.registry import BuildContext, discover

    registry = discover(job.get("plugin_paths") or ())
    op = registry.op(job["op"])
    impl = op.get_impl(job["impl"])
    spec = op.make_spec(job["shape"], job["dtype"])
    device = job["device"]
    torch.cuda.set_device(torch.device(device))
    precision = effective_fp32_precision(op, job.get("fp32_precision", "ieee"))
    set_fp32_precision(precision)  # as the engine does before a row's build (engine/precision.py)
    ctx = BuildContext(device=device, fp32_precision=precision, interpret=False,
                       build_dir=Path(job["build_dir"]) if job.get("build_dir") else None)
    inputs = op.make_inputs(spec, device, int(job.get("seed", 0)))
    fn = impl.builder(spec, impl.resolve_params(job.get("params")), ctx)
    calls = 1 + int(job.get("warmup_calls", 3))
    for _ in range(calls):  # the first call is the build's (JIT, autotune): never profiled
        fn(*inputs)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    try:
        fn(*inputs)
        torch.cuda.synchronize()
    finally:
        torch.cuda.profiler.stop()
    return calls


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    os.environ.pop("TRITON_INTERPRET", None)  # counters are of compiled kernels on the GPU
    try:
        job = json.loads(Path(argv[0]).read_text())
        profiled_call(job)
    except Exception as exc:  # one line for the parent's `measured.reason`
        text = str(exc).strip().splitlines()
        print(f"counters run failed: {type(exc).__name__}: {text[0] if text else ''}", file=sys.stderr)
        return EXIT_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
