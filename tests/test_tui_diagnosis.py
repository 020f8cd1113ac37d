"""The Diagnosis pane (key 6): findings of the fixture's H200 rows, marking two rows, A/B."""

from __future__ import annotations

from textual.widgets import DataTable, Static, TabbedContent

from tui_helpers import fake_catalog, fake_opener, fixture_engine, loaded, ran, run_async, wait_for
from workbench.screens.ab_action import ab_session
from workbench.screens.app import WorkbenchApp
from workbench.session.model import ImplRef, RunSpec, Session, Sweep


def _ab_engine(seen: list):
    """The fixture for runs; for an A/B session, an entry naming what was asked."""
    replay = fixture_engine()

    def engine(session, *, on_event, stop=None, options=None):
        run = session.runs[0]
        if run.compare is None:
            return replay(session, on_event=on_event, stop=stop, options=options)
        seen.append(session)
        a, b = (side.name for side in run.compare)
        return {"ab": [{"run_index": 0, "op": run.op, "a": a, "b": b, "ratio": 10.76, "ci_low": 10.7,
                        "ci_high": 10.8, "confidence": 0.95, "verdict": "slower", "n": 40, "status": "ok"}]}
    return engine


def _text(app, selector: str) -> str:
    return str(app.query_one(selector, Static).render())


