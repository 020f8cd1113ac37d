"""Helpers for the TUI tests: a fake engine replaying a committed results fixture as events,
a catalog and a session that need no torch, and waiting for the app to settle.

A fixture (tests/fixtures/tui_*.json) is {"doc": a results document, "samples": label[@sweep]
-> ms, "ptx_texts": label[@sweep] -> kernel -> {"ptx", "sass"}, "logs": [[label, level, text]]}.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from pathlib import Path

from workbench import events as ev
from workbench.session.model import ImplRef, RunSpec, Session, Sweep

from workbench.screens.catalog import Catalog, ImplInfo, OpInfo
from workbench.screens.sessions_io import Opened

FIXTURES = Path(__file__).parent / "fixtures"
GELU_H200 = FIXTURES / "tui_gelu_h200.json"
SOFTMAX_SWEEP = FIXTURES / "tui_softmax_sweep_h200.json"
ACTIONS = ("check", "bench", "profile", "ptx")


def fixture_engine(path: Path | dict = GELU_H200, *, delay_s: float = 0.0, fail: str | None = None):
    """A stand-in for run_plan that emits the fixture's events (and raises `fail` if given);
    `path` is a fixture file, or fixture data (`fixture_from_results`)."""
    data = path if isinstance(path, dict) else json.loads(path.read_text())

    def engine(session, *, on_event, stop: threading.Event | None = None, options=None) -> dict:
        if fail:
            raise RuntimeError(fail)
        records = []
        for record in data["doc"]["results"]:
            if stop is not None and stop.is_set():  # as the engine's cancel_rest: skipped, "cancelled"
                records.append({**record, "status": "skipped", "error": "cancelled", "timing": None,
                                "traffic": None, "check": None, "profile": None, "ptx": None, "flags": []})
                continue
            _emit(record, data, on_event, delay_s)
            records.append(record)
        return {**data["doc"], "results": records, "cancelled": bool(stop and stop.is_set())}
    return engine


def dies_after_the_first_row():
    """An engine (fixture_engine's) that raises right after its first row's result, as a worker
    whose machine went away."""
    inner = fixture_engine()

    def engine(session, *, on_event, stop=None, options=None):
        def relay(event):
            on_event(event)
            if isinstance(event, ev.Result):
                raise RuntimeError("the machine went away")
        return inner(session, on_event=relay, stop=stop, options=options)
    return engine


def fixture_from_results(path: Path, run_index: int) -> dict:
    """Fixture data from a committed results document (results/h200/*.json): run `run_index`'s
    records as run 0, no samples, no PTX texts (real profiler kernel names, for instance)."""
    doc = json.loads(path.read_text())
    records = [{**r, "run_index": 0} for r in doc["results"] if r["run_index"] == run_index]
    return {"doc": {**doc, "results": records}, "samples": {}, "ptx_texts": {}, "logs": []}


def _emit(record: dict, data: dict, on_event, delay_s: float) -> None:
    row = (0, record["label"], record["sweep_value"])
    key = record["label"] if record["sweep_value"] is None else f"{record['label']}@{record['sweep_value']}"
    spec = "x".join(str(v) for v in record["shape"].values()) + f" {record['dtype']}"
    on_event(ev.Started(row, record["op"], record["impl"], spec, record["device"]))
    if record["build_ms"] is not None:
        on_event(ev.Built(row, record["build_ms"]))
    if record["check"]:
        on_event(ev.Checked(row, record["check"]))
    samples = data["samples"].get(key, [])
    for start in range(0, len(samples), 10):
        on_event(ev.Samples(row, tuple(samples[start:start + 10]), record["timing"]["timer"]))
        time.sleep(delay_s)
    for label, level, text in data.get("logs", ()):
        if label == record["label"]:
            on_event(ev.Log(row, text, level))
    if record["profile"]:
        on_event(ev.Profile(row, record["profile"]))
    if record["ptx"]:
        texts = data["ptx_texts"]  # keyed label, or label@sweep where the sweep points differ
        on_event(ev.Ptx(row, record["ptx"], texts.get(key, texts.get(record["label"], {}))))
    if record["error"]:
        on_event(ev.Error(row, record["error"]))
    on_event(ev.Result(row, record))


def _impl(name: str, description: str, params=None, gpu_only: bool = False, gpu: bool = True) -> ImplInfo:
    reason = None if gpu or not gpu_only else "needs a CUDA GPU (none here)"
    reasons = {(a, d): (None if a == "ptx" else reason) for a in ACTIONS
               for d in ("float32", "float16", "bfloat16")}
    return ImplInfo(name=name, description=description, params=params or {}, reasons=reasons,
                    note="" if gpu or not name.startswith("triton") else "Triton interpreter only (not GPU speed)")


def fake_catalog(gpu: bool = True) -> Catalog:
    """gelu and softmax as on an H200 (gpu=True) or a CPU box, without importing torch."""
    gelu = OpInfo("gelu", "GeLU (tanh approximation), elementwise over M x N", {"M": 16384, "N": 16384},
                  ("float32", "float16", "bfloat16"), "float32", (
                      _impl("manual", "Hand-written PyTorch formula: nine eager kernels.", gpu=gpu),
                      _impl("pytorch", "F.gelu(x, approximate=\"tanh\"): one fused ATen kernel", gpu=gpu),
                      _impl("compiled", "torch.compile(manual_gelu, dynamic=False)", gpu=gpu),
                      _impl("cuda_naive", "The lecture's CUDA kernel", gpu_only=True, gpu=gpu),
                      _impl("cuda", "CUDA C++: 16-byte vector loads and stores", gpu_only=True, gpu=gpu),
                      _impl("triton", "Triton: one program per BLOCK_SIZE elements",
                            {"BLOCK_SIZE": 1024, "num_warps": 4}, gpu=gpu)),
                  validate=_validate)
    softmax = OpInfo("softmax", "Row softmax over M x N", {"M": 4096, "N": 4096},
                     ("float32", "float16", "bfloat16"), "float32", (
                         _impl("manual", "Hand-written softmax: five eager kernels", gpu=gpu),
                         _impl("pytorch", "torch.softmax", gpu=gpu),
                         _impl("triton", "Triton: one row per program",
                               {"num_warps": 4}, gpu=gpu)),
                     validate=_validate)
    machine = "NVIDIA H200 · nvcc yes" if gpu else "CPU only (no GPU) · Triton interpreted · nvcc none"
    return Catalog(ops={"gelu": gelu, "softmax": softmax}, machine=machine, gpu=gpu)


def _validate(shape, dtype) -> str | None:
    bad = next((k for k, v in shape.items() if v < 1), None)
    return f"{bad}: must be a positive integer, got {shape[bad]}" if bad else None


def gated_catalog(gate: threading.Event, timeout_s: float = 10.0):
    """A catalog loader that returns fake_catalog() only once `gate` is set (ops still loading)."""
    def load(kernels, device) -> Catalog:
        gate.wait(timeout_s)
        return fake_catalog()
    return load


def fake_session(sweep: bool = False) -> Session:
    gelu = RunSpec(op="gelu", impls=None, shape={"M": 16384, "N": 16384}, dtype="float32", actions=ACTIONS)
    softmax = RunSpec(op="softmax", impls=tuple(ImplRef(n) for n in ("manual", "pytorch", "triton")),
                      shape={"M": 4096, "N": 4096}, dtype="float32", actions=("check", "bench"),
                      sweep=Sweep(params=("N",), values=(256, 1024, 4096, 16384, 65536)))
    runs = (softmax, gelu) if sweep else (gelu, softmax)
    return Session(name="tui-fixture", runs=runs)


def fake_opener(session: Session | None = None):
    def opener(path, gpu) -> Opened:
        return Opened(session or fake_session(), path, None, ())
    return opener


def run_async(test):
    """Run an `async def` test with asyncio (no pytest async plugin needed); fixtures still work."""
    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))
    return wrapper


async def wait_for(pilot, condition, timeout_s: float = 20.0, step_s: float = 0.05) -> None:
    """Pause the pilot until `condition()` holds; AssertionError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {condition}")
        await pilot.pause(step_s)


async def loaded(pilot) -> None:
    await wait_for(pilot, lambda: pilot.app.ws.run is not None)
    await pilot.pause()


async def ran(pilot, timeout_s: float = 20.0) -> None:
    """Press r and wait until the run is over and the panes redrawn."""
    before = pilot.app.runs_finished
    await pilot.press("r")
    await wait_for(pilot, lambda: pilot.app.runs_finished > before, timeout_s=timeout_s)
    await pilot.pause(0.3)
