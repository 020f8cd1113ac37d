"""The check's input fingerprint on a GPU: the Triton pass against the torch path, same tensor
(workbench/check/fingerprint_triton.py): are they equal, and ms per fingerprint (median of 5,
synchronised, after a warm-up call that compiles the kernel).

    python benchmarks/fingerprint_speed.py [--elements 268435456]   # 16384^2

Prints one JSON line per dtype: dtype, elements, equal, torch_ms, triton_ms, speedup.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import torch

    from workbench.check import inputs

    parser = argparse.ArgumentParser()
    parser.add_argument("--elements", type=int, default=16384 * 16384)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA GPU"}))
        return

    def timed(fn) -> tuple[object, float]:
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            out = fn()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        return out, statistics.median(times)

    for dtype in (torch.float32, torch.bfloat16, torch.float8_e4m3fn):
        t = torch.randn(args.elements, device="cuda").to(dtype)
        os.environ["WORKBENCH_FINGERPRINT"] = "torch"
        a, torch_ms = timed(lambda t=t: inputs.fingerprint(t))
        os.environ.pop("WORKBENCH_FINGERPRINT")
        b, triton_ms = timed(lambda t=t: inputs.fingerprint(t))
        print(json.dumps({"dtype": str(dtype), "elements": args.elements, "equal": bool(torch.equal(a, b)),
                          "torch_ms": round(torch_ms, 3), "triton_ms": round(triton_ms, 3),
                          "speedup": round(torch_ms / triton_ms, 1)}), flush=True)


if __name__ == "__main__":
    main()
