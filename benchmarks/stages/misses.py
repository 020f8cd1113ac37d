"""Stage `misses`: issue #19's targets still missed, each side by side in one process, then under ncu.

    python benchmarks/gpu_evidence.py --stage misses [--quick] [--out DIR] [--budget-s S]

The cases (benchmarks/stages/_misses_core.py): Triton against cuBLAS at 4096^3 in bfloat16 and
float16; the fused `matmul_gelu` at 8192^3 bfloat16 against the faster of cuBLAS then GeLU and
torch.compile, beside both plain GEMMs (what the epilogue costs); the Triton softmax at 16384^2
float32 against torch.compile, PyTorch and the CUDA kernel, with a copy of the input timed in the
same rounds (% of copy); the long-row CUDA softmax (4096 x 262144, bfloat16 and float32: >= 90% of copy, >= 1.3x
torch.compile). `--only 4096x262144` (comma-separated parts of case names) runs a subset. Each side is built through the registry (its autotuned config; tuning counted as build),
checked on the first input set with the engine's gates, then timed with the engine's loop (batched
events, read flush, StopRule 100 ms) in ROUNDS rounds, each in a random order (seeded by the case's name, logged as `orders`: a
rotating order can run in step with the H200's ~1 s power-cap cycle, benchmarks/stages/_truth_core.interleave); the figures are medians
over rounds, the target's ratio, the gap to it in % and the median per-round ratio. The kernels per
call of each side come from torch.profiler, and torch.compile's generated code is saved
(`inductor-<case>.py.txt`: its kernels, their launch configs).

Then one `ncu --clock-control none` process (benchmarks/stages/_misses_ncu.py) profiles one call of
every side with the SpeedOfLight, LaunchStats, Occupancy, ComputeWorkloadAnalysis and WarpStateStats
sections, Hopper's tensor-pipe metric, the XU (MUFU) pipe, the stall reasons and the DRAM bytes:
per kernel duration, SM and DRAM throughput, tensor and XU pipe active, registers, waves per SM,
clusters, grid and block, the largest stall reasons (cycles per issued instruction) and the bytes
read and written: what stands in the way, in the kernel's own counters.

Writes `misses.json` (and `ncu.csv`, `ncu.log`) to `out` after every case. Without a GPU:
nothing timed, says why.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import child_env
from benchmarks.stages._misses_core import (NCU_METRICS, NCU_SECTIONS, Case, cases, figures, label_kernels,
                                            parse_ncu_csv, round_orders, selected)

TITLE = "misses: #19's open targets side by side (engine loop, rounds in random order), then under ncu"
BUDGET_S = 200.0   # no case starts after this; ncu runs after the cases
ROUNDS = 5
NCU_TIMEOUT_S = 240
PROFILED = 3  # torch.profiler calls per side, for its kernels per call
COPY = "copy"  # the label of a case's copy in its rounds
ONLY: tuple[str, ...] | None = None  # gpu_evidence.py --only: cases whose name contains one of these


def _copy_or_set(name: str | None) -> bool:
    return bool(name) and name.startswith(("Memset", "Memcpy"))


def run(quick: bool, out: Path) -> list[dict]:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"cases": [], "ncu": None}
    if not torch.cuda.is_available():
        doc["environment"] = "no CUDA GPU: nothing timed"
        _write(out, doc)
        print("misses stage: no CUDA GPU here: nothing timed", file=sys.stderr)
        return [{"item": "misses", "status": "skipped", "note": "no CUDA GPU"}]
    gpu = _Gpu("cuda:0")
    doc["environment"] = gpu.environment()
    t0 = time.monotonic()
    todo = selected(ONLY)
    for case in todo:
        if time.monotonic() - t0 > BUDGET_S:
            doc["cases"].append({"case": case.name, "skipped": f"not started within {BUDGET_S:g} s"})
            continue
        try:
            doc["cases"].append(gpu.run_case(case, out, rounds=3 if quick else ROUNDS))
        except Exception as exc:  # one case failing leaves the others
            doc["cases"].append({"case": case.name, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        _write(out, doc)
        print(f"  misses {case.name}: done at {time.monotonic() - t0:.0f} s", file=sys.stderr)
    gpu.release()
    doc["ncu"] = _ncu(out, doc)
    _write(out, doc)
    return _table(doc)


class _Gpu:
    def __init__(self, device: str):
        from workbench.engine.measure.environment import device_info
        from workbench.engine.measure.timing import make_l2_flush, make_timer
        from workbench.registry import discover

        self.device, self.info = device, device_info(device)
        self.registry = discover()
        self.timer = make_timer(device)
        self.flush = make_l2_flush(device, self.info.l2_bytes, "read")

    def environment(self) -> dict:
        from workbench.engine.measure.environment import environment_record

        return environment_record(self.info)

    def release(self) -> None:
        import torch

        self.flush = None
        torch.cuda.empty_cache()

    def build(self, side, case: Case):
        from workbench.engine.plan import default_cache_dir
        from workbench.registry import BuildContext
        from workbench.check.row import check_output

        op = self.registry.op(side.op)
        impl = op.get_impl(side.impl)
        spec = op.make_spec(case.shape, case.dtype)
        ctx = BuildContext(device=self.device, fp32_precision="ieee", interpret=False,
                           build_dir=default_cache_dir() / "build")
        t = time.perf_counter()
        fn = impl.builder(spec, impl.resolve_params({}), ctx)
        inputs = op.make_inputs(spec, self.device, 0)
        out = fn(*inputs)
        self.sync()
        build_s = time.perf_counter() - t
        report = check_output(op, impl, spec, ctx, inputs, out)
        del out
        return fn, inputs, {"build_s": round(build_s, 2), "check": report.as_dict(),
                            "tuned": getattr(fn, "tuned", None)}  # workbench.tuning.attach: config, note

    def sync(self) -> None:
        import torch

        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)

    def time(self, call) -> float:
        from workbench.engine.measure.clocks import ClockSampler
        from workbench.engine.measure.stats import StopRule, summarize
        from workbench.engine.measure.timing import measure_run

        with ClockSampler(self.info) as clocks:
            run = measure_run(call, self.timer, StopRule(rep_ms=100.0), warmup_ms=25.0, flush=self.flush,
                              limited=clocks.limited)
        return summarize(run.samples_ms).median_ms

    def run_case(self, case: Case, out: Path, rounds: int) -> dict:
        import torch

        from workbench.engine.measure.profile import profile_calls

        record: dict[str, Any] = {"case": case.name, "shape": case.shape, "dtype": case.dtype, "note": case.note,
                                  "sides": {}}
        calls = {}
        for side in case.sides:
            fn, inputs, info = self.build(side, case)
            if info["check"].get("passed") is False:
                record["sides"][side.label] = {**info, "error": "check failed: not timed"}
                continue
            calls[side.label] = (lambda fn=fn, inputs=inputs: fn(*inputs))
            prof = profile_calls(calls[side.label], self.device.startswith("cuda"), sync=self.sync, calls=PROFILED)
            launched = [r for r in (prof.get("rows") or []) if r.get("kind") == "kernel"]
            info["kernels"] = [r.get("name") for r in launched][:6]
            # what ncu profiles: kernels, not the memsets and copies torch.profiler lists beside them
            info["kernels_per_call"] = (sum(r.get("calls") or 0 for r in launched if not _copy_or_set(r.get("name")))
                                        / PROFILED) if launched else None
            record["sides"][side.label] = info
            if side.impl == "compiled":
                record["sides"][side.label]["inductor_code"] = _inductor_code(fn, inputs, out, case, side)
        if case.copy:  # a copy of the input's bytes, timed in the same rounds (% of copy)
            src = self.registry.op(case.sides[0].op).make_inputs(
                self.registry.op(case.sides[0].op).make_spec(case.shape, case.dtype), self.device, 0)[0]
            dst = torch.empty_like(src)
            calls[COPY] = lambda: dst.copy_(src)
        labels = list(calls)
        found: dict[str, list[float]] = {label: [] for label in labels}
        record["orders"] = round_orders(case.name, labels, rounds)
        for order in record["orders"]:
            for label in order:
                found[label].append(self.time(calls[label]))
        record["rounds_ms"] = found
        copy_rounds = found.pop(COPY, None)
        copy_ms = statistics.median(copy_rounds) if copy_rounds else None
        if copy_ms is not None:
            record["copy_ms"] = copy_ms
        record.update(figures(case, found, copy_ms))
        del calls
        torch.cuda.empty_cache()
        return record


def _inductor_code(fn, inputs, out: Path, case: Case, side) -> str | None:
    """torch.compile's generated source for this case (compiled afresh), saved beside misses.json;
    returns the file name, or None where it could not be had."""
    try:
        import torch
        from torch._inductor.utils import run_and_get_code

        torch._dynamo.reset()
        _, codes = run_and_get_code(fn, *inputs)
    except Exception as exc:  # an API that moved: say so, the timing stands
        return f"not saved: {type(exc).__name__}: {str(exc)[:200]}"
    name = "inductor-" + "".join(c if c.isalnum() else "-" for c in case.name) + ".py.txt"
    (out / name).write_text("\n\n# ----\n\n".join(codes))
    return name


def _ncu(out: Path, doc: dict) -> dict:
    """Every timed side once under ncu; per kernel its counters, labelled with its side."""
    from workbench.counters import find_ncu

    ncu = find_ncu()
    if ncu is None:
        return {"error": "ncu not found"}
    sides, counts = [], []
    for record in doc["cases"]:
        for label, info in (record.get("sides") or {}).items():
            if "error" in info or not info.get("kernels_per_call"):
                continue
            side = next(s for c in cases() if c.name == record["case"] for s in c.sides if s.label == label)
            sides.append({"label": f"{record['case']} | {label}", "op": side.op, "impl": side.impl,
                          "shape": record["shape"], "dtype": record["dtype"]})
            counts.append((f"{record['case']} | {label}", int(round(info["kernels_per_call"]))))
    job = out / "ncu-job.json"
    job.write_text(json.dumps({"device": "cuda:0", "sides": sides}))
    cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
           "--csv", "--page", "details", "--log-file", str(out / "ncu.csv"),
           *[a for s in NCU_SECTIONS for a in ("--section", s)], "--metrics", ",".join(NCU_METRICS),
           sys.executable, "-m", "benchmarks.stages._misses_ncu", str(job)]
    t = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=NCU_TIMEOUT_S,
                              cwd=Path(__file__).resolve().parents[2], env=child_env())
    except subprocess.TimeoutExpired:
        return {"error": f"ncu timed out after {NCU_TIMEOUT_S} s", "command": " ".join(cmd)}
    (out / "ncu.log").write_text(proc.stdout[-20000:] + "\n--- stderr\n" + proc.stderr[-20000:])
    text = (out / "ncu.csv").read_text() if (out / "ncu.csv").is_file() else ""
    kernels = label_kernels(parse_ncu_csv(text), counts)
    slim = [{k: v for k, v in kern.items() if k != "metrics"} for kern in kernels]
    return {"rc": proc.returncode, "seconds": round(time.monotonic() - t, 1), "kernels": slim,
            "expected_kernels": sum(c for _, c in counts), "command": " ".join(cmd)}


def _write(out: Path, doc: dict) -> None:
    from workbench.fileio import atomic_write_text

    atomic_write_text(out / "misses.json", json.dumps(doc, indent=2, default=str))


def _ncu_extras(kern: dict) -> str:
    """The long-row figures of a kernel's ncu record, where ncu gave them."""
    parts = [f"{label} {kern[key]:.3g}" for key, label in (
        ("xu_pipe_pct", "xu%"), ("issue_busy_pct", "issue%"), ("achieved_occupancy_pct", "occ%"),
        ("warp_cycles_per_issue", "cyc/issue"), ("cluster_size", "cluster"), ("max_active_clusters", "max clusters"),
        ("dram_read_bytes", "read B"), ("dram_write_bytes", "written B")) if kern.get(key) is not None]
    if kern.get("stalls"):
        parts.append("stalls " + ", ".join(f"{k} {v:.2g}" for k, v in list(kern["stalls"].items())[:4]))
    return ("; " + "; ".join(parts)) if parts else ""