@run_async
async def test_diagnosis_pane_shows_findings_and_runs_an_ab_of_two_marked_rows(tmp_path):
    seen: list = []
    app = WorkbenchApp(None, None, engine=_ab_engine(seen), catalog_loader=lambda k, d: fake_catalog(),
                       opener=fake_opener(), data_dir=tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        await pilot.press("6")
        assert app.query_one(TabbedContent).active == "diagnosis"
        table = app.query_one("#diagnosis-table", DataTable)
        assert table.row_count == 6
        assert "unfused" in _text(app, "#diagnosis-detail") and "9 kernels per call" in _text(app, "#diagnosis-detail")
        await pilot.press("a")  # nothing marked: a notice, nothing runs
        assert not seen
        await pilot.press("x", "j", "x", "a")
        await wait_for(pilot, lambda: "A/B" in _text(app, "#ab-results"))
        assert "manual / pytorch = 10.76x" in _text(app, "#ab-results")
        (session,) = seen
        run = session.runs[0]
        assert [r.name for r in run.impls] == ["manual", "pytorch"] and run.actions == ("check",)
        assert run.shape == {"M": 16384, "N": 16384}
        from workbench.screens.panes.diagnosis import DiagnosisPane

        app.query_one(DiagnosisPane).marks = [("manual", 256), ("manual", 1024)]  # two sweep points: no A/B
        await pilot.press("a")
        await pilot.pause()
        assert len(seen) == 1 and any("two sweep points" in str(n.message) for n in app._notifications)


def test_ab_session_of_a_sweep_point_fixes_the_swept_field():
    run = RunSpec(op="softmax", impls=(ImplRef("triton", {"num_warps": 8}, "t8"), ImplRef("pytorch")),
                  shape={"M": 4096, "N": 4096}, sweep=Sweep(("N",), (256, 1024)))
    session = ab_session(Session(name="s", runs=(run,)), run, ("t8", 1024), ("pytorch", 1024))
    (ab,) = session.runs
    assert ab.shape == {"M": 4096, "N": 1024} and ab.sweep is None
    assert ab.impls[0].params == {"num_warps": 8} and [s.name for s in ab.compare] == ["t8", "pytorch"]


def test_two_sweep_points_or_one_implementation_twice_are_no_ab():
    """Two sweep points of one implementation ended in `label 'manual' appears twice` from the
    engine (a new user's try); two implementations at two points silently took A's point."""
    import pytest

    from workbench.screens.panes.diagnosis import ab_pair_problem

    run = RunSpec(op="softmax", impls=(ImplRef("triton"), ImplRef("pytorch")),
                  shape={"M": 4096, "N": 4096}, sweep=Sweep(("N",), (256, 1024)))
    session = Session(name="s", runs=(run,))
    assert ab_pair_problem(("triton", 1024), ("pytorch", 1024)) is None
    assert ab_pair_problem(("triton", None), ("pytorch", None)) is None
    for a, b, words in ((("triton", 256), ("triton", 1024), "triton @ 256 and triton @ 1024 are two sweep points"),
                        (("triton", 256), ("pytorch", 1024), "two sweep points"),
                        (("triton", None), ("triton", None), "both marked rows are triton")):
        assert words in (ab_pair_problem(a, b) or "")
        with pytest.raises(ValueError, match="A/B"):
            ab_session(session, run, a, b)


def test_traffic_pane_measured_cell_and_reason():
    from workbench.counters import unmeasured
    from workbench.screens.model import Row
    from workbench.screens.panes.traffic import measured_cell, summary

    assert measured_cell(None) == "-"
    assert measured_cell(unmeasured("no ncu")) == "n/a"
    assert measured_cell({"reason": None, "dram_bytes": 2 * 2**30, "pct_of_model": 99.6}) == "2 GiB 100%"
    row = Row(label="pytorch", impl="pytorch", record={"traffic": {"bytes": 8}, "measured": unmeasured("no ncu on PATH")})
    assert "counters: no ncu on PATH" in summary([row], None)


def test_traffic_measured_column_only_with_counters():
    from workbench.screens.model import Row
    from workbench.screens.panes.traffic import columns, traffic_cells

    record = {"traffic": {"bytes": 2**31, "bytes_moved_est": 2**31},
              "measured": {"reason": None, "dram_bytes": 2**31, "pct_of_model": 100.0}}
    row = Row(label="pytorch", impl="pytorch", record=record)
    assert "measured" not in columns(False) and columns(True).index("measured") == 4
    assert len(traffic_cells(row, 2**31)) == len(columns(False))
    cells = traffic_cells(row, 2**31, measured=True)
    assert len(cells) == len(columns(True)) and cells[4] == "2 GiB 100%"


@run_async
async def test_a_sweep_points_findings_are_headed_by_its_row_title(tmp_path):
    """The detail under the table named `manual` for `manual @ 1024` (a new user's try)."""
    from workbench.screens.panes.diagnosis import DiagnosisPane

    app = WorkbenchApp(None, None, engine=fixture_engine(), catalog_loader=lambda k, d: fake_catalog(),
                       opener=fake_opener(), data_dir=tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        await pilot.press("6")
        pane = app.query_one(DiagnosisPane)
        pane._keys, pane._findings, pane._reports = [("manual", 1024)], {("manual", 1024): []}, {}
        pane._show_detail()
        assert _text(app, "#diagnosis-detail").startswith("manual @ 1024: nothing to report")


@run_async
async def test_an_ab_shows_in_the_run_bar_while_it_runs_and_says_how_it_ended(tmp_path):
    """While an A/B runs the run bar looks as during a run (Run off, Cancel on) and names it;
    cancelled (escape), it says so: it kept an idle look, then `cancelling…` until the next run
    (a new user's try)."""
    import threading

    from textual.widgets import Button

    gate = threading.Event()
    timing = _ab_engine([])

    def engine(session, *, on_event, stop=None, options=None):
        if session.runs[0].compare is not None:
            gate.wait(10)
            if stop is not None and stop.is_set():
                return {"ab": [], "cancelled": True}
        return timing(session, on_event=on_event, stop=stop, options=options)

    app = WorkbenchApp(None, None, engine=engine, catalog_loader=lambda k, d: fake_catalog(),
                       opener=fake_opener(), data_dir=tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        await pilot.press("6", "x", "j", "x", "a")
        await wait_for(pilot, lambda: app.running)
        bar = app.run_bar
        assert "A/B manual vs pytorch" in bar.status
        assert app.query_one("#run", Button).disabled and not app.query_one("#cancel", Button).disabled
        await pilot.press("r")  # ignored without a word (a new user's try): it says why
        await pilot.pause()
        assert any("the A/B manual vs pytorch is timing" in str(n.message) for n in app._notifications)
        await pilot.press("escape")
        gate.set()
        await wait_for(pilot, lambda: not app.running)
        assert bar.status == "A/B cancelled"
        assert not app.query_one("#run", Button).disabled and app.query_one("#cancel", Button).disabled
