"""Running: the run on screen goes through the engine's `run_plan` in a thread worker; its events
come back as messages, are folded into the run's RunModel, and reach the panes a few times a
second (every event is kept; only redraws are throttled, so keys are never dropped). `escape`
sets the stop flag; a failure is a notification and a Log entry.

The app keeps one pool of warm workers (engine/workers.py) for its whole life: the worker for
the session's first run starts when the session is on screen, and every run reuses it, so `r`
after an edit costs the kernel, not a process start. The pool closes when the app unmounts
(quit, hang-up); a killed app takes its workers with it (parent-death signal)."""

from __future__ import annotations

import dataclasses
import sys
import threading
from pathlib import Path
import time
import traceback
from collections import Counter

from workbench import events as ev
from workbench.results import journal
from workbench.results.record import read_record
from textual import work
from textual.css.query import NoMatches

from . import editing, fmt, heap, sessions_io
from .devices_view import DeviceProgress
from .messages import CancelRequested, EngineEvent, EngineEvents, RunCrashed, RunDone, RunRequested
from .panes.log import describe
from .spec_editor import SpecEditor

REFRESH_S = 0.2  # panes redraw at most this often while events stream
# ...and at most this share of the time: a redraw that took 60 ms (charts on a loaded 2-core host)
# waits 5x that before the next, so key presses queued behind redraws are answered first.
REDRAW_SHARE = 0.2
# A key press is answered before the redraw timer's work (issue #39: a pane key that met a
# streamed-result redraw or the collector's tick waited for it, the MAX of the tmux measure):
# for KEY_FIRST_S after a key reaches the app (its frame: 15-55 ms on the H100 box, 20-100 ms
# on the loaded 2-core CPU) the timer leaves both to its next tick (0.2 s later), unless they
# have waited KEY_WAIT_MAX_S already (a key held down, typing: results and collections go on).
KEY_FIRST_S = 0.15
KEY_WAIT_MAX_S = 0.6
# The interpreter's switch interval while a run streams: the run's thread (unpickling and
# diagnosing each result, reading the worker's log) held the GIL for up to Python's default
# 5 ms each time the UI thread let it go (at every select of the event loop), and a key press
# waited for it several times over; with 1 ms the UI thread gets it back 5x sooner.
RUN_SWITCH_S = 0.001
# q then "yes" mid-run cancels the run and waits at most this long for its end before exiting, so
# the results file gets the cancelled run's document (cancelled: true, the rows finished so far):
# the engine's cancel is finished within 3 s (docs/CONTRACTS.md, "Isolation and events"). Past
# it the app exits anyway; the run's journal keeps its finished rows for the next open.
QUIT_WAIT_S = 3.0


