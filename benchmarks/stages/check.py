"""Stage `check`: the check of rule 6 on the GPU (issues 11 and 14).

    python benchmarks/gpu_evidence.py --stage check [--quick] [--out DIR]

1. cases: every shipped implementation in every dtype it declares, at the ops' test specs (full:
   also larger ones, K up to 16384), through the engine's check sequence: each must pass; with
   the fraction of the default tolerance it used (the constants' margins on this device) and,
   for float32 matmul in TF32, how far over the IEEE tolerance it is (P9). Every known-wrong
   implementation (tests/wrong_impls.py, every kind, op and dtype) must fail, naming its gate.
2. memory: the engine's size estimate against torch.cuda.max_memory_allocated over the row's
   whole sequence, for several rows (target: within 1.5x).
3. big (full only, and the int32 row in --quick): float16 add and gelu at M = 1, N = 2^31 + 2^20
   (pytorch, triton, cuda), and `triton_int32` (tests/plugins/int32_offsets.py), whose wrapped
   offsets must fail the check at a first bad index >= 2^31.
Tasks run in worker processes (benchmarks/stages/_check_worker.py): one that crashes or faults
loses its task only (named in its line) and a fresh worker takes the rest. Every finished task is
a line of OUT/check_tasks.jsonl as it finishes; OUT/check_results.json gathers them at the end.
Without a GPU the same code runs tiny on the CPU (Triton interpreted), to try it anywhere.
Time: --quick ~1.5-2 min on the H200 (CUDA builds included), full ~4-5 min; BUDGET_S cuts the rest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import child_env

TITLE = "check: shipped implementations pass, known-wrong ones fail, estimate vs peak memory, 2^31 rows"
BUDGET_S = 280.0
QUICK_BUDGET_S = 110.0
WORKERS = 7  # worker processes at once (CPU-bound builds; 16 cores on the H200 host)
ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "tests" / "plugins"
BIG_N = 2 ** 31 + 2 ** 20
MEMORY_ROWS = [("add", "pytorch", {"M": 16384, "N": 16384}, "float16"),
               ("gelu", "triton", {"M": 16384, "N": 16384}, "bfloat16"),
               ("gelu", "manual", {"M": 8192, "N": 8192}, "float32"),
               ("softmax", "pytorch", {"M": 16384, "N": 4096}, "float32"),
               ("matmul", "pytorch", {"M": 8192, "N": 8192, "K": 8192}, "bfloat16"),
               ("matmul_gelu", "manual", {"M": 4096, "N": 4096, "K": 4096}, "bfloat16"),
               ("cdist", "triton", {"M": 4096, "N": 4096, "D": 128}, "float32"),
               ("mlp", "pytorch", {"batch": 1024, "dim": 2048, "layers": 4, "steps": 2}, "float32")]
QUICK_MEMORY = {("add", "pytorch"), ("gelu", "manual"), ("matmul", "pytorch"), ("mlp", "pytorch")}
BIG_ROWS = [("add", "pytorch"), ("add", "triton"), ("add", "cuda"), ("gelu", "pytorch"), ("gelu", "triton"),
            ("gelu", "cuda")]
TF32_CASES = [("pytorch", {}), ("triton", {"BLOCK_K": 32})]
# Full mode on the GPU, beyond the test specs and calibrate_check's EXTRA_SPECS: K = 16384 at a
# size where the accumulation error shows over ~4M outputs.
GPU_SPECS = {"matmul": [{"M": 2048, "N": 2048, "K": 16384}], "matmul_gelu": [{"M": 2048, "N": 2048, "K": 16384}]}
ONLY: tuple[str, ...] | None = None  # op names to run (gpu_evidence.py --only)
_LINES_LOCK = __import__("threading").Lock()


def _task(kind: str, op: str, impl: str, shape: dict, dtype: str, **extra) -> dict:
    dims = "x".join(str(v) for v in shape.values())
    tag = "-".join(f"{k}={v}" for k, v in sorted(extra.items()) if k != "params") if extra else ""
    return {"id": "-".join(p for p in (kind, op, impl, dims, dtype, tag) if p), "kind": kind, "op": op,
            "impl": impl, "shape": shape, "dtype": dtype, **extra}


def case_groups(registry, gpu: bool, quick: bool) -> list[list[dict]]:
    """One group (one worker) per op: its CUDA module builds once; the known-wrong ones last."""
    sys.path.insert(0, str(ROOT / "tests"))
    from benchmarks.calibrate_check import EXTRA_SPECS
    from wrong_impls import PREFIX, applicable, shipped_ops
    from workbench.machine import probe, unavailable_reason

    machine, groups, wrong = probe(), [], []
    for op in shipped_ops(registry):
        if ONLY and op.name not in ONLY:
            continue
        tasks = []
        specs = list(op.test_specs) + ([] if quick or not gpu else EXTRA_SPECS.get(op.name, []) + GPU_SPECS.get(op.name, []))
        for impl in op.impls.values():
            if not impl.builder.__module__.startswith("workbench.kernels."):
                continue
            for dtype in op.dtypes:
                if unavailable_reason(impl, "check", machine, dtype) is not None:
                    continue
                chosen = specs[:1] if quick or impl.kind == "compiled" or not gpu else specs
                tasks += [_task("case", op.name, impl.name, dict(s), dtype.value) for s in chosen]
        if op.name == "matmul" and gpu:
            shape = {"M": 100, "N": 130, "K": 300}
            tasks += [_task("case", "matmul", name, shape, "float32", fp32_precision="tf32", params=params)
                      for name, params in TF32_CASES]
        groups.append(tasks)
        spec = min(op.test_specs, key=lambda s: (min(s.values()) <= 1, _product(s.values())))
        wrong += [_task("case", op.name, PREFIX + kind, dict(spec), d.value) for kind in applicable(op)
                  for d in op.dtypes]
    return [g for g in groups if g] + [wrong]


def _product(values) -> int:
    result = 1
    for v in values:
        result *= v
    return result


def memory_tasks(gpu: bool, quick: bool = False) -> list[dict]:
    rows = MEMORY_ROWS if gpu else [(op, impl, {k: max(1, v // 64) for k, v in shape.items()}, dtype)
                                    for op, impl, shape, dtype in MEMORY_ROWS[:3]]
    if gpu and quick:
        rows = [r for r in rows if (r[0], r[1]) in QUICK_MEMORY]
    return [_task("memory", op, impl, shape, dtype) for op, impl, shape, dtype in rows]


def big_tasks(quick: bool) -> list[dict]:
    shape = {"M": 1, "N": BIG_N}
    rows = [] if quick else [_task("big", op, impl, shape, "float16") for op, impl in BIG_ROWS]
    return rows + [_task("big", "add", "triton_int32", shape, "float16")]


def run_group(tasks: list[dict], out: Path, device: str, plugins: list[str], deadline: float) -> None:
    """Run `tasks` in worker processes until done or past `deadline`; a worker that dies loses its
    current task only (written with the exit code), the next worker starts after it."""
    lines = out / "check_tasks.jsonl"
    env = child_env({k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    if not device.startswith("cuda"):
        env["TRITON_INTERPRET"] = "1"
    pending = list(tasks)
    while pending:
        if time.monotonic() > deadline:
            _append(lines, [{**t, "error": "not run: the stage's time budget ran out"} for t in pending])
            return
        with tempfile.TemporaryDirectory() as tmp:
            request, part = Path(tmp) / "tasks.json", Path(tmp) / "part.jsonl"
            request.write_text(json.dumps({"device": device, "plugins": plugins, "tasks": pending}))
            err = open(Path(tmp) / "stderr.txt", "w+")
            proc = subprocess.Popen([sys.executable, "-m", "benchmarks.stages._check_worker", str(request), str(part)],
                                    cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
            timed_out = False
            try:
                code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                code, timed_out = proc.wait(), True
            done = [json.loads(line) for line in part.read_text().splitlines()] if part.exists() else []
            _append(lines, done)
            pending = pending[len(done):]
            if code != 0 and pending and not (done and done[-1].get("error")):
                err.seek(0)
                tail = err.read().strip().splitlines()[-3:]
                why = ("killed: the stage's time budget ran out during this task" if timed_out
                       else f"worker died (exit {code}) in this task: {tail}")
                _append(lines, [{**pending[0], "error": why}])
                pending = pending[1:]
            err.close()


def _append(path: Path, rows: list[dict]) -> None:
    with _LINES_LOCK, open(path, "a") as f:  # groups run in threads: one writer at a time
        for row in rows:
            f.write(json.dumps(row, default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())


def run(quick: bool, out: Path) -> list[dict]:
    from concurrent.futures import ThreadPoolExecutor

    import torch

    from workbench.registry import discover

    gpu = torch.cuda.is_available()
    device = "cuda:0" if gpu else "cpu"
    out.mkdir(parents=True, exist_ok=True)
    (out / "check_tasks.jsonl").write_text("")
    plugins = [str(PLUGINS / "known_wrong.py"), str(PLUGINS / "int32_offsets.py")]
    start = time.monotonic()
    deadline = start + (QUICK_BUDGET_S if quick else BUDGET_S)
    # The memory and big rows first, in a worker of their own (max_memory_allocated is per
    # process, so other workers do not disturb their peaks), then one worker per op.
    groups = [memory_tasks(gpu, quick) + (big_tasks(quick) if gpu else [])] + case_groups(discover(), gpu, quick)
    with ThreadPoolExecutor(max_workers=WORKERS if gpu else 1) as pool:
        for future in [pool.submit(run_group, g, out, device, plugins, deadline) for g in groups]:
            future.result()
    rows = [json.loads(line) for line in (out / "check_tasks.jsonl").read_text().splitlines()]
    summary = summarise(rows)
    (out / "check_results.json").write_text(json.dumps({"device": device, "quick": quick,
                                                        "seconds": time.monotonic() - start,
                                                        "summary": summary, "rows": rows}, indent=1, default=str))
    return table(rows)


def _wrong(row: dict) -> bool:
    return "_wrong_" in row["impl"] or row["impl"] == "triton_int32"


def summarise(rows: list[dict]) -> dict:
    """Counts that say whether the stage's claims hold (every shipped pass, every wrong fail)."""
    cases = [r for r in rows if r["kind"] == "case"]
    shipped = [r for r in cases if not _wrong(r)]
    wrong = [r for r in cases if _wrong(r)]
    return {"shipped": len(shipped), "shipped_passed": sum(bool(r.get("check", {}).get("passed")) for r in shipped),
            "shipped_failed": [r["id"] for r in shipped if not r.get("check", {}).get("passed")],
            "wrong": len(wrong), "wrong_failed_with_gate": sum(_failed_with_gate(r) for r in wrong),
            "wrong_passed": [r["id"] for r in wrong if not _failed_with_gate(r)],
            "worst_raw_fraction": max((max(s["raw_elementwise"], s["raw_norm"]) for r in shipped
                                       for s in (r.get("sets") or {}).values()
                                       if r["impl"].split("_")[0] != "manual" and r.get("sets")), default=None)}


