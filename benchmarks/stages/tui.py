"""Stage `tui`: the workbench TUI driven by a Pilot, then its saved session replayed headless.

    python benchmarks/gpu_evidence.py --stage tui [--quick] [--out DIR]

A Pilot (Textual's `run_test`, no terminal needed) opens a session holding a softmax run, runs
it (r), adds a new GeLU run five ways (manual, pytorch, compiled, cuda, triton) by picking
`+ gelu`, typing the shape and ticking the implementations, runs it, and saves (ctrl+s). The
saved file is then replayed headless (`python -m workbench --replay saved.yaml --format json`).
The table: for every (op, impl), the median ms the TUI measured against the replay's, and one
row per front end with its wall time. On the H200: GeLU at 16384x16384, softmax 16384x16384
(--quick: 4096x4096). Without a GPU: GeLU 64x64 and softmax 32x64 on CPU (CUDA rows are
`unavailable`), so the stage runs anywhere.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

TITLE = "TUI driven by a Pilot vs headless replay of its saved session"
ROOT = Path(__file__).resolve().parents[2]
GELU_IMPLS = {"manual", "pytorch", "compiled", "cuda", "triton"}
RUN_LIMIT_S = 240
SESSION = """\
schema_version: 1
name: tui-evidence
settings:
  device: {device}
  warmup_ms: 10
  rep_ms: {rep_ms}
  min_samples: 5
runs:
  - op: softmax
    impls: [manual, pytorch, compiled, triton]
    shape: {{M: {softmax_m}, N: {softmax_n}}}
    dtype: float32
    actions: [check, bench]
"""


def run(quick: bool, out: Path) -> list[dict]:
    gpu = _has_gpu()
    sizes = _sizes(gpu, quick)
    folder = out / "tui"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "saved.yaml"
    path.write_text(SESSION.format(device="auto" if gpu else "cpu", rep_ms=50 if gpu else 5,
                                   softmax_m=sizes["softmax"][0], softmax_n=sizes["softmax"][1]))
    t0 = time.monotonic()
    tui = asyncio.run(_drive(path, folder / "data", sizes["gelu"]))
    tui_s = time.monotonic() - t0
    t0 = time.monotonic()
    replay, code = _replay(path, folder)
    replay_s = time.monotonic() - t0
    rows = [{"front end": "tui (pilot)", "wall s": round(tui_s, 1), "rows": len(tui)},
            {"front end": "replay", "wall s": round(replay_s, 1), "rows": len(replay), "exit": code}]
    return rows + _compare(tui, replay)


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def _sizes(gpu: bool, quick: bool) -> dict[str, tuple[int, int]]:
    if not gpu:
        return {"gelu": (64, 64), "softmax": (32, 64)}
    side = 4096 if quick else 16384
    return {"gelu": (side, side), "softmax": (side, side)}


async def _drive(path: Path, data: Path, gelu_shape: tuple[int, int]) -> dict[tuple[str, str], dict]:
    """Run the session's softmax, add GeLU five ways through the widgets, run it, save."""
    from textual.widgets import Input, OptionList, SelectionList

    from workbench.screens.app import WorkbenchApp

    app = WorkbenchApp(path, None, data_dir=data)
    async with app.run_test(size=(120, 40)) as pilot:
        await _until(pilot, lambda: app.ws.run is not None, 120)
        await _run(pilot)
        options = app.query_one("#op-list", OptionList)
        options.focus()
        options.highlighted = next(i for i, o in enumerate(options.options) if o.id == "op:gelu")
        await pilot.press("enter")
        await _until(pilot, lambda: app.ws.run.op == "gelu" and app.ws.index is None, 10)
        await pilot.pause(0.3)
        for field, value in zip(sorted(app.query(".shape").results(Input), key=lambda i: i.name), gelu_shape):
            field.focus()
            field.value = ""
            await pilot.press(*str(value))
        checklist = app.query_one("#impl-list", SelectionList)
        checklist.deselect_all()
        for name in GELU_IMPLS:
            checklist.select(name)
        await pilot.pause(0.3)
        app.query_one("#results-table").focus()
        await _run(pilot)
        await pilot.press("ctrl+s")
        await pilot.pause(0.5)
        return {(m.op, r.label): r.record or {} for m in app.ws.models.values() for r in m.rows.values()}


async def _run(pilot) -> None:
    before = pilot.app.runs_finished
    await pilot.press("r")
    await _until(pilot, lambda: pilot.app.runs_finished > before, RUN_LIMIT_S)
    await pilot.pause(0.3)


async def _until(pilot, condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the TUI did not get there in {timeout_s} s")
        await pilot.pause(0.1)


def _replay(path: Path, folder: Path) -> tuple[dict[tuple[str, str], dict], int]:
    target = folder / "replay.json"
    with open(folder / "replay.log", "w") as log:
        proc = subprocess.run([sys.executable, "-m", "workbench", "--replay", str(path), "--format", "json",
                               "-o", str(target)], cwd=ROOT, stderr=log, timeout=2 * RUN_LIMIT_S)
    doc = json.loads(target.read_text()) if target.exists() else {"results": []}
    return {(r["op"], r["label"]): r for r in doc["results"]}, proc.returncode


def _compare(tui: dict, replay: dict) -> list[dict]:
    rows = []
    for key in sorted(set(tui) | set(replay)):
        a, b = _median(tui.get(key)), _median(replay.get(key))
        rows.append({"op": key[0], "impl": key[1],
                     "status": f"{(tui.get(key) or {}).get('status')}/{(replay.get(key) or {}).get('status')}",
                     "tui median ms": a, "replay median ms": b,
                     "tui/replay": float(f"{a / b:.3g}") if a and b else None})
    return rows


def _median(record: dict | None) -> float | None:
    return ((record or {}).get("timing") or {}).get("median_ms")
