"""Stage `handoffs`: what workbench hands to Perfetto, Nsight and a slide, on the GPU (issue 41).

    python benchmarks/gpu_evidence.py --stage handoffs [--quick] [--out DIR]

1. replay: the lecture's GeLU session (sessions/lecture06-gelu.yaml; --quick: manual, pytorch,
   triton only, fewer repetitions) with `--trace-dir OUT/handoffs-traces`, plus a `counters` run of
   its triton row and a softmax sweep, through the real CLI (`python -m workbench --replay ... -o
   OUT/handoffs-gelu.json`). Checked: every profiled row's `profile.trace_path` is a
   `<session>-run<i>-<label>.pt.trace.json` whose JSON loads, has `traceEvents`, and holds the row's
   kernels (each kernel of the row's profile table among the trace's `cat: kernel` events); the
   counters row's `measured.report_path` is a kept `.ncu-rep` that `ncu --import FILE --page
   details` reads back.
2. figures: `workbench --plot OUT/handoffs-gelu.json -o OUT/handoffs-gelu.svg` and `.png` (the
   GeLU medians, the counters run, the sweep as lines, the roofline).
3. NVTX, timing: the same kernel (F.gelu on 4096 x 4096 float32, and a 64K-element one where a
   range's host cost would show most) timed by engine/timing.measure_run with the NVTX phases and
   without them, interleaved, 8 rounds each (--quick: 5): the medians of each round and the ratio
   of their medians (with / without; 1.00 means the ranges do not move the medians).
4. NVTX, selection (Nsight Systems is not on these boxes): `ncu --nvtx --nvtx-include
   "run0-triton/" --clock-control none --target-processes all` over a tiny replay of pytorch and
   triton GeLU rows selects the triton row (its build, check and timed kernels: the Triton GeLU
   kernel among them), and `--nvtx-include "run0-triton/timed"` its timed window: only the Triton
   kernel (no pytorch row kernel, no check kernel). The logs (OUT/handoffs-ncu-nvtx-*.log) list each
   kernel with its NVTX stack (the details page's NVTX section).

Without a GPU the stage says so and returns one `skipped` row. Budget: ~120 s on an H100/H200.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

TITLE = "handoffs: traces for Perfetto, ncu reports, figures, NVTX ranges (issue 41)"
ROOT = Path(__file__).resolve().parents[2]
BUDGET_S = 120


def run(quick: bool, out: Path) -> list[dict]:
    import torch

    if not torch.cuda.is_available():
        print("handoffs stage: no CUDA GPU here: nothing to hand off (skipped)")
        return [{"part": "all", "status": "skipped", "why": "no CUDA GPU"}]
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    doc_path, replay_rows = replay(quick, out)
    rows += replay_rows
    if doc_path is not None:
        rows += figures(doc_path, out)
    rows += nvtx_timing(quick)
    rows += nvtx_selection(out)
    (out / "handoffs.json").write_text(json.dumps(rows, indent=2, default=str))
    return rows


# -- 1. replay with --trace-dir and counters -------------------------------------------------
def session(quick: bool) -> dict:
    data = yaml.safe_load((ROOT / "sessions" / "lecture06-gelu.yaml").read_text())
    run = data["runs"][0]
    run["actions"] = ["check", "bench", "profile"]
    if quick:
        run["impls"] = ["manual", "pytorch", "triton"]
        data["settings"].update(rep_ms=50, warmup_ms=10)
    data["runs"].append({"op": "gelu", "impls": ["triton"], "shape": dict(run["shape"]), "dtype": "float32",
                         "actions": ["check", "bench", "counters"]})
    data["runs"].append({"op": "softmax", "impls": ["pytorch", "triton"], "shape": {"M": 4096, "N": 1024},
                         "dtype": "float32", "sweep": {"params": ["N"], "values": [1024, 4096, 16384]}})
    return data


def replay(quick: bool, out: Path) -> tuple[Path | None, list[dict]]:
    traces = out / "handoffs-traces"
    shutil.rmtree(traces, ignore_errors=True)
    path = out / "handoffs-gelu.yaml"
    path.write_text(yaml.safe_dump(session(quick), sort_keys=False))
    doc_path = out / "handoffs-gelu.json"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "workbench", "--replay", str(path), "-o", str(doc_path),
                           "--trace-dir", str(traces)], cwd=ROOT, capture_output=True, text=True, timeout=400)
    took = time.perf_counter() - t0
    (out / "handoffs-replay.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0 or not doc_path.exists():
        return None, [{"part": "replay", "status": "failed", "s": took, "why": proc.stderr[-400:]}]
    doc = json.loads(doc_path.read_text())
    rows = [{"part": "replay", "status": "ok", "s": round(took, 1), "rows": len(doc["results"]),
             "statuses": ",".join(sorted({r["status"] for r in doc["results"]}))}]
    for record in doc["results"]:
        if record.get("profile"):
            rows.append(trace_row(record))
        if record.get("measured"):
            rows.append(report_row(record))
    return doc_path, rows


def trace_row(record: dict) -> dict:
    """The row's kept trace: loads, has traceEvents, and holds the kernels of its profile table."""
    path = record["profile"].get("trace_path")
    row: dict[str, Any] = {"part": "trace", "row": f"run{record['run_index']}-{record['label']}",
                           "file": Path(path).name if path else None}
    if not path or not Path(path).is_file():
        return {**row, "status": "failed", "why": "no trace file"}
    try:
        trace = json.loads(Path(path).read_text())
    except ValueError as exc:
        return {**row, "status": "failed", "why": f"not JSON: {exc}"}
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    kernels = {e.get("name") for e in events or () if e.get("cat") == "kernel"}
    profiled = {r["name"] for r in record["profile"]["rows"] if r["kind"] == "kernel"}
    ok = bool(events) and bool(profiled) and profiled <= kernels and path.endswith(".pt.trace.json")
    return {**row, "status": "ok" if ok else "failed", "events": len(events or ()),
            "kernel_events": sum(1 for e in events or () if e.get("cat") == "kernel"),
            "row_kernels_in_trace": f"{len(profiled & kernels)}/{len(profiled)}",
            "kernel": sorted(profiled)[0][:60] if profiled else None}