def _failed_with_gate(row: dict) -> bool:
    check = row.get("check") or {}
    return check.get("passed") is False and bool(check.get("gate"))


def table(rows: list[dict]) -> list[dict]:
    """A compact table: per op the case counts, then one row per memory / big task."""
    out = []
    for op in dict.fromkeys(r["op"] for r in rows if r["kind"] == "case"):
        mine = [r for r in rows if r["kind"] == "case" and r["op"] == op]
        shipped = [r for r in mine if not _wrong(r)]
        wrong = [r for r in mine if _wrong(r)]
        fractions = [max(s["raw_elementwise"], s["raw_norm"]) for r in shipped for s in (r.get("sets") or {}).values()]
        out.append({"part": "cases", "op": op, "shipped_pass": f"{sum(bool((r.get('check') or {}).get('passed')) for r in shipped)}/{len(shipped)}",
                    "wrong_fail": f"{sum(_failed_with_gate(r) for r in wrong)}/{len(wrong)}",
                    "max_fraction": max(fractions, default=None)})
    for r in rows:
        if r["kind"] in ("memory", "big"):
            check = r.get("check") or {}
            out.append({"part": r["kind"], "op": r["op"], "impl": r["impl"], "dtype": r["dtype"],
                        "passed": check.get("passed"), "gate": check.get("gate"),
                        "first_bad": check.get("first_bad_index"),
                        "est_GiB": (r.get("estimate") or {}).get("memory_bytes", 0) / 2**30 if r.get("estimate") else None,
                        "peak_GiB": r["peak_bytes"] / 2**30 if r.get("peak_bytes") else None,
                        "est/peak": r.get("estimate_over_peak"), "error": (r.get("error") or "")[:80] or None})
    return out
