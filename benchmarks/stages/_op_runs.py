"""Shared by the `gelu` and `ops` stages: run ops in every dtype through the engine's `run_plan`
(each implementation in its own child: a faulting kernel loses only its row) within a time
budget, and turn the results document into table rows.

On a GPU the builds are warmed first, in parallel (`warm_builds`): torch.compile, Triton and
load_inline all keep on-disk caches, so the engine's children, one per (op, implementation,
dtype), then load instead of compiling one after another. Their `build_ms` is then the cached
load. Without a GPU the same code runs small: CUDA rows come back `unavailable` with the
engine's reason, Triton runs under its interpreter (never GPU speed), so the stage can be tried
anywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import child_env
from workbench import fmt
from workbench.engine.plan import RunOptions, default_cache_dir, run_plan
from workbench.events import Error, Log, Result
from workbench.session.model import ImplRef, RunSpec, Session, Settings

# Figures per op: TFLOP/s where the op is a product (compute-bound at these sizes), else GB/s.
FLOP_OPS = ("matmul", "matmul_gelu", "mlp", "cdist")


@dataclass(frozen=True)
class OpRun:
    """One op at one shape in several dtypes. impls: None for every registered implementation."""

    op: str
    shape: dict[str, int]
    dtypes: tuple[str, ...]
    impls: tuple[str, ...] | None = None
    params: dict[str, dict[str, Any]] = field(default_factory=dict)  # impl -> param overrides


def has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def session_of(name: str, runs: list[OpRun], settings: Settings, *, dtype_major: bool) -> Session:
    """One RunSpec per (op, dtype), checked and benched; dtype_major orders all ops' first dtype
    first, so a budget cut loses the later dtypes rather than the later ops."""
    pairs = [(run, dtype) for run in runs for dtype in run.dtypes]
    if dtype_major:
        order = {d: i for i, d in enumerate(dict.fromkeys(d for run in runs for d in run.dtypes))}
        pairs.sort(key=lambda pair: order[pair[1]])
    specs = []
    for run, dtype in pairs:
        impls = None if run.impls is None else tuple(ImplRef(n, params=run.params.get(n, {})) for n in run.impls)
        specs.append(RunSpec(op=run.op, impls=impls, shape=dict(run.shape), dtype=dtype, actions=("check", "bench")))
    return Session(name=name, runs=tuple(specs), settings=settings)


WARM_KINDS = ("compiled", "cuda", "triton")  # the kinds with an on-disk build cache worth warming
ROOT = Path(__file__).resolve().parents[2]


def warm_tasks(session: Session, device: str = "cuda:0") -> list[dict]:
    """The session's available compiled, CUDA and Triton rows (engine/rows.expand) as warm-up
    tasks: {op, impl, params, shape, dtype, fp32_precision, device}, plain data for a child."""
    from workbench.dtypes import DType
    from workbench.engine.rows import expand
    from workbench.machine import probe, unavailable_reason
    from workbench.registry import discover

    registry, machine = discover(), probe()
    tasks = []
    for row in expand(session, registry, has_cuda=machine.has_cuda, device_override=device):
        impl = registry.op(row.op).get_impl(row.impl)
        dtype = DType.parse(row.dtype) if row.dtype else None
        if row.error is None and impl.kind in WARM_KINDS and unavailable_reason(impl, "check", machine, dtype) is None:
            tasks.append({"op": row.op, "impl": row.impl, "params": dict(row.params), "shape": dict(row.shape),
                          "dtype": row.dtype, "fp32_precision": row.settings.fp32_precision, "device": row.device})
    return tasks


def warm_builds(session: Session, build_dir: Path, budget_s: float, workers: int = 8,
                device: str = "cuda:0") -> list[str]:
    """Run every warm-up task in its own process, `workers` at a time; kill what is still running
    after `budget_s`. Returns one note per task that failed or was cut (empty: all warmed)."""
    pending, running, notes = warm_tasks(session, device), [], []
    deadline = time.monotonic() + budget_s
    env = child_env({k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    if not device.startswith("cuda"):
        env["TRITON_INTERPRET"] = "1"  # read when the task imports the kernels
    while pending or running:
        while pending and len(running) < workers:
            task = pending.pop(0)
            cmd = [sys.executable, "-m", "benchmarks.stages._op_runs", json.dumps(task), str(build_dir)]
            err = tempfile.TemporaryFile("w+")  # a file, not a pipe: a chatty build cannot block on it
            running.append((task, err, subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)))
        time.sleep(0.2)
        for entry in list(running):
            task, err, proc = entry
            if proc.poll() is not None:
                running.remove(entry)
                if proc.returncode != 0:
                    err.seek(0)
                    notes.append(f"warm {task['op']} {task['impl']} {task['dtype']}: exit {proc.returncode}: "
                                 f"{err.read().strip().splitlines()[-1:]}")
                err.close()
        if time.monotonic() > deadline:
            for task, err, proc in running:
                proc.kill()
                err.close()
                notes.append(f"warm {task['op']} {task['impl']} {task['dtype']}: "
                             f"cut at the {budget_s:.0f} s warm-up budget")
            notes += [f"warm {t['op']} {t['impl']} {t['dtype']}: not started (warm-up budget)" for t in pending]
            break
    return notes


def _warm_one(task: dict, build_dir: Path) -> None:
    import torch

    from workbench.engine.worker.precision import effective_fp32_precision, fp32_precision
    from workbench.registry import BuildContext, discover

    op = discover().op(task["op"])
    impl = op.get_impl(task["impl"])
    spec = op.make_spec(task["shape"], task["dtype"])
    device, precision = task["device"], effective_fp32_precision(op, task["fp32_precision"])
    # tune=False: these builds run side by side; an autotuning builder takes the first candidate
    # here and tunes in its own row (a tuner here timed its candidates beside seven other builds)
    ctx = BuildContext(device=device, fp32_precision=precision, build_dir=build_dir,
                       interpret=not device.startswith("cuda"), tune=False)
    with fp32_precision(precision):
        fn = impl.builder(spec, impl.resolve_params(task["params"]), ctx)
        fn(*op.make_inputs(spec, device, 0))
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run_session(session: Session, out: Path, budget_s: float, warm_budget_s: float = 0.0) -> dict:
    """run_plan with progress on stderr, events in OUT/NAME_log.txt, the document in
    OUT/NAME_results.json; rows not started within `budget_s` come back skipped ("cancelled")."""
    out.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    timer = threading.Timer(budget_s, stop.set)
    started = time.monotonic()
    log = (out / f"{session.name}_log.txt").open("w")

    def on_event(event) -> None:
        if isinstance(event, Log):
            log.write(f"{event.row} {event.level}: {event.text}\n")
        elif isinstance(event, Error):
            log.write(f"{event.row} error: {event.message}\n")
        elif isinstance(event, Result):
            rec = event.record
            median = (rec["timing"] or {}).get("median_ms")
            print(f"  {time.monotonic() - started:5.0f} s  {rec['op']} {rec['label']} {rec['dtype']}: "
                  f"{rec['status']} median_ms={median} {rec['error'] or ''}", file=sys.stderr)

    options = RunOptions(cache_dir=out / "cache", build_dir=default_cache_dir() / "build",
                         argv=("benchmarks/gpu_evidence.py", "--stage", session.name))
    if warm_budget_s > 0 and has_gpu():
        print(f"  warming builds in parallel (at most {warm_budget_s:.0f} s)", file=sys.stderr)
        for note in warm_builds(session, options.build_dir, warm_budget_s):
            print(f"  {note}", file=sys.stderr)
        print(f"  warm-up done after {time.monotonic() - started:.0f} s", file=sys.stderr)
        started = time.monotonic()
    timer.start()
    try:
        doc = run_plan(session, on_event=on_event, stop=stop, options=options)
    finally:
        timer.cancel()
        log.close()
    (out / f"{session.name}_results.json").write_text(json.dumps(doc, indent=2, default=str))
    return doc


def table_rows(doc: dict) -> list[dict]:
    """One row per result: check outcome, median ms, GB/s or TFLOP/s, % of the ceiling."""
    return [_row(rec) for rec in doc["results"]]


def _row(rec: dict) -> dict:
    timing, traffic, check = rec["timing"] or {}, rec["traffic"] or {}, rec["check"] or {}
    flops = rec["op"] in FLOP_OPS
    value = traffic.get("tflops") if flops else traffic.get("gbps")
    notes = []
    if rec["error"]:
        notes.append(rec["error"].splitlines()[0][:120])
    if traffic.get("pct_of_ceiling") is not None:
        notes.append(f"{traffic['pct_of_ceiling']:.0f}% of {traffic['ceiling']}")
    if timing.get("launch_bound"):
        notes.append("launch-bound")
    if rec.get("build_ms") is not None and rec["build_ms"] > 1000:
        notes.append(f"build {rec['build_ms'] / 1000:.0f} s")
    return {
        "op": rec["op"], "impl": rec["label"], "dtype": rec["dtype"],
        "shape": "x".join(str(v) for v in (rec["shape"] or {}).values()),
        "status": rec["status"],
        "check": fmt.check(check) if check else None,
        "median_ms": timing.get("median_ms"),
        "value": value, "unit": ("TFLOP/s" if flops else "GB/s") if value is not None else None,
        "note": "; ".join(notes) or None,
    }


if __name__ == "__main__":  # one warm-up task: python -m benchmarks.stages._op_runs TASK_JSON BUILD_DIR
    _warm_one(json.loads(sys.argv[1]), Path(sys.argv[2]))
