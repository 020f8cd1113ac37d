"""The Timing table's cursor stays on the row the user moved it to while a run fills the table:
a run lists its rows (queued) from `r` on (RunModel.planned), so a cursor key pressed before the
first event has a row to move to, and each refill puts the cursor back on its row by the row's
key (label, sweep value), wherever that row now is."""

from __future__ import annotations

import threading

from tui_helpers import dies_after_the_first_row, fake_catalog, fake_opener, fixture_engine, loaded, ran, run_async, wait_for
from workbench import events as ev
from workbench.screens import editing
from workbench.screens.app import WorkbenchApp
from workbench.screens.keys import KeyDataTable
from workbench.screens.model import Row, RunModel
from workbench.screens.panes.timing import TimingPane


def make_app(tmp_path, engine=None) -> WorkbenchApp:
    return WorkbenchApp(None, None, engine=engine or fixture_engine(), opener=fake_opener(),
                        catalog_loader=lambda kernels, device: fake_catalog(), data_dir=tmp_path)


def cursor_label(app) -> str:
    pane = app.query_one(TimingPane)
    return pane._rows[app.query_one("#results-table", KeyDataTable).cursor_row].label


@run_async
async def test_a_cursor_key_pressed_right_after_r_keeps_its_row_through_the_run(tmp_path):
    """`r` then `down` before the run's first events were applied (a worker starting; events
    are held KEY_FIRST_S behind each key press): the table was empty then, so the key moved
    nothing and the cursor was on the first row once the rows came."""
    gate = threading.Event()
    inner = fixture_engine(delay_s=0.02)

    def engine(session, *, on_event, stop=None, options=None):
        gate.wait(20)  # the first event comes after the key
        return inner(session, on_event=on_event, stop=stop, options=options)

    app = make_app(tmp_path, engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        table = app.query_one("#results-table", KeyDataTable)
        table.focus()
        await pilot.pause()
        planned = [label for _, label, _ in editing.row_keys(app.ws.run, app.ws.op)]
        await pilot.press("r", "down")
        assert app.running and table.row_count == len(planned)  # listed, queued, from `r` on
        gate.set()
        await wait_for(pilot, lambda: app.runs_finished == 1)
        await pilot.pause(0.3)
        assert cursor_label(app) == planned[1] and table.cursor_row == 1


@run_async
async def test_a_refill_that_moves_the_cursors_row_takes_the_cursor_with_it(tmp_path):
    """Rows came in the engine's order (those that cannot run here first) and were put in the
    document's order at the run's end: the cursor kept its row number, under another row."""
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        pane = app.query_one(TimingPane)
        table = app.query_one("#results-table", KeyDataTable)

        def model(labels: list[str]) -> RunModel:
            return RunModel(op="gelu", rows={(label, None): Row(label, label, status="running") for label in labels})
        pane.model = model(["cuda", "manual", "pytorch"])
        table.move_cursor(row=1)  # manual
        pane.model = model(["manual", "pytorch", "cuda"])
        assert cursor_label(app) == "manual" and table.cursor_row == 0
        pane.model = model(["triton", "compiled"])  # its row gone: the cursor keeps its place
        assert table.cursor_row == 0


@run_async
async def test_the_rows_a_crashed_run_never_reached_are_not_left_queued(tmp_path):
    app = make_app(tmp_path, engine=dies_after_the_first_row())
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        first = editing.row_keys(app.ws.run, app.ws.op)[0][1]
        assert [row.label for row in app.query_one(TimingPane)._rows] == [first]


def test_a_planned_run_keeps_its_rows_in_document_order_and_drops_those_its_document_lacks():
    keys = [(0, "manual", None), (0, "pytorch", None), (0, "cuda", None)]
    model = RunModel.planned("gelu", keys)
    assert [(row.label, row.status) for row in model.rows.values()] == [
        ("manual", "queued"), ("pytorch", "queued"), ("cuda", "queued")]
    model.apply(ev.Started((0, "cuda", None), "gelu", "cuda_naive", "3x3 float32", "cpu"))
    model.apply(ev.Started((0, "manual", None), "gelu", "manual", "3x3 float32", "cpu"))
    assert list(model.rows) == [("manual", None), ("pytorch", None), ("cuda", None)]
    assert model.rows[("cuda", None)].impl == "cuda_naive"
    record = {"op": "gelu", "impl": "manual", "label": "manual", "sweep_value": None, "status": "ok"}
    model.finish({"results": [record, {**record, "impl": "cuda_naive", "label": "cuda"}]})
    assert list(model.rows) == [("manual", None), ("cuda", None)]  # pytorch: no event, not in the document
