"""GEMM tile sweep on one GPU: the TMA kernel's configs (and a warp-specialised variant) against
cuBLAS, and the fused GeLU epilogue against `manual` and torch.compile (default and max-autotune).

    python benchmarks/gemm_sweep.py --out DIR [--budget-s 330] [--sizes 4096,8192]

Exploration, not the run of record (that is the engine's: benchmarks/kernels_table.py). Every
config is checked against cuBLAS's product first, then all survivors and cuBLAS are timed in
ROUNDS interleaved rounds (forward, backward, ...) with triton.testing.do_bench (median, L2
flushed); a row's time is the median of its rounds. Writes sweep.json (every time, the clocks)
and inductor.txt (what torch.compile emitted: the profiled kernel names) under DIR as it goes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROUNDS = 5
KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "SUBTILE", "GROUP_M", "STREAMK")
SWEEP = [
    (128, 256, 64, 8, 3, 1, 8, 0), (128, 256, 64, 8, 4, 1, 8, 0), (128, 256, 64, 8, 3, 0, 8, 0),
    (128, 256, 64, 8, 3, 1, 16, 0), (128, 256, 64, 8, 4, 1, 4, 0), (128, 128, 64, 4, 4, 1, 8, 0),
    (128, 256, 64, 8, 4, 1, 8, 1), (128, 256, 64, 8, 3, 1, 8, 1),
    (128, 256, 64, 8, 4, 1, 16, 0), (128, 256, 64, 8, 3, 0, 16, 0), (128, 256, 64, 8, 3, 1, 32, 0),
    (128, 256, 64, 8, 3, 1, 4, 0), (128, 256, 64, 8, 4, 1, 16, 1), (128, 256, 32, 8, 6, 1, 8, 0),
    (256, 128, 64, 8, 3, 1, 8, 0), (256, 128, 64, 8, 4, 1, 8, 0), (128, 256, 64, 8, 4, 0, 8, 0),
]
GELU_SWEEP = [SWEEP[i] for i in (0, 1, 2, 3, 6, 7, 8, 12, 14)]


def clocks() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,"
                               "power.limit,temperature.gpu,clocks_throttle_reasons.active", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception as exc:  # noqa: BLE001
        return f"nvidia-smi: {exc}"


def bench(fn) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median"))


def rounds(fns: dict, budget_end: float) -> dict:
    times = {k: [] for k in fns}
    for r in range(ROUNDS):
        order = list(fns) if r % 2 == 0 else list(fns)[::-1]
        for k in order:
            if k not in times:
                continue
            try:
                times[k].append(bench(fns[k]))
            except Exception as exc:  # noqa: BLE001
                print(f"  {k}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
                times.pop(k)
        if time.time() > budget_end and r >= 2:
            break
    return {k: {"median_ms": statistics.median(v), "rounds_ms": [round(x, 5) for x in v]} for k, v in times.items() if v}


def label(cfg) -> str:
    return "tma " + " ".join(f"{k}={v}" for k, v in zip(KEYS, cfg))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=330)
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--autotune-gelu", default="8192:bfloat16")
    args = ap.parse_args()
    t0 = time.time()
    end = t0 + args.budget_s
    import torch
    import torch.nn.functional as F
    import triton

    from workbench.kernels import _tma_gemm as T

    args.out.mkdir(parents=True, exist_ok=True)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    doc = {"device": torch.cuda.get_device_name(), "cc": torch.cuda.get_device_capability(), "sms": sms,
           "torch": torch.__version__, "triton": triton.__version__, "clocks_start": clocks(), "gemm": [], "gelu": []}
    save = lambda: (args.out / "sweep.json").write_text(json.dumps(doc, indent=1))  # noqa: E731
    print(doc["device"], doc["clocks_start"], flush=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    for act, sweep in (("none", SWEEP), ("gelu", GELU_SWEEP)):
        for n in sizes:
            for dtype in ("bfloat16", "float16"):
                if time.time() > end:
                    print(f"budget over: skipping {act} {n} {dtype}", flush=True)
                    continue
                tdt = getattr(torch, dtype)
                g = torch.Generator(device="cuda").manual_seed(0)
                a = torch.randn((n, n), device="cuda", dtype=tdt, generator=g)
                b = torch.randn((n, n), device="cuda", dtype=tdt, generator=g)
                ref = a @ b
                if act == "gelu":
                    ref = F.gelu(ref, approximate="tanh")
                fns, errors = {}, {}
                fns["cublas" if act == "none" else "manual"] = (lambda: a @ b) if act == "none" else (
                    lambda: F.gelu(a @ b, approximate="tanh"))
                if act == "gelu":
                    torch._dynamo.reset()
                    comp = torch.compile(lambda x, y: F.gelu(x @ y, approximate="tanh"), dynamic=False)
                    comp(a, b)
                    fns["compiled"] = lambda: comp(a, b)
                    if f"{n}:{dtype}" in args.autotune_gelu.split(","):
                        try:
                            ta = time.time()
                            compm = torch.compile(lambda x, y: F.gelu(x @ y, approximate="tanh"), dynamic=False,
                                                  mode="max-autotune-no-cudagraphs")
                            compm(a, b)
                            print(f"  max-autotune compile {time.time() - ta:.0f} s", flush=True)
                            fns["compiled_maxautotune"] = lambda: compm(a, b)
                        except Exception as exc:  # noqa: BLE001
                            errors["compiled_maxautotune"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                for cfg in sweep:
                    config = dict(zip(KEYS, cfg))
                    try:
                        run = T.tma_runner(type("S", (), {"dtype": dtype})(), config, act, sms)
                        out = run(a, b)
                        err = (out.float() - ref.float()).abs().max().item()
                        if not err < 0.05 * ref.float().abs().max().item():
                            errors[label(cfg)] = f"wrong: max err {err}"
                            continue
                        fns[label(cfg)] = (lambda r=run: r(a, b))
                    except Exception as exc:  # noqa: BLE001
                        errors[label(cfg)] = f"{type(exc).__name__}: {str(exc)[:200]}"
                torch.cuda.synchronize()
                res = rounds(fns, end)
                base = res.get("cublas" if act == "none" else "manual", {}).get("median_ms")
                if act == "gelu":
                    base = min(v["median_ms"] for k, v in res.items() if k in ("manual", "compiled", "compiled_maxautotune"))
                for v in res.values():
                    v["x_base"] = round(base / v["median_ms"], 4) if base else None
                entry = {"act": act, "n": n, "dtype": dtype, "base": "cublas" if act == "none" else "min(manual, compiled*)",
                         "results": res, "errors": errors, "clocks": clocks(), "t_s": round(time.time() - t0, 1)}
                doc["gemm" if act == "none" else "gelu"].append(entry)
                best = sorted(res.items(), key=lambda kv: kv[1]["median_ms"])[:4]
                print(f"{act} {n} {dtype} t={entry['t_s']}s " + "; ".join(f"{k}: {v['median_ms']:.4f} ({v['x_base']})" for k, v in best)
                      + f"; base {base}", flush=True)
                for k in ("cublas", "manual", "compiled", "compiled_maxautotune"):
                    if k in res:
                        print(f"   {k}: {res[k]['median_ms']:.4f}", flush=True)
                if errors:
                    print(f"   errors: {errors}", flush=True)
                save()
                if act == "gelu" and n == sizes[-1] and dtype == "bfloat16":
                    profile_names(fns, args.out)
                del a, b, ref, fns
                torch.cuda.empty_cache()
    doc["clocks_end"] = clocks()
    doc["total_s"] = round(time.time() - t0, 1)
    save()
    print("done", doc["total_s"], flush=True)
    return 0


def profile_names(fns: dict, out: Path) -> None:
    """The CUDA kernels each library implementation launches (torch.profiler), to inductor.txt."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    lines = []
    for k in ("manual", "compiled", "compiled_maxautotune"):
        if k not in fns:
            continue
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fns[k]()
            torch.cuda.synchronize()
        names = [f"{e.key} x{e.count} {e.device_time_total / max(e.count, 1):.1f} us" for e in prof.key_averages()
                 if e.device_time_total > 0]
        lines.append(f"{k}: " + " | ".join(names))
    (out / "inductor.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    sys.exit(main())