class RunnerMixin:
    """Mixed into WorkbenchApp."""

    def _init_runner(self) -> None:
        self._stop: threading.Event | None = None
        self._running_index: int | None = None
        self._run_t0: float | None = None  # monotonic start of the run in flight
        self._journal: journal.Journal | None = None  # finished rows of the run in flight, on disk
        self._done = self._total = 0
        self._devices = DeviceProgress()
        self._dirty = False
        self._next_redraw = 0.0  # monotonic time before which a streaming run is not redrawn
        self._force = False     # the next run admits rows estimated too large (F)
        self.runs_finished = 0  # runs that ended (done, cancelled or crashed)
        self._run_pending = False  # r pressed before the session had opened: run once it has
        self._queue: list[int] = []  # R: the session's runs still to run after the one in flight
        self._all: Counter | None = None  # R in progress: row statuses of the runs it finished ("runs": count)
        self._session_shown = False  # set when the first session is on screen
        self._pool = None  # the app's warm workers (created with the first session on screen)
        self._ahead = None  # (session, engine Background): every run's kernels compiling ahead
        self._ahead_lock = threading.Lock()
        self._inbox: list[ev.Event] = []  # engine events not yet handled (_post_event)
        self._inbox_posted = False  # an EngineEvents message is on its way for them
        self._inbox_lock = threading.Lock()
        self._key_at: float | None = None  # monotonic time the last key press reached the app
        self._events_held_at: float | None = None  # since when the inbox waits for keys' frames (on_engine_events)
        self._ticked_at = 0.0  # monotonic time flush_results last did its work (not held back by a key)
        self._switch_before: float | None = None  # sys.getswitchinterval() before the run in flight
        self.quitting = False  # quit asked mid-run: the app exits at the run's end (quit_after_run)

    @property
    def running(self) -> bool:
        return self._stop is not None

    @property
    def running_shown(self) -> bool:
        """A run is in flight and it is the run on screen (another run picked meanwhile is not)."""
        return self.running and self.ws.index == self._running_index

    # -- starting and stopping --------------------------------------------------------------
    def action_force_run(self) -> None:
        """Run anyway: rows the engine estimates too large are run too (the CLI's --force)."""
        self._force = True
        try:
            self.action_run()
        finally:
            self._force = False

    def action_run(self) -> None:
        if self.quitting or self._highlight_to_run():
            return
        self._run_on_screen()

    def _run_on_screen(self) -> None:
        """Start the run on screen, or say why it cannot start."""
        ws = self.ws
        if ws.catalog is None and getattr(self, "load_error", None):
            self.report(f"nothing to run: the ops could not be loaded: {self.load_error}")
        elif (ws.run is None or ws.op is None) and not self._session_shown:
            self._run_pending = True
            self.notify("still loading: the run starts as soon as the session is open")
        elif ws.run is None or ws.op is None:
            self.notify("nothing to run: pick an op in the list first", severity="warning")
        elif self.running:
            self.notify("a run is in progress (escape cancels it)", severity="warning")
        elif self.query_one(SpecEditor).problem:
            self.report(f"not run: {self.query_one(SpecEditor).problem} (fix the field first)")
        else:
            self._start()

    def action_run_all(self) -> None:
        """R: every run of the session in order, one after another, each as `r` runs it (its rows
        on screen and in the results file as they finish). escape cancels the run in flight and
        the ones after it; a run that cannot start (a field being fixed) stops the rest. A new
        run on screen (`+ op`) is not in the session: `r` runs it (and adds it)."""
        ws = self.ws
        if self.quitting:
            return
        if self.running:
            self.notify("a run is in progress (escape cancels it)", severity="warning")
            return
        if ws.catalog is None or not ws.session.runs:
            self.notify("nothing to run: the session has no runs yet (r runs the one on screen)", severity="warning")
            return
        problem = self.query_one(SpecEditor).problem
        if problem:  # showing run 0 would refill the editor: the typed text lost without a word
            self.report(f"not run: {problem} (fix the field first)")
            return
        self._queue, self._all = list(range(len(ws.session.runs))), Counter(total=len(ws.session.runs))
        self.log_pane.add(f"running all {len(self._queue)} run(s) of the session in turn (escape cancels)")
        self._next_queued()

    def _next_queued(self) -> None:
        """Show and start the next run R queued (after the previous one's results are in)."""
        if not self._queue:
            return
        index = self._queue.pop(0)
        if index >= len(self.ws.session.runs):  # runs deleted meanwhile (not while running: refused)
            self._queue = []
            return
        self.call_later(self._pick_queued, index)

    async def _pick_queued(self, index: int) -> None:
        await self.pick("run", index)
        self._run_on_screen()  # not action_run: the Runs list's highlight is not what R runs
        if not self.running and self._queue:  # refused (a field with a problem): say where it stopped
            self.report(f"run all stopped at run {index}: {len(self._queue)} run(s) after it not run", "warning")
            self.drop_queue()

    def queued_runs(self) -> int:
        """How many runs R has still to start after the one in flight."""
        return len(self._queue)

    def drop_queue(self) -> None:
        """R's runs not started yet will not start (quit)."""
        self._queue, self._all = [], None

    def resume_queue(self) -> None:
        """Start R's next run if it was held (the quit question was open when the last one ended)."""
        if self._queue and not self.running:
            self._next_queued()

    def _highlight_to_run(self) -> bool:
        """`r` in the Runs list runs what is highlighted there, not the run on screen (which
        changes only on Enter) after a move to another run. True
        when that one is picked first (the run starts once it is on screen)."""
        from .sidebar import OpList

        try:
            runs = self.query_one("#op-list", OpList)
        except NoMatches:
            return False
        if self.focused is not runs or runs.highlighted is None or self.running or self.ws.catalog is None:
            return False
        wanted = runs.get_option_at_index(runs.highlighted).id or ""
        kind, _, value = wanted.partition(":")
        if kind not in ("run", "op") or wanted == self.ws.current_id:
            return False
        self.call_later(self._pick_then_run, kind, int(value) if kind == "run" else value, self._force)
        return True

    async def _pick_then_run(self, kind: str, value, force: bool) -> None:
        await self.pick(kind, value)
        self._force = force  # R (run anyway) stays R across the pick
        try:
            self.action_run()
        finally:
            self._force = False

    def run_if_pending(self) -> None:
        """The session is on screen: start the run asked for (r) while it was loading."""
        self._session_shown = True
        self._warm_up()
        if self._run_pending:
            self._run_pending = False
            self.action_run()

    def forget_pending_run(self) -> None:
        """Nothing will open (loading failed): drop an r pressed while loading."""
        self._run_pending, self._session_shown = False, True

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        """Dim Run while a run is in flight and Cancel while none is (the footer shows it)."""
        if action in ("run", "force_run") and self.running:  # (R, not in the footer, says why instead)
            return None
        if action == "cancel" and not self.running:
            return None
        return True

    def _start(self) -> None:
        ws = self.ws
        self._done, self._total = 0, editing.row_count(ws.run, ws.op)
        self._devices = DeviceProgress()
        sub, index = ws.begin_run()
        self._journal = journal.open_beside(sessions_io.results_file(ws.path, self.data_dir, ws.session.name),
                                            {"provenance": {"session": ws.session.name}})  # rows kept as they finish
        self._stop, self._running_index = threading.Event(), index
        self._run_t0 = time.monotonic()  # the run's wall time goes in the Log with its summary
        if self._switch_before is None:
            self._switch_before = sys.getswitchinterval()
            sys.setswitchinterval(min(RUN_SWITCH_S, self._switch_before))
        self.run_bar.running = True
        self.refresh_bindings()
        self.run_bar.progress(0, self._total)
        queued = f" ({len(self._queue)} more queued by R)" if self._queue else ""
        self.run_bar.status = f"starting {editing.label(ws.run, ws.op)}{queued}"
        self.log_pane.add(f"run {index}: {editing.label(ws.run, ws.op)}{queued}")
        self.show_results()
        self.show_op_list()
        self.schedule_autosave()
        self._check_ahead(ws.session)
        self._worker(sub, index, self._stop, self._force)

    def action_cancel(self) -> None:
        if self.running and not self._stop.is_set():
            if self._queue:
                self.log_pane.add(f"run all: the {len(self._queue)} run(s) after this one will not run", "warning")
            self._queue = []
            self.stop_run()
            self.run_bar.status = "cancelling…"
            self.log_pane.add("cancel requested", "warning")

    def stop_run(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def quit_after_run(self) -> None:
        """Quit mid-run: the run is cancelled and the app exits once its results document is
        written (on_run_done) or its failure shown, or after QUIT_WAIT_S when its end does not
        come (the journal keeps its finished rows). No run starts meanwhile; q exits at once."""
        self.quitting = True
        self.drop_queue()
        self.action_cancel()
        self.run_bar.status = "cancelling… then quitting"
        self.set_timer(QUIT_WAIT_S, lambda: self.exit(0))

    def on_run_requested(self, message: RunRequested) -> None:
        self.action_run()

    def on_cancel_requested(self, message: CancelRequested) -> None:
        self.action_cancel()

    # -- the worker ---------------------------------------------------------------------------
    def _engine_pool(self):
        """The app's pool of warm workers, made on first use (only for the real engine, watched or
        not: screens/watching.py)."""
        if self._pool is None and (self._engine is None or getattr(self, "_watch_real", False)):
            from .options import new_pool

            self._pool = new_pool(self._options)
        return self._pool

    @work(thread=True, exit_on_error=False, group="warm")
    def _warm_up(self) -> None:
        """Start the worker the session's first run needs, before `r` is pressed."""
        pool = self._engine_pool()
        if pool is None or not self.ws.session.runs:
            return
        from .options import prestart

        try:
            # plugins as the run resolves them (workspace.commit): relative to the session's folder
            from workbench.plugins.sources import with_resolved_plugins

            base = self.ws.path.parent if self.ws.path is not None else Path.cwd()
            session = self.ws.session
            resolved = with_resolved_plugins(session, base)
            prestart(pool, self._options, resolved)
        except Exception as exc:  # a plugin that fails: the run says so again when asked for
            self.call_from_thread(self.log_pane.add, f"worker not started: {exc}", "warning")
            return
        self._build_ahead(pool, session, resolved)

    def _build_ahead(self, pool, session, resolved) -> None:
        """Every run's Triton and CUDA kernels compiled in a build worker from the moment the
        session opens (engine/plan.build_session_ahead: only where that cannot disturb timing):
        the app runs one run per `r`, so a run's own build-ahead started only with it."""
        from workbench.engine.plan import build_session_ahead
        from workbench.engine.options import RunOptions

        try:
            job = build_session_ahead(resolved, self._options or RunOptions(), pool)
        except Exception as exc:  # noqa: BLE001 - the run builds what it needs itself
            self.call_from_thread(self.log_pane.add, f"not built ahead: {exc}", "warning")
            return
        if job is None:
            return
        with self._ahead_lock:
            if self._pool is pool:
                self._ahead = (session, job)
                job = None
        if job is not None:  # the app closed meanwhile
            job.finish()
        else:
            self.call_from_thread(self.log_pane.add, "building every run's kernels ahead")

    def _check_ahead(self, session) -> None:
        """Before a run: a finished session build gives its worker back (its lines to the Log);
        one still compiling keeps on only while the session is the one it was started for (an
        edit may have made a row launch-bound, which is timed with nothing compiling beside it)."""
        with self._ahead_lock:
            ahead = self._ahead
            if ahead is None or (not ahead[1].poll() and ahead[0] == session):
                return
            self._ahead = None
        for line in ahead[1].finish():
            self.log_pane.add(line)

    def close_workers(self) -> None:
        """Stop the app's workers (called when the app unmounts)."""
        with self._ahead_lock:
            pool, self._pool = self._pool, None
            ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead[1].finish()
        if pool is not None:
            pool.close()

    @work(thread=True, exit_on_error=False, group="run")
    def _worker(self, session, index: int, stop: threading.Event, force: bool = False) -> None:
        """Call the engine; everything it says is posted to the app (thread-safe)."""
        from .options import for_run

        try:
            if self._engine is not None:  # a test's engine: the options only when there are some
                kwargs = {"options": for_run(self._options, force)} if self._options is not None or force else {}
                doc = self._engine(session, on_event=self._post_event, stop=stop, **kwargs)
            else:
                doc = _run_plan(session, on_event=self._post_event, stop=stop,
                                options=for_run(self._options, force), workers=self._engine_pool())
        except BaseException as exc:  # noqa: BLE001 - any failure becomes a notification
            self.post_message(RunCrashed(f"run failed: {type(exc).__name__}: {exc}", traceback.format_exc()))
            return
        self.post_message(RunDone(doc or {}, index, stop.is_set()))

    def _post_event(self, event: ev.Event) -> None:
        """From the run's thread: the event joins the inbox; one EngineEvents message is posted
        for all that arrive before the app handles it (issue #39: a key waited behind every
        event of a streaming burst; each one is still applied, in order)."""
        with self._inbox_lock:
            self._inbox.append(event)
            if self._inbox_posted:
                return
            self._inbox_posted = True
        self.post_message(EngineEvents())

    # -- its messages -----------------------------------------------------------------------
    def on_engine_events(self, message: EngineEvents) -> None:
        """The inbox's events, applied in order; within KEY_FIRST_S of a key press they wait for
        the key's frame (a row's end applies a burst of them: its record, profile, diagnosis and
        Log lines, each a Log render, while the key's layout and frame waited: the slowest pane
        keys of the tmux measure on the H100), KEY_WAIT_MAX_S at most while keys keep coming."""
        now = time.monotonic()
        if self.key_pending(now):
            held = self._events_held_at = self._events_held_at or now
            if now - held < KEY_WAIT_MAX_S:
                wait = KEY_FIRST_S - (now - (self._key_at or now))
                self.set_timer(max(wait, 0.005), lambda: self.post_message(EngineEvents()))
                return
        self._apply_inbox()

    def _apply_inbox(self) -> None:
        """Every event in the inbox, in order (a run's end applies what is held first)."""
        self._events_held_at = None
        with self._inbox_lock:
            events, self._inbox, self._inbox_posted = self._inbox, [], False
        for event in events:
            self._apply_event(event)

    def on_engine_event(self, message: EngineEvent) -> None:
        self._apply_event(message.event)

    def _apply_event(self, event: ev.Event) -> None:
        if isinstance(event, ev.Result):  # the record read into a Record once: the panes read its fields
            event = dataclasses.replace(event, record=read_record(event.record))
        self.ws.models[self._running_index].apply(event)
        try:
            self._progress(event)
            line = describe(event)
            if line:
                self.log_pane.add(*line)
        except NoMatches:
            if not self._closing_down():  # (a Result is in the journal before the bar is touched)
                raise
        self._dirty = True

    def _closing_down(self) -> bool:
        """Whether the app is exiting: an event or a timer after its widgets went (the run is
        being stopped) finds no pane; that is no error."""
        return bool(self._exit or self._closing or self._closed or not self.is_running)

    def _progress(self, event: ev.Event) -> None:
        self._devices.apply(event)  # rows on several devices: a progress line per device
        per_device = self._devices.line()
        if isinstance(event, ev.Started):
            where = event.row[1] if event.row[2] is None else f"{event.row[1]} @ {event.row[2]}"
            self.run_bar.status = (f"{self._done + 1}/{self._total} · {per_device}" if per_device else
                                   f"{self._done + 1}/{self._total} {where} · {event.spec_label} · {event.device}")
        elif isinstance(event, ev.Result):
            if self._journal is not None:
                self._journal.add({**event.record.to_dict(), "run_index": self._running_index})
            self._done += 1
            self.run_bar.progress(self._done, self._total)

    def key_arrived(self) -> None:
        """A key press reached the app: the redraw timer's work waits KEY_FIRST_S (flush_results)."""
        self._key_at = time.monotonic()

    def key_pending(self, now: float) -> bool:
        """Whether a key arrived less than KEY_FIRST_S before `now` (its frame comes first)."""
        return self._key_at is not None and now - self._key_at < KEY_FIRST_S

    def flush_results(self) -> None:
        """Called on a timer: redraw the panes if events arrived since the last redraw, no more
        often than REDRAW_SHARE of the time allows (events are all kept; only redraws wait).
        Within KEY_FIRST_S of a key press neither the redraw nor the collector runs (the key's
        frame first): the next tick does them (held back KEY_WAIT_MAX_S at most)."""
        now = time.monotonic()
        if self.key_pending(now) and now - self._ticked_at < KEY_WAIT_MAX_S:
            return
        self._ticked_at = now
        heap.tick(now, running=self.running)  # the collector runs here, between frames
        if not self._dirty or now < self._next_redraw:
            return
        self._dirty = False
        if self.ws.index == self._running_index:
            try:
                self.show_results(shown_only=self.running)
            except NoMatches:
                if not self._closing_down():
                    raise
                return  # the timer fired after the panes went
            self._next_redraw = now + (time.monotonic() - now) / REDRAW_SHARE

    def on_run_done(self, message: RunDone) -> None:
        """The run's document is written even when the app is exiting (its end handled after
        the panes went); only what is shown is skipped then. A quit mid-run exits here, once it
        is written (quit_after_run)."""
        self._apply_inbox()  # the run's last events first (held while a key's frame came first)
        doc = self.ws.finish(message.doc, message.run_index)
        try:
            self._show_run_done(message)
        except NoMatches:
            if not self._closing_down():
                raise
        self._write_results(doc)
        self.call_after_refresh(heap.settle)  # the run's objects out of the next run's collections
        if message.cancelled or self._closing_down():
            self._queue = []
        if self._all is not None:
            self._all.update("cancelled" if r.get("status") == "skipped" and r.get("error") == "cancelled"
                             else r.get("status") or "?" for r in message.doc.get("results", ()))
            self._all["runs"] += 1
            if not self._queue:
                self._end_run_all(message.cancelled)
        if self._queue and not self.quit_asked():  # held while quit is asked (resume_queue on "no")
            self._next_queued()
        if self.quitting:
            self.exit(0)

    def _end_run_all(self, cancelled: bool) -> None:
        """R's summary over every run it ran: runs, then rows by status (the last run's own
        summary said only its rows)."""
        counts, self._all = self._all, None
        runs, total = counts.pop("runs", 0), counts.pop("total", 0)
        rows = ", ".join(f"{n} {status}" for status, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        ran = f"{runs} run(s)" if runs == total else f"{runs} of {total} run(s) ({total - runs} not started)"
        text = f"run all{' (cancelled)' if cancelled else ''}: {ran}, {sum(counts.values())} row(s): {rows}"
        try:
            self.run_bar.status = text
            self.log_pane.add(text, "warning" if cancelled or counts.get("failed") else "info")
        except NoMatches:
            pass  # exiting: no pane to say it in

    def _show_run_done(self, message: RunDone) -> None:
        self._finished()
        self.run_bar.progress(self._total, self._total)
        kept = 0
        if message.cancelled:
            from workbench.results.record import Flag, has_flag

            from .sessions_io import row_identity

            cancelled = {row_identity(r) for r in message.doc.get("results", ()) if not journal.is_finished(r)}
            kept = sum(has_flag(r, Flag.KEPT) and row_identity(r) in cancelled
                       for r in (self.ws.saved_results or {}).get("results", ())
                       if r.get("run_index") == message.run_index)
        self.run_bar.status = summary(message.doc, message.cancelled, kept)
        took = f" · took {duration(time.monotonic() - self._run_t0)}" if self._run_t0 is not None else ""
        self.log_pane.add(f"run {message.run_index} {self.run_bar.status}{took}",
                          "warning" if was_cancelled(message.doc, message.cancelled) else "info")
        if kept:
            self.log_pane.add(f"{kept} row(s) the cancel left unmeasured show their earlier results (kept in the "
                              "results file, flagged 'kept from an earlier run')", "warning")
        failed = sum(r.get("status") == "failed" for r in message.doc.get("results", ()))
        if failed:  # one notice for the run; each error is in the Log pane and the row's detail
            self.notify(f"{failed} row(s) failed: the errors are in the Log pane (5) and under the "
                        f"results table", severity="error", timeout=6)
        too_large = [r for r in message.doc.get("results", ())
                     if r.get("status") == "skipped" and fmt.CLI_FORCE_HINT in (r.get("error") or "")]
        if too_large:
            self.report(f"{len(too_large)} row(s) skipped as too large for this machine: "
                        f"press F (or \"Run anyway\" in ctrl+p) to run them anyway", "warning")

    def on_run_crashed(self, message: RunCrashed) -> None:
        self._apply_inbox()
        model = self.ws.models.get(self._running_index) if self._running_index is not None else None
        if model is not None:  # the rows it never reached are not listed as still queued
            model.drop_unreached()
        if self._queue:
            self.log_pane.add(f"run all stopped: the {len(self._queue)} run(s) after the one that failed did "
                              "not run", "warning")
        self.drop_queue()
        self._finished()
        self.run_bar.status = "run failed (see Log)"
        self.report(message.error)
        for line in message.details.rstrip().splitlines():
            self.log_pane.add(line, "error")
        if self.quitting:
            self.exit(0)

    def _finished(self) -> None:
        self.runs_finished += 1
        self._stop = None
        self.restore_switch_interval()
        self.run_ended_while_asked()
        self.run_bar.running = False
        self.refresh_bindings()
        self._dirty = False
        if self.ws.index == self._running_index:
            self.show_results()

    def restore_switch_interval(self) -> None:
        """The interpreter's switch interval as it was before the run (RUN_SWITCH_S)."""
        if self._switch_before is not None:
            sys.setswitchinterval(self._switch_before)
            self._switch_before = None

    def _write_results(self, doc: dict) -> None:
        path = sessions_io.results_file(self.ws.path, self.data_dir, self.ws.session.name)
        try:
            sessions_io.write_results(doc, path)
        except (OSError, ValueError) as exc:
            if self._closing_down():  # no pane left to say it in; the journal keeps the rows
                print(f"workbench: results not written: {exc}", file=sys.stderr)
            else:
                self.report(f"results not written: {exc}", "warning")
            return
        if self._journal is not None:
            self._journal.discard()  # the results file holds its rows now
        if not self._closing_down():
            # the file's name first and whole: a path folded at 80 columns split the name (".re|sults.json")
            self.log_pane.add(f"wrote {path.name} in {fmt.short_folder(path.parent)}")


def summary(doc: dict, cancelled: bool, kept: int = 0) -> str:
    """'done: 4 ok, 2 unavailable'; 'cancelled: 2 ok, 4 not run (3 kept)' (kept: the rows a
    cancel left unmeasured that keep an earlier record, sessions_io.merge_results; the Log says
    so in full). A cancel that came after every row had finished is 'done' ('cancelled: 4 ok'
    read as if something had been lost)."""
    counts = Counter(r.get("status", "?") if journal.is_finished(r) else "not run" for r in doc.get("results", ()))
    parts = ", ".join(f"{n} {status}" for status, n in counts.items()) or "no rows"
    earlier = f" ({kept} kept)" if kept else ""  # short: the run bar has ~35 cells at 80 columns
    return f"{'cancelled' if was_cancelled(doc, cancelled) else 'done'}: {parts}{earlier}"


def was_cancelled(doc: dict, cancelled: bool) -> bool:
    """Whether a cancel cut the run: asked for, and some row did not finish (or none came)."""
    rows = doc.get("results", ())
    return cancelled and (not rows or any(not journal.is_finished(r) for r in rows))


def duration(seconds: float) -> str:
    """'8.2 s', '2 min 05 s': a run's wall time for the Log."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def _run_plan(session, **kwargs) -> dict:
    from workbench.engine.plan import run_plan

    return run_plan(session, **kwargs)