def _table(doc: dict) -> list[dict]:
    rows = []
    for record in doc["cases"]:
        if "medians_ms" not in record:
            rows.append({"item": record["case"], "note": record.get("error") or record.get("skipped")})
            continue
        meds = ", ".join(f"{k} {v:.4f}" for k, v in record["medians_ms"].items())
        if "ratio" in record:
            rows.append({"item": record["case"], "ratio": round(record["ratio"], 3), "target": record["target"],
                         "met": record["met"], "gap_pct": round(record["gap_pct"], 2),
                         "note": f"vs {record['against']}; paired {record['paired_ratio']:.3f}; {meds}"})
            if "copy_target_pct" in record:
                rows.append({"item": f"{record['case']} (% of copy)", "ratio": round(record["copy_pct"], 2),
                             "target": record["copy_target_pct"], "met": record["copy_met"],
                             "gap_pct": round(record["copy_gap_points"], 2),
                             "note": f"copy {record['copy_ms']:.4f} ms; gap in points of copy"})
            for label, also in (record.get("also") or {}).items():
                rows.append({"item": f"{record['case']} ({label})", "ratio": round(also["ratio"], 3),
                             "target": record["target"], "met": also["met"], "gap_pct": round(also["gap_pct"], 2),
                             "note": f"vs {record['against']}; paired {also['paired_ratio']:.3f}"})
        else:
            rows.append({"item": record["case"], "note": meds})
    for kern in (doc.get("ncu") or {}).get("kernels") or []:
        rows.append({"item": f"ncu {kern.get('side')}", "ratio": None, "target": None, "met": None, "gap_pct": None,
                     "note": (f"{kern.get('name', '')[:48]} {kern.get('duration_us')} us sm {kern.get('sm_throughput_pct')}% "
                              f"dram {kern.get('dram_throughput_pct')}% tensor {kern.get('tensor_pipe_pct')}% "
                              f"regs {kern.get('registers')} waves {kern.get('waves_per_sm')} "
                              f"grid {kern.get('grid')} block {kern.get('block')} "
                              f"clk {kern.get('sm_clock_hz')}" + _ncu_extras(kern))})
    if (doc.get("ncu") or {}).get("error"):
        rows.append({"item": "ncu", "note": doc["ncu"]["error"]})
    return rows
