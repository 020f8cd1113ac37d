"""Stage `cheats`: kernels right when checked and idle, cached or partial when timed fail with their
gate named; the shipped GeLU and softmax still pass; the rule-13 timed call moves no timing
(MEASUREMENT.md rule 13, issue 38).

    python benchmarks/gpu_evidence.py --stage cheats --quick

1. run_plan (engine children, as the CLI runs rows) on gelu and softmax 4096 x 4096 float32 with
   the test plugins tests/plugins/known_wrong.py and tests/plugins/cheats_cuda.py: the shipped
   pytorch and triton implementations must be `ok`; each known-wrong case must be `failed` with
   its gate named in `error`: manual_wrong_side (half the work on an unjoined side stream:
   "streams", or `ok` with a median no faster than the pytorch row: the two halves ran side by side
   and nothing was left after the end event, so the window timed all the work), ptrcache (results cached by pointer), lazy (a tensor subclass: "ownership"),
   global (one shared buffer), sniff (idles when the engine's timed call is on the stack), bytes
   (cached by a sample of the input bytes), once (right once): "timed outputs" (or a value gate on
   the special set, which rewrites the same tensors). Then the stream cases on gelu 16384 x 8192
   float32 (large enough that the side stream's work, ~0.2-0.3 ms, is well above the streams gate's
   0.05 ms floor): manual_wrong_side90 (~90% of the rows on a side stream never joined, ~10% on
   the current one) must fail at "streams"; manual_side_joined (the same split, joined back
   before returning: honest) and pytorch must be `ok`.
2. In this process, interleaved over ROUNDS rounds, the lecture's GeLU (16384^2, --quick 8192^2;
   pytorch and triton, float32 and bfloat16) timed three ways: triton.testing.do_bench, the
   engine's loop on the plain call (benchmarks.dobench.our_median_ms, as stages/engine.py's
   do_bench cross-check), and the engine's loop on the rule-13 timed call (engine/measure/rotation.py:
   two input sets rotated, one output per set and batch kept). `rotated/plain` must be within 1%
   (the extra checks stay outside the timed windows); both against do_bench are shown.
Without a GPU it says so and returns no rows (the plugin's side-stream case needs CUDA).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

TITLE = "cheats: rule 13 known-wrong cases fail with their gate, shipped pass, timings unmoved"
ROOT = Path(__file__).resolve().parents[2]
PLUGINS = (ROOT / "tests" / "plugins" / "known_wrong.py", ROOT / "tests" / "plugins" / "cheats_cuda.py")
VALUE = ("elementwise", "norm-wise", "elementwise+norm-wise")  # a value gate (on the special set)
# impl -> the gates its error may name (`check failed: <gate> gate ...`, `measurement error: <gate> gate: ...`)
WRONG = {"manual_wrong_side": ("streams",), "manual_wrong_side90": ("streams",),
         "manual_wrong_ptrcache": ("timed outputs", *VALUE),
         "manual_wrong_lazy": ("ownership",), "manual_wrong_global": ("timed outputs",),
         "manual_wrong_sniff": ("timed outputs",), "manual_wrong_bytes": ("timed outputs", *VALUE),
         "manual_wrong_once": ("timed outputs", *VALUE)}
SPLIT_OK = ("manual_wrong_side",)  # may time honestly (see _case_rows); side90 may not
SHIPPED = ("pytorch", "triton")
STREAMS = ("pytorch", "manual_wrong_side90", "manual_side_joined")  # on STREAMS_SHAPE; the joined one is honest
STREAMS_SHAPE = {"M": 16384, "N": 8192}
ROUNDS = 3
MOVE_LIMIT = 0.01


def run(quick: bool, out: Path) -> list[dict]:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    if not torch.cuda.is_available():
        print("cheats stage: no CUDA GPU here: the side-stream case and do_bench need one; nothing run",
              file=sys.stderr)
        return []
    doc = _run_session(out)
    (out / "cheats_results.json").write_text(json.dumps(doc, indent=2, default=str))
    rows = _case_rows(doc)
    timings = _timings(8192 if quick else 16384)
    (out / "cheats_timings.json").write_text(json.dumps(timings, indent=2, default=str))
    return rows + _timing_rows(timings)


def _run_session(out: Path) -> dict:
    from workbench.engine.plan import RunOptions, default_cache_dir, run_plan
    from workbench.events import Result
    from workbench.session.model import ImplRef, RunSpec, Session, Settings

    impls = tuple(ImplRef(i) for i in (*SHIPPED, *WRONG) if i != "manual_wrong_side90")
    session = Session(name="evidence-cheats", settings=Settings(device="auto", timeout_s=300.0, rep_ms=50.0), runs=(
        RunSpec(op="gelu", impls=impls, shape={"M": 4096, "N": 4096}, dtype="float32", actions=("check", "bench")),
        RunSpec(op="softmax", impls=tuple(ImplRef(i) for i in (*SHIPPED, "manual_wrong_global", "manual_wrong_lazy")),
                shape={"M": 4096, "N": 4096}, dtype="float32", actions=("check", "bench")),
        RunSpec(op="gelu", impls=tuple(ImplRef(i) for i in STREAMS), shape=STREAMS_SHAPE, dtype="float32",
                actions=("check", "bench"))))

    def on_event(event) -> None:
        if isinstance(event, Result):
            print(f"  {event.row}: {event.record['status']} {event.record.get('error') or ''}", file=sys.stderr)
    options = RunOptions(kernels=tuple(str(p) for p in PLUGINS), cache_dir=out / "cache",
                         build_dir=default_cache_dir() / "build", argv=("benchmarks/gpu_evidence.py", "--stage", "cheats"))
    return run_plan(session, on_event=on_event, options=options)


def _honest_ms(doc: dict) -> dict:
    """(op, shape) -> the shipped pytorch row's median_ms: the honest time a split case is held to."""
    return {(r["op"], str(r.get("shape"))): (r.get("timing") or {}).get("median_ms")
            for r in doc["results"] if r["impl"] == "pytorch" and r["status"] == "ok"}


