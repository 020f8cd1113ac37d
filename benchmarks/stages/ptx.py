"""Stage `ptx`: inside the kernels, on the GPU. For every Triton and CUDA implementation of every
registered op at a mid-size spec: the static PTX summary, SASS presence (cuobjdump), and for
Triton whether the kernel a real launch compiled equals the ahead-of-time one (same compile hash,
and the PTX text compared unnormalised after an independent recompile, else the first differing
line). Then the Triton kernels Inductor generated for the `compiled` gelu and softmax.

On a machine without a GPU the ahead-of-time and nvcc parts still run; launches and Inductor are
skipped with a printed reason. Full records go to OUT/ptx/records.json, texts to OUT/ptx/texts/.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from workbench.kernel_source import TritonSource

TITLE = "PTX: AOT vs launched, nvcc, SASS, Inductor"
MID_CAP = 4096         # each shape field capped here (quick: QUICK_CAP)
QUICK_CAP = 1024
INDUCTOR_OPS = ("gelu", "softmax")


def _mid_spec(op: Any, impl: Any, quick: bool) -> Any:
    from workbench.dtypes import DType
    cap = QUICK_CAP if quick else MID_CAP
    default = op.make_spec()
    shape = {k: min(v, cap) for k, v in default.shape.items()}
    dtypes = [d for d in op.dtypes if impl.supports(d)]
    want = DType.bfloat16 if op.matmul_like else DType.float32
    return op.make_spec(shape, want if want in dtypes else dtypes[0])


def _first_difference(a: str, b: str) -> str | None:
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines()), start=1):
        if x != y:
            return f"line {i}: {x.strip()[:60]!r} vs {y.strip()[:60]!r}"
    return f"lengths {len(a.splitlines())} vs {len(b.splitlines())} lines"


def _compare_launched(op: Any, impl: Any, spec: Any) -> tuple[str, str]:
    """Launch once on the GPU, then compile the same TritonLaunch ahead of time against the
    stand-in driver (the path used without a GPU), forced fresh, and compare. (verdict, detail)."""
    import torch
    from triton import knobs

    from workbench.ptx import triton_aot as aot
    from workbench.registry import BuildContext

    params, ctx = impl.resolve_params({}), BuildContext(device="cuda")
    fn = impl.builder(spec, params, ctx)
    fn(*op.make_inputs(spec, "cuda", 0))
    torch.cuda.synchronize()
    build = aot.build_source(impl.backend.kernel_source(impl, spec, params, ctx), aot.resolve_target(None, True))
    launched, found = aot.compile_launch(build)
    if not found:
        return "no launch", "the launch's kernel is not in the JIT cache after the launch"
    previous = knobs.compilation.always_compile
    knobs.compilation.always_compile = True  # an independent compile, not the launch's cache entry
    try:
        fresh, _ = aot.compile_launch(build, stand_in=True)
    finally:
        knobs.compilation.always_compile = previous
    diff = _first_difference(launched.asm["ptx"], fresh.asm["ptx"])
    if launched.hash != fresh.hash:
        return "hash differs", f"launched {launched.hash[:12]} vs AOT {fresh.hash[:12]}; {diff or 'same PTX text'}"
    return ("yes" if diff is None else "ptx differs"), diff or "same compile hash and PTX as the launch"


def _row(op: Any, impl: Any, record: dict, kernel: dict | None, aot_eq: str, launch: dict | None) -> dict:
    c = (kernel or {}).get("counts", {})
    return {
        "op": op.name, "impl": impl.name, "source": record.get("source"),
        "kernel": (kernel or {}).get("name", "-")[:32],
        "ld_v4": c.get("ld_global_v4"), "st_v4": c.get("st_global_v4"), "shfl": c.get("shfl_sync"),
        "wgmma/mma": f"{c.get('wgmma', 0)}/{c.get('mma', 0)}" if c else None,
        "regs": (kernel or {}).get("registers"), "spills": (kernel or {}).get("spills"),
        "smem": (kernel or {}).get("shared_bytes"), "sass_lines": (kernel or {}).get("sass_lines"),
        "waves": (launch or {}).get("waves"), "aot==launched": aot_eq,
    }


def _save_texts(folder: Path, op: str, impl: str, texts: dict) -> None:
    for kernel, parts in texts.items():
        for kind, text in parts.items():
            if text:
                safe = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in kernel)[:60]
                (folder / f"{op}.{impl}.{safe}.{kind}").write_text(text)


def run(quick: bool, out: Path) -> list[dict]:
    import torch

    from workbench.ptx.extract import launch_record, ptx_record
    from workbench.registry import BuildContext, discover

    gpu = torch.cuda.is_available()
    if not gpu:
        print("ptx stage: no GPU here: launches, aot==launched and Inductor kernels are skipped")
    folder = out / "ptx"
    (folder / "texts").mkdir(parents=True, exist_ok=True)
    registry = discover()
    rows, records = [], []
    for op in registry.ops.values():
        for impl in op.impls.values():
            if impl.source is None:
                continue
            t0 = time.perf_counter()
            spec = _mid_spec(op, impl, quick)
            aot_eq, detail = "-", ""
            try:
                if isinstance(impl.source, TritonSource) and gpu:
                    aot_eq, detail = _compare_launched(op, impl, spec)
                ctx = BuildContext(device="cuda" if gpu else "cpu")
                record, texts = ptx_record(op, impl, spec, ctx=ctx)
                launch = launch_record(op, impl, spec, ptx=record, ctx=ctx)
            except Exception as exc:  # one broken implementation must not hide the others
                rows.append({"op": op.name, "impl": impl.name, "source": "FAILED",
                             "kernel": f"{type(exc).__name__}: {exc}"[:80]})
                continue
            _save_texts(folder / "texts", op.name, impl.name, texts)
            records.append({"op": op.name, "impl": impl.name, "spec": spec.label, "ptx": record,
                            "launch": launch, "aot_vs_launched": [aot_eq, detail],
                            "seconds": round(time.perf_counter() - t0, 2)})
            for kernel in record["kernels"] or [None]:
                rows.append(_row(op, impl, record, kernel, aot_eq, launch))
    rows += _inductor_rows(registry, quick, gpu, folder, records)
    (folder / "records.json").write_text(json.dumps(records, indent=1, default=str))
    return rows


def _inductor_rows(registry: Any, quick: bool, gpu: bool, folder: Path, records: list) -> list[dict]:
    from workbench.ptx.extract import ptx_record

    rows = []
    for name in INDUCTOR_OPS:
        if name not in registry or "compiled" not in registry.op(name).impls:
            continue
        op = registry.op(name)
        impl = op.get_impl("compiled")
        spec = _mid_spec(op, impl, quick)
        t0 = time.perf_counter()
        record, texts = ptx_record(op, impl, spec)
        _save_texts(folder / "texts", op.name, impl.name, texts)
        records.append({"op": op.name, "impl": impl.name, "spec": spec.label, "ptx": record,
                        "seconds": round(time.perf_counter() - t0, 2)})
        if not gpu:
            print(f"ptx stage: {name}/compiled: {record['notes'][0]}")
        for kernel in record["kernels"] or [None]:
            row = _row(op, impl, record, kernel, "-", None)
            if kernel is None:
                row["kernel"] = (record["notes"] or ["-"])[0][:40]
            rows.append(row)
    return rows