def report_row(record: dict) -> dict:
    """The kept .ncu-rep: present, and `ncu --import FILE --page details` reads it."""
    measured = record["measured"]
    path = measured.get("report_path")
    row = {"part": "ncu-rep", "row": f"run{record['run_index']}-{record['label']}",
           "file": Path(path).name if path else None, "reason": measured.get("reason"),
           "dram_bytes": measured.get("dram_bytes")}
    if not path or not Path(path).is_file():
        return {**row, "status": "failed", "why": measured.get("reason") or "no report kept"}
    from workbench.counters import find_ncu

    proc = subprocess.run([find_ncu() or "ncu", "--import", path, "--page", "details"], capture_output=True,
                          text=True, timeout=120)
    return {**row, "status": "ok" if proc.returncode == 0 and "gelu" in proc.stdout.lower() else "failed",
            "bytes": Path(path).stat().st_size, "import_rc": proc.returncode}


# -- 2. figures ------------------------------------------------------------------------------
def figures(doc_path: Path, out: Path) -> list[dict]:
    rows = []
    for suffix in (".svg", ".png"):
        fig = out / f"handoffs-gelu{suffix}"
        proc = subprocess.run([sys.executable, "-m", "workbench", "--plot", str(doc_path), "-o", str(fig)],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        ok = proc.returncode == 0 and fig.is_file() and fig.stat().st_size > 1000
        rows.append({"part": "figure", "file": fig.name, "status": "ok" if ok else "failed",
                     "bytes": fig.stat().st_size if fig.is_file() else None,
                     "why": None if ok else proc.stderr[-300:]})
    return rows


# -- 3. NVTX ranges do not move the medians --------------------------------------------------
def nvtx_timing(quick: bool) -> list[dict]:
    import contextlib

    import torch
    import torch.nn.functional as F

    from workbench.engine.measure.nvtx import nvtx_range
    from workbench.engine.measure.stats import StopRule
    from workbench.engine.measure.timing import make_l2_flush, make_timer, measure_run

    device = "cuda:0"
    timer = make_timer(device)
    flush = make_l2_flush(device, torch.cuda.get_device_properties(0).L2_cache_size)
    rule = StopRule(rep_ms=30.0, min_samples=10)
    rounds = 5 if quick else 8
    rows = []
    for label, numel in (("gelu 4096x4096 f32", 4096 * 4096), ("gelu 64K f32", 65536)):
        x = torch.randn(numel, device=device)
        medians: dict[str, list[float]] = {"with": [], "without": []}
        for _ in range(rounds):  # interleaved: a drift of the clock lands on both sides alike
            for side in ("with", "without"):
                def phase(name, side=side):
                    return nvtx_range(f"nvtx-check-{name}", True) if side == "with" else contextlib.nullcontext()
                run = measure_run(lambda: F.gelu(x), timer, rule, warmup_ms=5.0, flush=flush, phase=phase)
                medians[side].append(statistics.median(run.samples_ms))
        with_ms, without_ms = statistics.median(medians["with"]), statistics.median(medians["without"])
        rows.append({"part": "nvtx-timing", "kernel": label, "rounds": rounds, "with_ms": with_ms,
                     "without_ms": without_ms, "ratio": with_ms / without_ms,
                     "with_rounds": " ".join(f"{m:.4g}" for m in medians["with"]),
                     "without_rounds": " ".join(f"{m:.4g}" for m in medians["without"]),
                     "status": "ok" if abs(with_ms / without_ms - 1) < 0.02 else "moved"})
    return rows


# -- 4. ncu selects one row by its NVTX range ------------------------------------------------
def nvtx_selection(out: Path) -> list[dict]:
    from workbench.counters import find_ncu

    ncu = find_ncu()
    if ncu is None:
        return [{"part": "nvtx-ncu", "status": "skipped", "why": "no ncu"}]
    tiny = {"schema_version": 1, "name": "handoffs-nvtx",
            "settings": {"device": "cuda", "warmup_ms": 1, "rep_ms": 2, "min_samples": 3, "flush_l2": False},
            "runs": [{"op": "gelu", "impls": ["pytorch", "triton"], "shape": {"M": 1024, "N": 1024},
                      "dtype": "float32", "actions": ["check", "bench"]}]}
    path = out / "handoffs-nvtx.yaml"
    path.write_text(yaml.safe_dump(tiny, sort_keys=False))
    rows: list[dict] = []
    # the row's range (its build, check and timed kernels), then its timed phase nested in it (ncu's
    # documented forms "A/" and "A/B"; "A/B/" tried only where "A/B" selects nothing)
    for include, count in (("run0-triton/", 10), ("run0-triton/timed", 5), ("run0-triton/timed/", 5)):
        if include == "run0-triton/timed/" and rows and rows[-1]["kernels"]:
            continue
        rows.append(_ncu_select(ncu, include, count, path, out))
    return rows


def _ncu_select(ncu: str, include: str, count: int, path: Path, out: Path) -> dict:
    log = out / f"handoffs-ncu-nvtx-{include.strip('/').replace('/', '-')}{'-slash' if include.endswith('timed/') else ''}.log"
    argv = [ncu, "--nvtx", "--nvtx-include", include, "--clock-control", "none", "--target-processes", "all",
            "--launch-count", str(count), "--metrics", "gpu__time_duration.sum", "--log-file", str(log),
            sys.executable, "-m", "workbench", "--replay", str(path), "-o", str(out / "handoffs-nvtx.json")]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240)
    text = log.read_text(errors="replace") if log.exists() else proc.stdout
    kernels = [line.split("(")[0].strip() for line in text.splitlines()
               if line.startswith("  ") and "Context" in line and "Stream" in line]
    stacks = sorted({line.strip() for line in text.splitlines() if "run0-" in line or "timed" in line})[:8]
    triton = [k for k in kernels if "gelu" in k.lower() and "elementwise" not in k]
    timed = "timed" in include
    ok = bool(triton) and (not timed or len(triton) == len(kernels))  # the timed window: only the row's kernel
    return {"part": "nvtx-ncu", "include": include, "rc": proc.returncode, "s": round(time.perf_counter() - t0, 1),
            "kernels": len(kernels), "row_kernel": len(triton), "names": ",".join(sorted(set(kernels)))[:100],
            "stacks": " | ".join(stacks)[:200], "log": log.name, "status": "ok" if ok else "failed"}
