"""Compile ahead, in parallel processes, what a GEMM stage on this GPU will build: every TMA GEMM
candidate of this device's lists (so the tuner's compiles are cache hits) and the library rows
that compile (torch.compile, load_inline), through the registry with tune=False.

    python benchmarks/gemm_prewarm.py [--workers 12] [--dtypes bfloat16,float16] [--builds OP:IMPL:MxNxK:DTYPE,...]

Nothing is timed here: run it before a stage (benchmarks/stages/misses.py), never beside one.
Triton's compile cache and the engine's build folder are on disk, so the stage's own builds read
them. A TMA kernel's specialisation does not depend on M, N, K (multiples of 16 alike) and the
persistent grid is min(SMs, tiles): 4096^2 tiles of 128 x 256 already fill 132 SMs, so every
candidate is launched once at 4096^3 and serves 8192^3 too.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def tasks(dtypes: list[str], builds: list[str]) -> list[dict]:
    """One task per (dtype, activation, candidate) of this device's TMA lists, then the builds."""
    import torch

    from workbench.kernels import _tma_gemm as T
    from workbench.tuning import device_tag

    device = device_tag() if torch.cuda.is_available() else None
    out = []
    for dtype in dtypes:
        for act in ("none", "gelu"):
            for config in T.candidate_configs(device, act, 8192):
                out.append({"kind": "tma", "dtype": dtype, "act": act, "config": config})
    for b in builds:
        op, impl, shape, dtype = b.split(":")
        dims = [int(x) for x in shape.split("x")]
        out.append({"kind": "build", "op": op, "impl": impl, "dtype": dtype,
                    "shape": dict(zip(("M", "N", "K"), dims))})
    return out


def work(task: dict) -> str:
    import torch

    if task["kind"] == "tma":
        from workbench.kernels import _tma_gemm as T

        n = 4096
        tdt = getattr(torch, task["dtype"])
        a = torch.randn((n, n), device="cuda", dtype=tdt)
        b = torch.randn((n, n), device="cuda", dtype=tdt)
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        spec = type("S", (), {"dtype": task["dtype"]})()
        T.tma_runner(spec, task["config"], task["act"], sms)(a, b)
        torch.cuda.synchronize()
        return "ok"
    from workbench.engine.plan import default_cache_dir
    from workbench.registry import BuildContext, discover

    op = discover().op(task["op"])
    impl = op.get_impl(task["impl"])
    spec = op.make_spec(task["shape"], task["dtype"])
    ctx = BuildContext(device="cuda:0", build_dir=default_cache_dir() / "build", tune=False)
    fn = impl.builder(spec, impl.resolve_params({}), ctx)
    fn(*op.make_inputs(spec, "cuda:0", 0))
    torch.cuda.synchronize()
    return "ok"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--dtypes", default="bfloat16,float16")
    ap.add_argument("--builds", default="")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)  # "i/n": this process's share
    args = ap.parse_args()
    all_tasks = tasks(args.dtypes.split(","), [b for b in args.builds.split(",") if b])
    if args.worker:
        i, n = (int(x) for x in args.worker.split("/"))
        for t in all_tasks[i::n]:
            start = time.monotonic()
            try:
                note = work(t)
            except Exception as exc:  # noqa: BLE001 - a candidate that cannot compile is the tuner's to drop
                note = f"{type(exc).__name__}: {str(exc)[:160]}"
            print(f"prewarm {json.dumps({k: v for k, v in t.items() if k != 'kind'})}: {note} "
                  f"({time.monotonic() - start:.1f} s)", flush=True)
        return 0
    start = time.monotonic()
    n = max(1, min(args.workers, len(all_tasks)))
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", f"{i}/{n}", "--dtypes", args.dtypes,
                               "--builds", args.builds], cwd=ROOT) for i in range(n)]
    rc = max(p.wait() for p in procs)
    print(f"prewarm: {len(all_tasks)} tasks in {n} processes, {time.monotonic() - start:.0f} s", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
