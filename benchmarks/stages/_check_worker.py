"""Worker of the `check` stage: runs check tasks in this process, one JSON line per finished task.

    python -m benchmarks.stages._check_worker TASKS.json OUT.jsonl

TASKS: {"device", "plugins": [paths], "tasks": [task]}; a task is {"id", "kind", "op", "impl",
"shape", "dtype", "fp32_precision", "params"} with kind
- "case": the engine's check sequence (workbench.check.row.RowCheck: first call, special set, two
  more calls, timed set) plus, per set, the fraction of the default tolerance the output used and
  the least declared factor that passes (benchmarks/calibrate_check.py); TF32 rows also say how
  far over the IEEE float32 tolerance they are (P9: they must be);
- "memory": the same sequence with the bench stage's L2 flush buffer and five flushed calls,
  measuring torch.cuda.max_memory_allocated against the engine's size estimate
  (engine/estimate.py, as admit computes it);
- "big": a "memory" task whose check record is the point (2^31-element rows).
Each line is written and fsynced as the task finishes, so a crash loses only the task it was in
(the stage restarts a worker after it and names the crash in that task's line).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path

import torch

from benchmarks.calibrate_check import least_factor
from workbench.check.compare import needed_factor
from workbench.engine.estimate import check_bytes_of, estimate_row, l2_flush_bytes
from workbench.registry import BuildContext, discover
from workbench.check.row import RowCheck, reference_output, tolerance_for

SEED = 0
BENCH_CALLS = 5


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _fractions(op, impl, spec, ctx, inputs, out) -> dict:
    """How much of the default tolerance `out` used (1 = just passes), and the least factor."""
    ref = reference_output(op, impl, inputs)
    raw = tolerance_for(op, replace(impl, tolerance_scale=1.0), spec, ctx)
    elementwise, norm = needed_factor(out, ref, raw)
    fields = {"raw_elementwise": elementwise, "raw_norm": norm,
              "least_factor": least_factor(op, impl, spec, ctx, out, ref)}
    if ctx.fp32_precision == "tf32" and op.matmul_like and str(spec.dtype) == "float32":
        ieee = tolerance_for(op, replace(impl, tolerance_scale=1.0), spec, replace(ctx, fp32_precision="ieee"))
        fields["ieee_tolerance_fraction"] = max(needed_factor(out, ref, ieee))  # P9: must be > 1
    return fields


def _resolved(registry, task: dict, device: str):
    op = registry.op(task["op"])
    impl = op.get_impl(task["impl"])
    spec = op.make_spec(task["shape"], task["dtype"])
    ctx = BuildContext(device=device, fp32_precision=task.get("fp32_precision", "ieee"),
                       interpret=not device.startswith("cuda"))
    return op, impl, spec, ctx, impl.resolve_params(task.get("params") or {})


def run_case(registry, task: dict, device: str) -> dict:
    op, impl, spec, ctx, params = _resolved(registry, task, device)
    fn = impl.builder(spec, params, ctx)
    inputs = op.make_inputs(spec, device, SEED)
    sets: dict[str, dict] = {}

    def observe(name, out):
        if torch.is_tensor(out) and out.dtype == op.out_dtype(spec).torch:
            sets[name] = _fractions(op, impl, spec, ctx, inputs, out)
    check = RowCheck(op, impl, spec, ctx, inputs, SEED, sync=lambda: _sync(device), observe=observe)
    report = check.run_all(fn, _synced(fn(*inputs), device))
    return {"check": report.as_dict(), "detail": report.detail, "sets": sets}


def _synced(out, device: str):
    _sync(device)
    return out


def run_memory(registry, task: dict, device: str) -> dict:
    """Peak device memory of the row's whole sequence (flush buffer, inputs, build, check, flushed
    calls, timed check) against the estimate, as admit computes it."""
    op, impl, spec, ctx, params = _resolved(registry, task, device)
    cuda = device.startswith("cuda")
    l2 = torch.cuda.get_device_properties(device).L2_cache_size if cuda else None
    est = estimate_row(impl.cost(op, spec), "cuda" if cuda else "cpu", ("check", "bench"),
                       itemsize=spec.dtype.itemsize, warmup_ms=10, rep_ms=20, min_samples=5,
                       footprint_bytes=op.footprint_bytes(spec), check_bytes=check_bytes_of(op, impl, spec),
                       flush_bytes=l2_flush_bytes(l2) if cuda else 0)
    start = time.perf_counter()
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device) if cuda else 0
    flush = torch.empty(est.flush_bytes // 4, dtype=torch.int32, device=device) if est.flush_bytes else None
    inputs = op.make_inputs(spec, device, SEED)
    check = RowCheck(op, impl, spec, ctx, inputs, SEED, sync=lambda: _sync(device))
    fn = impl.builder(spec, params, ctx)
    report = check.run_all(fn, _synced(fn(*inputs), device), timed_calls=BENCH_CALLS,
                           before_call=flush.zero_ if flush is not None else (lambda: None))
    peak = torch.cuda.max_memory_allocated(device) - base if cuda else None
    return {"check": report.as_dict(), "detail": report.detail, "estimate": est.as_dict(),
            "peak_bytes": peak, "estimate_over_peak": (est.memory_bytes / peak) if peak else None,
            "wall_s": time.perf_counter() - start}


RUNNERS = {"case": run_case, "memory": run_memory, "big": run_memory}


def main(tasks_path: str, out_path: str) -> int:
    request = json.loads(Path(tasks_path).read_text())
    device = request["device"]
    registry = discover(request.get("plugins", []))
    with open(out_path, "a") as out:
        for task in request["tasks"]:
            start = time.perf_counter()
            try:
                result = RUNNERS[task["kind"]](registry, task, device)
            except Exception as exc:  # reported in the task's line; the next task still runs
                first = (str(exc).strip().splitlines() or [""])[0][:300]
                result = {"error": f"{type(exc).__name__}: {first}", "traceback": traceback.format_exc()[-2000:]}
            out.write(json.dumps({**task, **result, "seconds": time.perf_counter() - start}, default=str) + "\n")
            out.flush()
            os.fsync(out.fileno())
            if device.startswith("cuda") and "CUDA" in result.get("error", ""):
                return 3  # a CUDA error poisons the context: the stage starts a fresh worker
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
