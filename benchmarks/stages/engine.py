"""GPU evidence for the measurement engine (workbench/engine/).

On the GPU: measured copy and matmul ceilings beside the datasheet, the launch floor, GeLU
(16384x16384 float32, --quick 4096x4096) through `run_plan` for every implementation (median,
p20-p80, GB/s, % of ceiling, kernels per call from the profiler), our median against
triton.testing.do_bench's for the same callables, and a deliberately out-of-bounds CUDA kernel
(tests/plugins/oob_cuda.py) with the next implementation still running in a fresh child.
On a CPU machine it runs the same session small (Triton interpreted), skipping the GPU-only
parts with a printed reason, so the code path can be smoke-tested anywhere.
Writes engine_results.json (the run_plan document), engine_gpu.json and engine_log.txt to `out`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from workbench.engine.plan import RunOptions, default_cache_dir, run_plan
from workbench.events import Error, Log, Result
from workbench.session.model import ImplRef, RunSpec, Session, Settings

TITLE = "engine: ceilings, launch floor, GeLU every implementation, do_bench cross-check, isolation"
PLUGIN = Path(__file__).resolve().parents[2] / "tests" / "plugins" / "oob_cuda.py"
DO_BENCH_IMPLS = ("manual", "pytorch", "triton", "cuda")
MATMUL_KEYS = ("bfloat16", "float16", "tf32", "float32")


def run(quick: bool, out: Path) -> list[dict]:
    import torch

    on_gpu = torch.cuda.is_available()
    size = (4096 if quick else 16384) if on_gpu else 256
    out.mkdir(parents=True, exist_ok=True)
    doc = _run_session(size, out)
    (out / "engine_results.json").write_text(json.dumps(doc, indent=2, default=str))
    rows = _gelu_rows(doc) + _isolation_rows(doc) + _manual_profile_rows(doc)
    if not on_gpu:
        print("engine stage: no CUDA GPU here: ceilings, launch floor and do_bench cross-check skipped",
              file=sys.stderr)
        return rows
    gpu = {"ceilings": _ceilings(out / "cache"), "do_bench": _do_bench(size)}
    (out / "engine_gpu.json").write_text(json.dumps(gpu, indent=2, default=str))
    return _ceiling_rows(gpu["ceilings"]) + rows + _do_bench_rows(gpu["do_bench"])


# -- run_plan: GeLU every implementation, then the out-of-bounds kernel ----------------------------
def _run_session(size: int, out: Path) -> dict:
    session = Session(name="evidence-engine", settings=Settings(device="auto", timeout_s=300.0), runs=(
        RunSpec(op="gelu", impls=None, shape={"M": size, "N": size}, dtype="float32",
                actions=("check", "bench", "profile")),
        RunSpec(op="oob", impls=(ImplRef("cuda"), ImplRef("pytorch")), shape={"N": 1 << 20},
                actions=("check", "bench"))))
    log = (out / "engine_log.txt").open("w")

    def on_event(event) -> None:
        if isinstance(event, Log):
            log.write(f"{event.row} {event.level}: {event.text}\n")
        elif isinstance(event, Error):
            print(f"  {event.row}: error: {event.message}", file=sys.stderr)
        elif isinstance(event, Result):
            timing = event.record["timing"] or {}
            print(f"  {event.row}: {event.record['status']} median_ms={timing.get('median_ms')}", file=sys.stderr)
    options = RunOptions(kernels=(str(PLUGIN),), cache_dir=out / "cache", build_dir=default_cache_dir() / "build",
                         argv=("benchmarks/gpu_evidence.py", "--stage", "engine"))
    try:
        return run_plan(session, on_event=on_event, options=options)
    finally:
        log.close()


def _gelu_rows(doc: dict) -> list[dict]:
    rows = []
    for rec in (r for r in doc["results"] if r["op"] == "gelu"):
        timing, traffic, profile = rec["timing"] or {}, rec["traffic"] or {}, rec["profile"] or {}
        pct = traffic.get("pct_of_ceiling")
        notes = [rec["error"]] if rec["error"] else []
        notes += [f"{pct:.1f}% of {traffic['ceiling']}"] if pct is not None else []
        notes += ["launch-bound"] if timing.get("launch_bound") else []
        notes += [f"build {rec['build_ms']:.0f} ms"] if rec["build_ms"] is not None else []
        rows.append({"item": f"gelu {rec['impl']} {rec['shape']['M']}x{rec['shape']['N']} {rec['dtype']}",
                     "status": rec["status"], "median_ms": timing.get("median_ms"),
                     "p20_ms": timing.get("p20_ms"), "p80_ms": timing.get("p80_ms"),
                     "value": traffic.get("gbps"), "unit": "GB/s" if traffic.get("gbps") else None,
                     "kernels_per_call": profile.get("kernel_count"), "note": "; ".join(notes) or None})
    return rows


def _manual_profile_rows(doc: dict) -> list[dict]:
    """The profiler's kernel table of `manual` GeLU: one row per kernel, device time per call."""
    rec = next((r for r in doc["results"] if r["op"] == "gelu" and r["impl"] == "manual"), None)
    profile = (rec or {}).get("profile") or {}
    from workbench.engine.measure.profile import PROFILED_CALLS

    calls = PROFILED_CALLS
    rows = []
    for r in profile.get("rows") or ():
        if r.get("kind") != "kernel":
            continue
        name = r["name"].replace("void at::native::", "")
        rows.append({"item": f"profile manual: {name[:90]}", "value": r.get("calls"), "unit": "launches",
                     "median_ms": r["self_device_us"] / 1000.0 / calls if r.get("self_device_us") else None,
                     "note": f"self_device_us {r.get('self_device_us')} over {calls} calls"})
    return rows


