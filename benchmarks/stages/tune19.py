"""Stage `tune19`: every autotune candidate of issue #19's misses, checked and timed side by side.

    python benchmarks/gpu_evidence.py --stage tune19 [--quick] [--out DIR] [--budget-s S]

Targets, in this order (issue #19's tuning; the CUDA build starts in the background at once):
the `triton` softmax at 16384 x 16384 bfloat16 (the pruned configs of kernels/_softmax_rows.py: a
regression check); the `cuda` one-pass softmax at 4096 x 262144 in bfloat16 and float32 (every
shape of kernels/_onepass.py: the pruned staged ones, the KEEP ones, the plan); the TMA GEMM's
candidates at 4096^3 bfloat16 and float16 against cuBLAS (torch.matmul; kernels/_tma_gemm.py
CANDIDATES); the `triton` softmax in float16. Full run only: the `cuda` plan at 16384 x 16384 and
65536 x 1024 float32, the Triton float32 16384 rows. A target that would not fit in what is left
of BUDGET_S is skipped.

Per target (benchmarks/stages/_tune19_core.py): every candidate checked with the engine's gates on
the first and special input sets, then the passing ones, a copy of the same bytes and dtype,
torch.softmax and torch.compile of the manual formula (triton_looped for long rows; cuBLAS for the
GEMM, no copy) timed with the engine's loop (L2 flushed); % of copy and x each reference; the fastest and those within its
spread; what workbench.tuning.autotune would choose (its do_bench medians); registers and spills of
the Triton candidates (cuobjdump). Writes OUT/tune19.json after every phase: a cut run keeps what
finished. No target starts past BUDGET_S. Without a GPU: small M at the same N (Triton interpreted,
CUDA targets skipped with the reason), to try the stage anywhere.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

TITLE = "tune19: #19 autotune candidates (softmax 16384^2 16-bit, 4096x262144, matmul 4096^3)"
BUDGET_S = 110.0  # no new target after this (nor one that would not fit); --quick ends inside a 150 s call
CPU_ROWS = 2      # rows per target without a GPU (the columns stay, so do the candidates)


def _prepare(gpu: bool) -> None:
    """Without a GPU, Triton must run interpreted: set before the kernels are first imported."""
    import os

    if not gpu:
        os.environ.setdefault("TRITON_INTERPRET", "1")


def _cuda_module(build_dir: Path) -> Any:
    """softmax.cu through load_inline, as the `cuda` builder loads it (same name, same cache)."""
    from workbench.kernels.softmax import load_module

    return load_module(build_dir)


def _target(op, impl_name: str, shape: dict, dtype: str, device: str, gpu: bool) -> dict:
    from workbench.registry import BuildContext

    rows = shape["M"] if gpu else CPU_ROWS
    spec = op.make_spec({**shape, "M": rows}, dtype)
    ctx = BuildContext(device=device, interpret=not gpu)
    return {"op": op.name, "impl": impl_name, "shape": {**shape, "M": rows}, "dtype": dtype,
            "_op": op, "_impl": op.get_impl(impl_name), "_spec": spec, "_ctx": ctx}


def _references(op, spec, ctx, gpu: bool, looped: bool = False) -> dict:
    import torch

    from workbench.kernels.softmax import manual_softmax

    refs = {"pytorch": lambda x: torch.softmax(x, dim=-1)}
    if gpu:  # Inductor on CPU compiles C++ for minutes on a small box: GPU runs only
        refs["compiled"] = torch.compile(manual_softmax, dynamic=False)
    if looped:
        impl = op.get_impl("triton_looped")
        refs["triton_looped"] = impl.builder(spec, impl.resolve_params({}), ctx)
    return refs


def _triton_target(sw, op, dtype: str, gpu: bool) -> tuple[dict, list, dict, Any]:
    from workbench.kernels import _softmax_rows as rows_kernel
    from workbench.kernels._utils import elementwise_runner
    from workbench.kernels.softmax import _one_block, _tuned_launch

    target = _target(op, "triton", {"M": 16384, "N": 16384}, dtype, sw.device, gpu)
    spec = target["_spec"]
    block, rule = _one_block(spec)
    configs = rows_kernel.candidates(block, rule)

    def runner(cfg):
        return elementwise_runner(_tuned_launch(spec, block, cfg))
    cands = [(" ".join(f"{k}={v}" for k, v in c.items()), c, runner(c)) for c in configs]
    tune = (configs, lambda cfg, inputs: runner(cfg)(*inputs), rows_kernel.TRITON_VERSION)
    return target, cands, _references(op, spec, target["_ctx"], gpu), tune


def _cuda_target(sw, op, shape: dict, dtype: str, gpu: bool, module: Any, long_rows: bool):
    from workbench.kernels._onepass import ONEPASS_VERSION
    from workbench.kernels.softmax import cuda_call, cuda_candidates

    target = _target(op, "cuda", shape, dtype, sw.device, gpu)
    spec = target["_spec"]
    configs = cuda_candidates(spec)  # what the implementation's tuner compares

    def runner(cfg):
        return cuda_call(module, cfg)
    cands = [(" ".join(f"{k}={v}" for k, v in c.items()), c, runner(c)) for c in configs]
    tune = (configs, lambda cfg, inputs: runner(cfg)(*inputs), ONEPASS_VERSION)
    return target, cands, _references(op, spec, target["_ctx"], gpu, looped=long_rows), tune


def _matmul_target(sw, op, shape: dict, dtype: str, gpu: bool):
    import torch

    from workbench.tuning import device_tag
    from workbench.kernels._tma_gemm import TMA_VERSION, candidate_configs, sm_count, tma_runner

    target = _target(op, "triton", shape, dtype, sw.device, gpu)
    if not gpu:  # the TMA kernel needs a Hopper GPU; the dry run keeps the shape small
        target["_spec"] = op.make_spec({"M": 64, "N": 64, "K": 64}, dtype)
        target["shape"] = {"M": 64, "N": 64, "K": 64}
    spec, configs = target["_spec"], candidate_configs(device_tag() if gpu else None)  # this device's list
    sms = sm_count(target["_ctx"])

    def runner(cfg):
        return tma_runner(spec, cfg, "none", sms)
    cands = [(" ".join(f"{k}={v}" for k, v in c.items()), c, runner(c)) for c in configs]
    tune = (configs, lambda cfg, inputs: runner(cfg)(*inputs), TMA_VERSION)
    return target, cands, {"cublas": torch.matmul}, tune


def _ptx_facts(target: dict, spec: Any, gpu: bool) -> None:
    """Registers and local memory per Triton candidate (the kernel this process compiled)."""
    if not gpu or target["impl"] != "triton":
        return
    import tempfile

    from workbench.kernels.softmax import _tuned_launch
    from workbench.ptx.resources import cubin_resources
    from workbench.ptx.triton_aot import build_source, compile_launch, resolve_target

    with tempfile.TemporaryDirectory() as tmp:
        for i, row in enumerate(target["candidates"]):
            try:
                launch = _tuned_launch(spec, 16384, row["config"])
                compiled, _ = compile_launch(build_source(launch, resolve_target(None, has_cuda=True)))
                cubin = Path(tmp) / f"k{i}.cubin"
                cubin.write_bytes(compiled.asm["cubin"])
                (res,) = cubin_resources(cubin).values()
                row["ptx"] = {"registers": res.registers, "local_bytes": res.spill_bytes,
                              "v4_loads": compiled.asm["ptx"].count(".v4.b32") > 0}
            except Exception as exc:  # facts are extras: never fail the target for them
                row["ptx"] = {"error": f"{type(exc).__name__}: {str(exc)[:120]}"}


def run(quick: bool, out: Path) -> list[dict]:
    import torch

    gpu = torch.cuda.is_available()
    _prepare(gpu)
    from benchmarks.stages._tune19_core import Sweep, autotuner_choice, sweep_target
    from workbench.engine.plan import default_cache_dir
    from workbench.fileio import atomic_write_text
    from workbench.registry import discover

    out.mkdir(parents=True, exist_ok=True)
    device = "cuda:0" if gpu else "cpu"
    sw = Sweep.make(device, quick, BUDGET_S)
    registry = discover()
    doc: dict[str, Any] = {"stage": "tune19", "quick": quick, "device": torch.cuda.get_device_name() if gpu else "cpu",
                           "torch": torch.__version__, "triton": _triton_version(), "targets": []}
    path = out / "tune19.json"

    def save() -> None:
        atomic_write_text(path, json.dumps(doc, indent=1, default=str))

    pool = ThreadPoolExecutor(max_workers=1)
    build: Future | None = pool.submit(_cuda_module, default_cache_dir() / "build") if gpu else None
    started = time.monotonic()
    plan = _plan(quick)
    for kind, shape, dtype in plan:
        name = f"{kind} {'x'.join(str(v) for v in shape.values())} {dtype}"
        why = _skip_reason(kind, gpu, sw.left_s())
        if why:
            doc["targets"].append({"name": name, "skipped": why})
            save()
            continue
        op = registry.op("matmul" if kind == "matmul" else "softmax")
        try:
            if kind == "triton":
                target, cands, refs, tune = _triton_target(sw, op, dtype, gpu)
            elif kind == "matmul":
                target, cands, refs, tune = _matmul_target(sw, op, shape, dtype, gpu)
            else:
                module = build.result() if build is not None else None
                target, cands, refs, tune = _cuda_target(sw, op, shape, dtype, gpu, module, shape["N"] > 16384)
            target["name"] = name
            doc["targets"].append(target)
            spec = target["_spec"]
            sweep_target(sw, target, cands, refs, save, copy=kind != "matmul")
            _ptx_facts(target, spec, gpu)
            configs, run_cfg, version = tune
            passing = [c for c, r in zip(configs, target["candidates"]) if r.get("passed")]
            if passing and gpu:
                tune_inputs = op.make_inputs(spec, device, 3)
                target["autotuner"] = autotuner_choice(op.name, target["impl"], spec, passing,
                                                       lambda cfg: run_cfg(cfg, tune_inputs), version)
                del tune_inputs
            target["wall_s"] = round(time.monotonic() - started, 1)
        except Exception as exc:  # one target failing keeps the others (and what it wrote)
            doc["targets"].append({"name": name, "error": f"{type(exc).__name__}: {str(exc)[:400]}"})
        save()
        if gpu:
            torch.cuda.empty_cache()
    pool.shutdown(wait=False, cancel_futures=True)
    save()
    return _table(doc)


# Seconds a target needs at least (its compiles and timing on the H200, estimated): one that would
# not fit in what is left of BUDGET_S is skipped, so the stage ends inside its call.
MIN_LEFT_S = {"triton": 20.0, "cuda": 20.0, "matmul": 30.0}


def _skip_reason(kind: str, gpu: bool, left_s: float) -> str | None:
    if left_s < MIN_LEFT_S[kind]:
        return f"stage budget: {max(left_s, 0):.0f} s of {BUDGET_S:.0f} s left, the target needs ~{MIN_LEFT_S[kind]:.0f} s"
    if kind == "cuda" and not gpu:
        return "no CUDA GPU here: the CUDA kernel is not built"
    if kind == "matmul" and not gpu:
        return "no CUDA GPU here: the TMA GEMM needs sm_90"
    return None


def _plan(quick: bool) -> list[tuple[str, dict, str]]:
    sq, long, cube = {"M": 16384, "N": 16384}, {"M": 4096, "N": 262144}, {"M": 4096, "N": 4096, "K": 4096}
    # Round 2 (--quick): the Triton bfloat16 softmax first (a regression check of the pruned list,
    # while softmax.cu builds in the background), the long rows with the KEEP shapes, both GEMM
    # dtypes, then the float16 softmax if time is left.
    plan = [("triton", sq, "bfloat16"), ("cuda", long, "bfloat16"), ("cuda", long, "float32"),
            ("matmul", cube, "bfloat16"), ("matmul", cube, "float16"), ("triton", sq, "float16")]
    if not quick:  # the float32 CUDA fix was verified on H200 (97.8% of copy, results/history/h200/2026-12-01b)
        plan += [("cuda", sq, "float32"), ("cuda", {"M": 65536, "N": 1024}, "float32"), ("triton", sq, "float32")]
    return plan


def _triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return triton.__version__


def _table(doc: dict) -> list[dict]:
    """Per target: the default (first) candidate, the three fastest, the references."""
    rows = []
    for t in doc["targets"]:
        if "candidates" not in t:
            rows.append({"target": t["name"], "what": t.get("skipped") or t.get("error")})
            continue
        timed = sorted((r for r in t["candidates"] if "timing" in r), key=lambda r: r["timing"]["median_ms"])
        shown = [t["candidates"][0]] + [r for r in timed[:3] if r is not t["candidates"][0]]
        for r in shown:
            rows.append({"target": t["name"], "what": r["label"], "passed": r.get("passed"),
                         "median_ms": (r.get("timing") or {}).get("median_ms"), "pct_copy": r.get("pct_of_copy"),
                         "x_compiled": r.get("x_compiled"), "x_cublas": r.get("x_cublas"),
                         "spread_pct": (r.get("timing") or {}).get("spread_pct")})
        for name, ref in (t.get("references") or {}).items():
            rows.append({"target": t["name"], "what": name, "median_ms": ref.get("median_ms"),
                         "pct_copy": ref.get("pct_of_copy"), "x_cublas": None})
        failed = sum(1 for r in t["candidates"] if not r.get("passed"))
        rows.append({"target": t["name"], "what": f"autotuner: {(t.get('autotuner') or {}).get('config')}; "
                                                 f"{failed} of {len(t['candidates'])} failed the check"})
    return rows
