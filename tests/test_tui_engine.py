"""The TUI's main flow against the real engine on CPU at small shapes: pick an op, edit its shape,
choose implementations and actions, run, see every pane filled, save, reopen.

Slow-ish (one engine run: execution children are spawned), so it is the only real-engine test.
"""

from __future__ import annotations

import pytest

import json

from textual.widgets import DataTable, Input, OptionList, SelectionList, Static

from tui_helpers import loaded, ran, run_async, wait_for
from workbench.screens.app import WorkbenchApp
from workbench.screens.panes.log import LogPane
from workbench.session.api import load_session

SESSION = """\
schema_version: 1
name: tui-engine
settings:
  device: cpu
  warmup_ms: 1
  rep_ms: 5
  min_samples: 3
  flush_l2: false
runs:
  - op: softmax
    impls: [pytorch]
    shape: {M: 8, N: 16}
    actions: [check]
"""


async def pick_new_run(pilot, op: str) -> None:
    options = pilot.app.query_one("#op-list", OptionList)
    options.focus()
    options.highlighted = next(i for i, o in enumerate(options.options) if o.id == f"op:{op}")
    await pilot.press("enter")
    await wait_for(pilot, lambda: pilot.app.ws.run.op == op)
    await pilot.pause(0.2)


async def type_into(pilot, field: Input, text: str) -> None:
    field.focus()
    field.value = ""
    await pilot.press(*text)


async def choose(pilot, selector: str, names: set[str], chosen) -> None:
    """Tick exactly `names` in a checklist; wait until `chosen()` (the run) agrees."""
    checklist = pilot.app.query_one(selector, SelectionList)
    checklist.deselect_all()
    for name in names:
        checklist.select(name)
    await wait_for(pilot, lambda: set(chosen()) == names)


@pytest.mark.slow
@run_async
async def test_pick_edit_run_save_reopen(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(SESSION)
    data = tmp_path / "data"
    app = WorkbenchApp(path, None, data_dir=data)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.ws.run is not None, timeout_s=60)
        await pick_new_run(pilot, "gelu")
        shape = {i.name: i for i in app.query(".shape").results(Input)}
        await type_into(pilot, shape["M"], "32")
        await type_into(pilot, shape["N"], "48")
        await wait_for(pilot, lambda: dict(app.ws.run.shape) == {"M": 32, "N": 48})
        await choose(pilot, "#impl-list", {"pytorch", "triton"},
                     lambda: [r.name for r in app.ws.run.impls or ()])
        await choose(pilot, "#actions", {"check", "bench", "ptx"}, lambda: app.ws.run.actions)
        app.query_one("#results-table").focus()
        await ran(pilot, timeout_s=180)

        rows = list(app.ws.model().rows.values())
        assert {r.label: r.status for r in rows} == {"pytorch": "ok", "triton": "ok"}
        assert app.query_one("#results-table", DataTable).row_count == 2
        timers = {r.label: r.get("timing", "timer") for r in rows}
        assert timers["pytorch"] == "perf_counter" and timers["triton"] == "interpreter"
        assert app.query_one("#traffic-table", DataTable).row_count == 2
        await pilot.press("3")
        await wait_for(pilot, lambda: "ld.global" in str(app.query_one("#ptx-code", Static).render()))
        assert any("done" in text for _, text in app.query_one(LogPane).entries)
        await pilot.press("ctrl+s")
        await pilot.pause(0.2)

    saved = load_session(path)
    assert [r.op for r in saved.runs] == ["softmax", "gelu"]
    assert dict(saved.runs[1].shape) == {"M": 32, "N": 48}
    assert [ref.name for ref in saved.runs[1].impls] == ["pytorch", "triton"]
    results = json.loads((tmp_path / "mine.results.json").read_text())
    assert {r["run_index"] for r in results["results"]} == {1}

    again = WorkbenchApp(path, None, data_dir=data)
    async with again.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        assert again.ws.run.op == "softmax"
        options = again.query_one("#op-list", OptionList)
        options.focus()
        options.highlighted = 1
        await pilot.press("enter")
        await wait_for(pilot, lambda: again.ws.index == 1)
        await pilot.pause(0.3)
        assert again.query_one("#results-table", DataTable).row_count == 2


@pytest.mark.slow
@run_async
async def test_the_app_keeps_one_warm_worker_and_leaves_none_when_it_exits(tmp_path):
    import multiprocessing
    import os

    path = tmp_path / "mine.yaml"
    path.write_text(SESSION)
    app = WorkbenchApp(path, None, data_dir=tmp_path / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await wait_for(pilot, lambda: app._pool is not None and app._pool.workers(), timeout_s=30)
        started = [w.proc.pid for w in app._pool.workers()]  # prestarted when the session opened
        await ran(pilot, timeout_s=120)
        await ran(pilot, timeout_s=120)  # a second run: the same worker, no start
        assert [w.proc.pid for w in app._pool.workers()] == started
        assert [r.status for r in app.ws.model().rows.values()] == ["ok"]
    assert multiprocessing.active_children() == []
    for pid in started:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        assert open(f"/proc/{pid}/stat").read().split(")")[-1].split()[0] == "Z", f"worker {pid} outlived the app"