def _isolation_rows(doc: dict) -> list[dict]:
    names = {"cuda": "oob cuda (writes out of bounds)", "pytorch": "oob pytorch (next impl, fresh child)"}
    return [{"item": names[r["impl"]], "status": r["status"], "median_ms": (r["timing"] or {}).get("median_ms"),
             "note": r["error"]} for r in doc["results"] if r["op"] == "oob"]


# -- in this process: ceilings, launch floor, do_bench -----------------------------------------
def _ceilings(cache_dir: Path) -> dict:
    from workbench.engine.measure.calibrate import measure_copy_gbps, measure_matmul_ceiling
    from workbench.engine.measure.ceilings import CeilingCache, datasheet_for
    from workbench.engine.measure.environment import device_info
    from workbench.engine.measure.launch_floor import measure_floor_ms
    from workbench.engine.measure.timing import make_l2_flush, make_timer

    device = "cuda:0"
    info, timer = device_info(device), make_timer(device)
    flush = make_l2_flush(device, info.l2_bytes)
    return {"device": info.name, "driver": info.driver, "sm_count": info.sm_count, "l2_bytes": info.l2_bytes,
            "copy_gbps": measure_copy_gbps(device, timer),
            "matmul_tflops": {k: measure_matmul_ceiling(device, k, timer, memory_bytes=info.memory_bytes)
                              for k in MATMUL_KEYS},
            "launch_floor_ms": measure_floor_ms(device, timer, flush),
            "launch_floor_warm_ms": measure_floor_ms(device, timer, None),
            "datasheet": datasheet_for(info.name),
            "cached_by_children": CeilingCache(cache_dir).load().get(info.cache_key)}


def _ceiling_rows(c: dict) -> list[dict]:
    sheet = c["datasheet"] or {}
    cached = c["cached_by_children"] or {}
    rows = [{"item": "copy ceiling (read+write)", "value": c["copy_gbps"], "unit": "GB/s",
             "note": _vs(c["copy_gbps"], sheet.get("hbm_gbps"), "GB/s") + f"; children measured {cached.get('copy_gbps')}"}]
    for key, tflops in c["matmul_tflops"].items():
        rows.append({"item": f"matmul ceiling {key}", "value": tflops, "unit": "TFLOP/s",
                     "note": _vs(tflops, (sheet.get("matmul_tflops") or {}).get(key), "TFLOP/s")})
    rows.append({"item": "launch floor (1-element add, L2 flushed)", "median_ms": c["launch_floor_ms"],
                 "note": f"warm {c['launch_floor_warm_ms']:.4g} ms; children measured {cached.get('launch_floor_ms')}"})
    return rows


def _vs(measured: float, datasheet: float | None, unit: str) -> str:
    if not datasheet:
        return "no datasheet figure for this device"
    return f"datasheet {datasheet:g} {unit} ({100 * measured / datasheet:.0f}% of it)"


def _do_bench(size: int) -> list[dict]:
    from benchmarks.dobench import do_bench_median_ms, our_median_ms
    from workbench.registry import BuildContext, discover

    op = discover().op("gelu")
    spec = op.make_spec({"M": size, "N": size}, "float32")
    (x,) = op.make_inputs(spec, "cuda:0", 0)
    ctx = BuildContext(device="cuda:0", build_dir=default_cache_dir() / "build")
    found = []
    for name in DO_BENCH_IMPLS:
        impl = op.get_impl(name)
        try:
            fn = impl.builder(spec, impl.resolve_params({}), ctx)
            call = lambda fn=fn: fn(x)  # noqa: E731
            ours = our_median_ms(call, "cuda:0")
            theirs, stat = do_bench_median_ms(call)
            found.append({"impl": name, "ours_ms": ours, "do_bench_ms": theirs, "statistic": stat})
        except Exception as exc:  # one failing build must not hide the others
            found.append({"impl": name, "error": f"{type(exc).__name__}: {exc}"})
    return found


def _do_bench_rows(found: list[dict]) -> list[dict]:
    rows = []
    for f in found:
        if "error" in f:
            rows.append({"item": f"do_bench vs ours: {f['impl']}", "status": "failed", "note": f["error"]})
            continue
        rows.append({"item": f"do_bench vs ours: {f['impl']}", "median_ms": f["ours_ms"], "value": f["do_bench_ms"],
                     "unit": f"ms (do_bench {f['statistic']})",
                     "note": f"ratio ours/do_bench {f['ours_ms'] / f['do_bench_ms']:.3f}"})
    return rows
