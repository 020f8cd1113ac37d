"""The process stage `misses` runs under Nsight Compute: build every side of the job, warm each up,
then make ONE call of each between cudaProfilerStart and cudaProfilerStop, in the job's order
(`ncu --profile-from-start off` profiles only those calls' kernels; the stage labels them by the
kernel counts per call it measured with torch.profiler).

    ncu --clock-control none ... python -m benchmarks.stages._misses_ncu JOB.json

JOB.json: {"device": "cuda:0", "sides": [{"label", "op", "impl", "shape", "dtype"}, ...]}. The
builds read the autotune and compile caches the timing process filled (same user cache folder),
so each side runs the config that was timed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(path: str) -> int:
    import torch

    from workbench.engine.plan import default_cache_dir
    from workbench.registry import BuildContext, discover

    job = json.loads(Path(path).read_text())
    registry, device = discover(), job["device"]
    calls = []
    for side in job["sides"]:
        op = registry.op(side["op"])
        impl = op.get_impl(side["impl"])
        spec = op.make_spec(side["shape"], side["dtype"])
        ctx = BuildContext(device=device, fp32_precision="ieee", interpret=False, build_dir=default_cache_dir() / "build")
        fn = impl.builder(spec, impl.resolve_params({}), ctx)
        inputs = op.make_inputs(spec, device, 0)
        for _ in range(3):
            fn(*inputs)
        calls.append((side["label"], fn, inputs))
    torch.cuda.synchronize()
    cudart = torch.cuda.cudart()
    for label, fn, inputs in calls:
        cudart.cudaProfilerStart()
        fn(*inputs)
        torch.cuda.synchronize()
        cudart.cudaProfilerStop()
        print(f"profiled {label}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