def _case_rows(doc: dict) -> list[dict]:
    rows = []
    honest = _honest_ms(doc)
    for rec in doc["results"]:
        error = rec.get("error") or ""
        if rec["impl"] in WRONG:
            named = gate_of(error)
            good = rec["status"] == "failed" and named in WRONG[rec["impl"]] and rec.get("timing") is None
            expect = " or ".join(g for g in WRONG[rec["impl"]] if g not in VALUE[1:]).replace("elementwise", "a value gate")
            if rec["impl"] in SPLIT_OK:
                # half the work on an unjoined side stream that runs beside the other half: when no work
                # is left after the end event (below the gate's floor) the window timed all of it, so an
                # `ok` no faster than the honest row is a true time, not a gamed one
                ms, ref = (rec.get("timing") or {}).get("median_ms"), honest.get((rec["op"], str(rec.get("shape"))))
                good = good or (rec["status"] == "ok" and ms is not None and ref is not None and ms >= ref)
                expect += " (or ok, no faster than pytorch)"
        else:
            good = rec["status"] == "ok"
            expect = "ok"
        shape = "x".join(str(v) for v in (rec.get("shape") or {}).values())
        rows.append({"item": f"{rec['op']} {rec['impl']}" + (f" {shape}" if shape else ""), "status": rec["status"],
                     "expected": expect,
                     "verdict": "as expected" if good else "WRONG",
                     "median_ms": (rec.get("timing") or {}).get("median_ms"),
                     "note": (error[:160] or "; ".join(f for f in rec.get("flags", []) if f.startswith("trust")) or None)})
    return rows


def gate_of(error: str) -> str | None:
    """The gate a row's error names: `check failed: <gate> gate (...` or `measurement error: <gate> gate: ...`."""
    for prefix in ("check failed: ", "measurement error: "):
        if error.startswith(prefix) and " gate" in error:
            return error[len(prefix):].split(" gate", 1)[0]
    return None


def _timings(size: int) -> list[dict]:
    import random

    import torch

    from benchmarks.dobench import do_bench_median_ms, our_median_ms
    from workbench.engine.measure.rotation import Rotation
    from workbench.registry import BuildContext, discover

    op = discover().op("gelu")
    found = []
    for dtype in ("float32", "bfloat16"):
        spec = op.make_spec({"M": size, "N": size}, dtype)
        sets = [op.make_inputs(spec, "cuda", 0), op.make_inputs(spec, "cuda", 1)]
        for name in SHIPPED:
            impl = op.get_impl(name)
            try:
                fn = impl.builder(spec, impl.resolve_params({}), BuildContext(device="cuda"))
                fn(*sets[0])
                torch.cuda.synchronize()
            except Exception as exc:  # a missing backend: say so, keep going
                found.append({"impl": name, "dtype": dtype, "error": f"{type(exc).__name__}: {exc}"})
                continue
            methods = {"do_bench": lambda: do_bench_median_ms(lambda: fn(*sets[0]))[0],
                       "plain": lambda: our_median_ms(lambda: fn(*sets[0]), "cuda"),
                       "rotated": lambda: our_median_ms(Rotation(fn, sets), "cuda")}
            got: dict[str, list[float]] = {k: [] for k in methods}
            order = list(methods)
            rng = random.Random(f"{name}{dtype}")
            for _ in range(ROUNDS):
                rng.shuffle(order)
                for key in order:
                    got[key].append(methods[key]())
            med = {k: sorted(v)[len(v) // 2] for k, v in got.items()}
            found.append({"impl": name, "dtype": dtype, "shape": [size, size], "rounds": got, **med})
            fn = None  # free the build (rebinding: the timed lambdas above read the name)
        sets = None
        torch.cuda.empty_cache()
        time.sleep(0.1)
    return found


def _timing_rows(found: list[dict]) -> list[dict]:
    rows = []
    for f in found:
        item = f"gelu {f['impl']} {f['dtype']} timed call"
        if "error" in f:
            rows.append({"item": item, "status": "skipped", "note": f["error"]})
            continue
        move = f["rotated"] / f["plain"] - 1
        rows.append({"item": item, "status": "ok" if abs(move) < MOVE_LIMIT else "moved",
                     "median_ms": f["rotated"], "value": f["do_bench"], "unit": "ms (do_bench median)",
                     "note": f"rotated/plain {f['rotated'] / f['plain']:.4f}, rotated/do_bench "
                             f"{f['rotated'] / f['do_bench']:.4f}, plain/do_bench {f['plain'] / f['do_bench']:.4f} "
                             f"(median of {ROUNDS} interleaved rounds)"})
    return rows
