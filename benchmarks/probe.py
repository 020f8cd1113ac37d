"""First contact with a GPU box: versions, tools, and GeLU in every implementation (do_bench).

    python benchmarks/probe.py [--size 4096]

A quick sanity pass, independent of the engine: check each GeLU implementation (workbench.check.row.check_output) in each
dtype and time it with triton.testing.do_bench (median). Ends with a compact table.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import subprocess
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=4096)
    args = parser.parse_args()
    import torch
    import triton
    from triton.testing import do_bench

    from workbench.registry import BuildContext, discover
    from workbench.check.row import check_output

    print("python", platform.python_version(), "torch", torch.__version__, "triton", triton.__version__)
    print("gpu", torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0))
    for tool in ("nvcc", "cuobjdump", "nvdisasm", "ncu", "ninja"):
        print(tool, shutil.which(tool))
    print(subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw",
                          "--format=csv"], capture_output=True, text=True).stdout)
    op = discover().op("gelu")
    ctx = BuildContext(device="cuda:0")
    rows = []
    for dtype in ("float32", "float16", "bfloat16"):
        spec = op.make_spec({"M": args.size, "N": args.size}, dtype)
        inputs = op.make_inputs(spec, "cuda:0", 0)
        for name, impl in op.impls.items():
            t0 = time.perf_counter()
            try:
                fn = impl.builder(spec, impl.resolve_params({}), ctx)
                out = fn(*inputs)
                torch.cuda.synchronize()
                build_s = time.perf_counter() - t0
                report = check_output(op, impl, spec, ctx, inputs, out)
                ms = do_bench(lambda: fn(*inputs), warmup=25, rep=100, return_mode="median")
                gbps = op.cost(spec).bytes / ms / 1e6
                rows.append((dtype, name, f"{build_s:.1f}", report.passed, f"{report.rel_l2_err:.1e}", f"{ms:.4f}", f"{gbps:.0f}"))
            except Exception as exc:  # report and go on
                rows.append((dtype, name, "-", "ERR", str(exc).splitlines()[0][:80], "-", "-"))
    print(f"\n{'dtype':9} {'impl':12} {'build_s':>7} {'ok':>5} {'rel_l2':>8} {'median_ms':>10} {'GB/s':>6}")
    for r in rows:
        print(f"{r[0]:9} {r[1]:12} {r[2]:>7} {str(r[3]):>5} {r[4]:>8} {r[5]:>10} {r[6]:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
