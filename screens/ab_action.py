"""A/B from the TUI: two marked rows of the Diagnosis pane timed round-robin in one worker.

The request becomes a one-run session of its own (the run's op, shape, dtype and settings; the
two rows' implementations with their params; actions [check]; `compare: [A, B]`) run through the
same engine call as a run, in a thread worker. Only its A/B entries come back to the screen (the
run's own rows keep their results); they join the run's RunModel (`ab`) and the Log.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from textual import work
from textual.message import Message

from workbench.results.report_diagnosis import ab_line
from workbench.session.model import ABSide, ImplRef, RunSpec, Session

from .panes.diagnosis import DiagnosisPane, ab_pair_problem


class CompareDone(Message):
    """The A/B run ended: its `ab` entries, or the error that stopped it."""

    def __init__(self, entries: list[dict], error: str | None = None) -> None:
        super().__init__()
        self.entries, self.error = entries, error


def ab_session(session: Session, run: RunSpec, a: tuple[str, Any], b: tuple[str, Any]) -> Session:
    """The one-run session that times rows `a` and `b` ((label, sweep_value)) of `run`.

    Raises ValueError for a pair that is no A/B (diagnosis.ab_pair_problem: two sweep points,
    one implementation twice)."""
    problem = ab_pair_problem(a, b)
    if problem:
        raise ValueError(problem)
    refs = {ref.display: ref for ref in run.impls} if run.impls is not None else {}
    pair = tuple(refs.get(label) or ImplRef(label) for label, _ in (a, b))
    shape = dict(run.shape)
    sweep_value = a[1] if a[1] is not None else b[1]
    if run.sweep is not None and sweep_value is not None:
        shape.update({name: sweep_value for name in run.sweep.params})
    ab = RunSpec(op=run.op, impls=pair, shape=shape, dtype=run.dtype, actions=("check",),
                 settings=run.settings, compare=(ABSide(pair[0].display), ABSide(pair[1].display)))
    return dataclasses.replace(session, name=f"{session.name}-ab", runs=(ab,))


class ABMixin:
    """Mixed into WorkbenchApp: handles DiagnosisPane.CompareRequested. While the A/B runs the app
    counts as running (the runner's stop event): `r` waits, escape cancels it, and the run bar says
    so (Run off, Cancel on, the A/B named) until its end says how it ended."""

    ab_pair: tuple[str, str] | None = None  # the A/B's two labels while it runs

    def on_diagnosis_pane_compare_requested(self, message: DiagnosisPane.CompareRequested) -> None:
        if self.running:
            self.notify("a run is in progress: the A/B can start once it is over", severity="warning")
            return
        if self.ws.run is None:
            return
        session = ab_session(self.ws.session, self.ws.run, message.a, message.b)
        self._stop = threading.Event()
        self.ab_pair = (message.a[0], message.b[0])
        self.refresh_bindings()
        self.run_bar.running = True  # Run looks off and Cancel on, as during a run (escape cancels it)
        self.run_bar.status = f"A/B {message.a[0]} vs {message.b[0]}: timing both round-robin…"
        self.log_pane.add(f"A/B: {message.a[0]} vs {message.b[0]} (round-robin, one worker)")
        self.notify(f"A/B {message.a[0]} vs {message.b[0]}: timing both round-robin…")
        self._ab_worker(session, self._stop)

    @work(thread=True, exit_on_error=False, group="ab")
    def _ab_worker(self, session: Session, stop: threading.Event) -> None:
        from .options import for_run

        try:
            if self._engine is not None:  # a test's engine
                kwargs = {"options": for_run(self._options, False)} if self._options is not None else {}
                doc = self._engine(session, on_event=lambda _e: None, stop=stop, **kwargs)
            else:
                doc = _run_plan(session, on_event=lambda _e: None, stop=stop,
                                options=for_run(self._options, False), workers=self._engine_pool())
        except BaseException as exc:  # noqa: BLE001 - shown as a notification, never a traceback
            self.post_message(CompareDone([], f"A/B failed: {type(exc).__name__}: {exc}"))
            return
        self.post_message(CompareDone(list((doc or {}).get("ab") or [])))

    def on_compare_done(self, message: CompareDone) -> None:
        cancelled = self._stop is not None and self._stop.is_set()
        self._stop, self.ab_pair = None, None
        self.refresh_bindings()
        self.run_bar.running = False
        self.run_bar.status = ("A/B failed" if message.error else "A/B cancelled" if cancelled
                               else "A/B done: " + ", ".join(str(e.get("status", "?")) for e in message.entries))
        if message.error:
            self.report(message.error)
            return
        model = self.ws.model()
        model.ab = model.ab + message.entries
        model.version += 1
        for entry in message.entries:
            self.report(ab_line(entry), "information" if entry.get("status") == "ok" else "error")
        self.show_results()


def _run_plan(session, **kwargs) -> dict:
    from workbench.engine.plan import run_plan

    return run_plan(session, **kwargs)
