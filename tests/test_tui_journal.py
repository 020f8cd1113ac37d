"""The TUI's results file gets the replay's treatment: each finished row goes to a journal beside
NAME.results.json as it arrives, so a run the app never saw end (a crash, a kill) loses no
finished row; the next open folds those rows in (workbench/results/journal.py)."""

from __future__ import annotations

import json
import threading
import time

import pytest

from tui_helpers import dies_after_the_first_row, fake_catalog, fake_opener, fixture_engine, loaded, ran, run_async, wait_for

from workbench import events as ev
from workbench.results import journal
from workbench.screens import runner, sessions_io
from workbench.screens.app import WorkbenchApp


@run_async
async def test_a_row_finished_before_a_crash_is_in_the_journal_and_recovered(tmp_path):
    app = WorkbenchApp(None, None, engine=dies_after_the_first_row(),
                       catalog_loader=lambda kernels, device: fake_catalog(), opener=fake_opener(), data_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        index = app._running_index if app._running_index is not None else 0
        results = sessions_io.results_file(app.ws.path, tmp_path, app.ws.session.name)
    kept = journal.journal_path(results)
    assert kept.is_file() and not results.exists(), "the run never finished: only its journal is there"
    rows = journal.from_jsonl(kept.read_text())["results"]
    assert len(rows) == 1 and rows[0]["status"] == "ok" and rows[0]["run_index"] == index
    doc, notes = sessions_io._recover_rows(results)
    assert [r["label"] for r in doc["results"]] == [rows[0]["label"]] and "recovered 1 finished row" in notes[0]
    assert json.loads(results.read_text())["results"] == doc["results"] and not kept.exists()


@run_async
async def test_a_run_that_ends_leaves_no_journal(tmp_path):
    app = WorkbenchApp(None, None, engine=fixture_engine(), catalog_loader=lambda kernels, device: fake_catalog(),
                       opener=fake_opener(), data_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        results = sessions_io.results_file(app.ws.path, tmp_path, app.ws.session.name)
    assert results.is_file() and not journal.journal_path(results).exists()


def test_recover_replaces_rows_by_key_and_keeps_the_others(tmp_path):
    results = tmp_path / "s.results.json"
    saved = {"schema_version": 1, "results": [{"run_index": 0, "label": "a", "sweep_value": None, "status": "ok"},
                                              {"run_index": 1, "label": "b", "sweep_value": 2, "status": "failed"}]}
    kept = journal.Journal(journal.journal_path(results), {"provenance": {}, "environment": {}})
    kept.add({"run_index": 1, "label": "b", "sweep_value": 2, "status": "ok"})
    kept.add({"run_index": 1, "label": "c", "sweep_value": None, "status": "ok"})
    kept.close()
    doc, count = journal.recover(results, saved)
    assert count == 2
    assert [(r["label"], r["status"]) for r in doc["results"]] == [("a", "ok"), ("b", "ok"), ("c", "ok")]
    assert journal.recover(tmp_path / "other.json", saved) == (saved, 0)


def test_results_shown_at_open_say_when_and_where_they_were_measured():
    from workbench.screens.sessions_io import saved_results_note

    doc = {"provenance": {"started": "2026-12-01T13:41:02Z", "git_sha": "45ec676"},
           "environment": {"device": "cpu"}, "results": [{"status": "ok"}, {"status": "ok"}]}
    (note,) = saved_results_note(doc)
    assert note == "results of 2026-12-01T13:41:02Z (cpu, workbench 45ec676) are shown (2 row(s)); r measures again"
    assert saved_results_note({"results": []}) == () and saved_results_note(None) == ()


@run_async
async def test_events_and_the_run_end_during_shutdown_raise_nothing_and_the_results_are_written(tmp_path):
    """What a real worker's stream does when q ends the app mid-run: events and the run's end are
    handled after Textual's shutdown began (App._shutdown: not running, screens being removed).
    NoMatches from a pane ended the app with a traceback, and the document went unwritten."""
    from workbench.screens.messages import EngineEvent, RunDone
    from workbench.screens.run_bar import RunBar
    from tui_helpers import GELU_H200

    doc = json.loads(GELU_H200.read_text())["doc"]
    app = WorkbenchApp(None, None, engine=fixture_engine(), opener=fake_opener(), data_dir=tmp_path,
                       catalog_loader=lambda kernels, device: fake_catalog())
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await ran(pilot)  # the run's model exists
        app._running_index = 0
        results = sessions_io.results_file(app.ws.path, tmp_path, app.ws.session.name)
        await app.query_one(RunBar).remove()
        app._running = False  # what App._shutdown does first
        try:
            record = doc["results"][0]
            app.on_engine_event(EngineEvent(ev.Started((0, record["label"], None), "gelu", "x", "x", "cpu")))
            app.on_engine_event(EngineEvent(ev.Result((0, record["label"], None), record)))
            results.unlink()
            app.on_run_done(RunDone(doc, 0, True))
            assert results.is_file()
            app._running = True
            with pytest.raises(Exception, match="RunBar"):  # while running, a missing pane is a bug
                app.on_engine_event(EngineEvent(ev.Started((0, record["label"], None), "gelu", "x", "x", "cpu")))
        finally:
            app._running = True


@run_async
async def test_quit_mid_run_writes_the_cancelled_runs_results_before_the_app_exits(tmp_path):
    """q then y mid-run left only the journal (the app exited before the run's end arrived); the
    results document waited for the next open (journal.recover)."""
    inner = fixture_engine()

    def engine(session, *, on_event, stop=None, options=None):
        def relay(event):
            on_event(event)
            if isinstance(event, ev.Result) and stop is not None and not stop.is_set():
                stop.wait(10)  # the rows after the first only once the quit cancelled: the run cannot end first
                time.sleep(0.5)  # and a cancel takes a while (a worker finishing its row)
        return inner(session, on_event=relay, stop=stop, options=options)

    app = WorkbenchApp(None, None, engine=engine, opener=fake_opener(), data_dir=tmp_path,
                       catalog_loader=lambda kernels, device: fake_catalog())
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: app._done >= 1)  # a row finished, the others to come
        results = sessions_io.results_file(app.ws.path, tmp_path, app.ws.session.name)
        await pilot.press("q", "y")
        await wait_for(pilot, lambda: not app.is_running, timeout_s=runner.QUIT_WAIT_S + 10)
    doc = json.loads(results.read_text())
    statuses = [r["status"] if journal.is_finished(r) else "not run" for r in doc["results"]]
    assert doc["cancelled"] is True and "ok" in statuses and "not run" in statuses
    assert not journal.journal_path(results).exists()


@run_async
async def test_quit_mid_run_waits_no_longer_than_quit_wait_s_for_a_run_that_does_not_end(tmp_path, monkeypatch):
    """A run whose end never comes (a worker that does not answer the stop): the app exits after
    QUIT_WAIT_S as it did at once before, the run's finished rows in its journal."""
    monkeypatch.setattr(runner, "QUIT_WAIT_S", 0.5)
    release = threading.Event()
    inner = fixture_engine()

    def engine(session, *, on_event, stop=None, options=None):
        def relay(event):
            on_event(event)
            if isinstance(event, ev.Result):
                release.wait(30)  # deaf to the stop
        return inner(session, on_event=relay, stop=None, options=options)

    app = WorkbenchApp(None, None, engine=engine, opener=fake_opener(), data_dir=tmp_path,
                       catalog_loader=lambda kernels, device: fake_catalog())
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await loaded(pilot)
            await pilot.press("r")
            await wait_for(pilot, lambda: app._done >= 1)
            results = sessions_io.results_file(app.ws.path, tmp_path, app.ws.session.name)
            asked = time.monotonic()
            await pilot.press("q", "y")
            await wait_for(pilot, lambda: not app.is_running, timeout_s=10)
            waited = time.monotonic() - asked
    finally:
        release.set()  # the run's thread ends (asyncio.run waits for it)
    assert 0.5 <= waited < 0.5 + 3, waited  # QUIT_WAIT_S, and a loaded 2-core box's slack
    assert not results.exists() and len(journal.from_jsonl(journal.journal_path(results).read_text())["results"]) == 1


def test_a_stopped_runs_journal_makes_a_cancelled_document_of_that_run_with_unreached_rows_kept(tmp_path):
    """A kill (or a quit whose run did not end within QUIT_WAIT_S) leaves only the journal; folded in at the next open, the file
    was the earlier run's (its start time, `cancelled` false) with the rows the stopped run never
    reached unflagged, as if measured by it (a new user's try). Now: the journal's provenance and
    environment, `cancelled`, and each unreached row of that run flagged kept from an earlier run;
    the other runs' rows as they were."""
    from workbench.results.record import Flag, flag_kinds

    results = tmp_path / "s.results.json"
    saved = {"schema_version": 1, "cancelled": False, "provenance": {"started": "2026-12-07T13:14:05Z"},
             "environment": {"device": "cpu"},
             "results": [{"run_index": 0, "label": "manual", "sweep_value": None, "status": "ok"},
                         {"run_index": 0, "label": "triton", "sweep_value": None, "status": "ok"},
                         {"run_index": 1, "label": "other", "sweep_value": None, "status": "ok"}]}
    stopped = journal.Journal(journal.journal_path(results), {"provenance": {"started": "2026-12-07T13:20:00Z"},
                                                              "environment": {"device": "cpu"}})
    stopped.add({"run_index": 0, "label": "manual", "sweep_value": None, "status": "ok", "n": 2})
    stopped.close()
    doc, count = journal.recover(results, saved)
    assert count == 1 and doc["cancelled"] is True and doc["provenance"]["started"] == "2026-12-07T13:20:00Z"
    by = {r["label"]: r for r in doc["results"]}
    assert by["manual"]["n"] == 2 and not by["manual"].get("flags")  # measured by the stopped run
    assert Flag.KEPT in flag_kinds(by["triton"]["flags"])  # never reached: the earlier record, flagged
    assert not by["other"].get("flags")  # another run's row: untouched
    assert journal.flag_kept(journal.flag_kept(by["manual"]))["flags"] == [Flag.KEPT.template]  # once
