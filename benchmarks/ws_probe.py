"""Probe of the warp-specialised Gluon GEMM (kernels/_ws_gemm.py) on a Hopper GPU: check, then
time against cuBLAS and the TMA kernel (kernels/_tma_gemm.py) in rotating rounds.

    python benchmarks/ws_probe.py check [--quick]       # correctness, one process (run under timeout)
    python benchmarks/ws_probe.py time OUT.json [--quick]

Timing: triton.testing.do_bench medians (25 ms warm-up, 100 ms of repetitions, its L2 flush),
every side once a round, the order rotated each round, ROUNDS rounds; the row's figure is the
median over rounds, and the ratio is cuBLAS's median / the side's (above 1: faster than cuBLAS).
"""

from __future__ import annotations

import json
import statistics
import sys
import time

WS_CONFIGS = [
    dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_stages=4, GROUP_M=8, CONSUMER_REGS=232),
    dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_stages=5, GROUP_M=8, CONSUMER_REGS=232),
    dict(BLOCK_M=64, BLOCK_N=256, BLOCK_K=64, num_stages=4, GROUP_M=8, CONSUMER_REGS=232),
    dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_stages=4, GROUP_M=16, CONSUMER_REGS=232),
]
TMA_CONFIGS = [(128, 256, 64, 8, 3, 1, 8, 0), (128, 256, 64, 8, 4, 1, 8, 0), (128, 256, 64, 8, 3, 1, 16, 0)]
ROUNDS = 5


def ws_fn(a, b, cfg, activation="none"):
    import torch

    from kernels._ws_gemm import run_ws

    def run():
        c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        run_ws(a, b, c, cfg, activation)
        return c
    return run


def tma_fn(a, b, tup, activation="none"):
    from kernels._tma_gemm import CONFIG_KEYS, tma_runner

    class Spec:
        dtype = str(a.dtype).replace("torch.", "")
    run = tma_runner(Spec, dict(zip(CONFIG_KEYS, tup)), activation, 132)
    return lambda: run(a, b)


def check(quick: bool) -> int:
    import torch

    failures = 0
    shapes = [(4096, 4096, 4096), (1000, 1000, 1000), (256, 512, 4096 + 64)] if quick else \
        [(4096, 4096, 4096), (8192, 8192, 8192), (1000, 1000, 1000), (256, 512, 4160), (128, 128, 64), (3000, 200, 512)]
    for dtype in (torch.bfloat16, torch.float16):
        for (m, n, k) in shapes:
            g = torch.Generator(device="cuda").manual_seed(m + n + k)
            a = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
            b = torch.randn(k, n, device="cuda", dtype=dtype, generator=g)
            ref = (a.float() @ b.float())
            for cfg in WS_CONFIGS[:3]:
                for act in ("none", "gelu"):
                    t0 = time.perf_counter()
                    out = ws_fn(a, b, cfg, act)()
                    torch.cuda.synchronize()
                    want = torch.nn.functional.gelu(ref, approximate="tanh") if act == "gelu" else ref
                    err = ((out.float() - want).norm() / want.norm()).item()
                    ok = err < 1e-2 and out.dtype == dtype and torch.isfinite(out).all().item()
                    failures += not ok
                    print(f"check {str(dtype)[6:]} {m}x{n}x{k} {act} {cfg['BLOCK_M']}x{cfg['BLOCK_N']} s{cfg['num_stages']}: "
                          f"rel {err:.2e} {'ok' if ok else 'FAIL'} ({(time.perf_counter() - t0) * 1e3:.0f} ms)", flush=True)
    return failures


def median_ms(fn):
    import triton

    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def time_all(out: str, quick: bool) -> None:
    import torch
    import torch.nn.functional as F

    rows = []
    problems = [(4096, "bfloat16", "none"), (4096, "float16", "none"), (8192, "bfloat16", "none"),
                (8192, "float16", "none"), (8192, "bfloat16", "gelu")]
    if quick:
        problems = problems[:1] + problems[-1:]
    for n, dtype, act in problems:
        dt = getattr(torch, dtype)
        a = torch.randn(n, n, device="cuda", dtype=dt)
        b = torch.randn(n, n, device="cuda", dtype=dt)
        sides = {"cublas": (lambda: F.gelu(a @ b, approximate="tanh")) if act == "gelu" else (lambda: a @ b)}
        for tup in TMA_CONFIGS:
            sides[f"tma {tup[:5]} G{tup[6]}"] = tma_fn(a, b, tup, act)
        for cfg in (WS_CONFIGS[:2] if quick else WS_CONFIGS):
            sides[f"ws {cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} s{cfg['num_stages']} G{cfg['GROUP_M']}"] = ws_fn(a, b, cfg, act)
        for fn in sides.values():  # compile and warm every side first
            fn()
        torch.cuda.synchronize()
        found = {name: [] for name in sides}
        names = list(sides)
        for r in range(ROUNDS):
            for name in names[r % len(names):] + names[:r % len(names)]:
                found[name].append(median_ms(sides[name]))
        base = statistics.median(found["cublas"])
        for name, got in found.items():
            med = statistics.median(got)
            flops = 2 * n ** 3 / (med * 1e-3) / 1e12
            rows.append({"n": n, "dtype": dtype, "activation": act, "side": name, "median_ms": med,
                         "rounds_ms": got, "tflops": flops, "x_cublas": base / med})
            print(f"{n}^3 {dtype} {act:4s} {name:34s} {med:.4f} ms {flops:6.1f} TFLOP/s  x{base / med:.3f}  "
                  f"rounds {min(got):.4f}-{max(got):.4f}", flush=True)
        with open(out, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, fh, indent=1)
        del a, b
        torch.cuda.empty_cache()


def diag(cfg_json: str, n: int, activation: str) -> int:
    """One config at n^3 bfloat16, synchronously: prints the relative error or the CUDA error."""
    import torch

    cfg = {**WS_CONFIGS[0], **json.loads(cfg_json)}
    g = torch.Generator(device="cuda").manual_seed(n)
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    ref = a.float() @ b.float()
    if activation == "gelu":
        ref = torch.nn.functional.gelu(ref, approximate="tanh")
    out = ws_fn(a, b, cfg, activation)()
    torch.cuda.synchronize()
    err = ((out.float() - ref).norm() / ref.norm()).item()
    print(f"diag {cfg} n={n} {activation}: rel {err:.2e} {'ok' if err < 1e-2 else 'WRONG'}", flush=True)
    return 0 if err < 1e-2 else 1


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    if sys.argv[1] == "diag":
        sys.exit(diag(sys.argv[2], int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "none"))
    if sys.argv[1] == "check":
        sys.exit(1 if check(quick) else 0)
    time_all(sys.argv[2], quick)
