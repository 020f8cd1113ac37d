"""A/B from the TUI: two marked rows of the Diagnosis pane timed round-robin in one worker.

The request becomes a one-run session of its own (the run's op, shape, dtype and settings; the
two rows' implementations with their params; actions [check]; `compare: [A, B]`) run through the
same engine call as a run, in a thread worker. Only its A/B entries come back to the screen (the
run's own rows keep their results); they join the run's RunModel (`ab`) and the Log.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from textual import work
from textual.message import Message

from workbench.report_diagnosis import ab_line
from workbench.session_model import ABSide, ImplRef, RunSpec, Session

from .pane_diagnosis import DiagnosisPane


class CompareDone(Message):
    """The A/B run ended: its `ab` entries, or the error that stopped it."""

    def __init__(self, entries: list[dict], error: str | None = None) -> None:
        super().__init__()
        self.entries, self.error = entries, error


def ab_session(session: Session, run: RunSpec, a: tuple[str, Any], b: tuple[str, Any]) -> Session:
    """The one-run session that times rows `a` and `b` ((label, sweep_value)) of `run`."""
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
    """Mixed into WorkbenchApp: handles DiagnosisPane.CompareRequested."""

    def on_diagnosis_pane_compare_requested(self, message: DiagnosisPane.CompareRequested) -> None:
        if self.running or getattr(self, "_ab_running", False):
            self.notify("a run is in progress: the A/B starts once it is over", severity="warning")
            return
        if self.ws.run is None:
            return
        session = ab_session(self.ws.session, self.ws.run, message.a, message.b)
        self._ab_running = True
        self.log_pane.add(f"A/B: {message.a[0]} vs {message.b[0]} (round-robin, one worker)")
        self.notify(f"A/B {message.a[0]} vs {message.b[0]}: timing both round-robin…")
        self._ab_worker(session)

    @work(thread=True, exit_on_error=False, group="ab")
    def _ab_worker(self, session: Session) -> None:
        import threading

        engine = self._engine or _run_plan
        try:
            kwargs = {"options": self._run_options()} if self._options is not None else {}
            doc = engine(session, on_event=lambda _e: None, stop=threading.Event(), **kwargs)
        except BaseException as exc:  # noqa: BLE001 - shown as a notification, never a traceback
            self.post_message(CompareDone([], f"A/B failed: {type(exc).__name__}: {exc}"))
            return
        self.post_message(CompareDone(list((doc or {}).get("ab") or [])))

    def on_compare_done(self, message: CompareDone) -> None:
        self._ab_running = False
        if message.error:
            self.report(message.error)
            return
        model = self.ws.model()
        model.ab = list(getattr(model, "ab", [])) + message.entries
        model.version += 1
        for entry in message.entries:
            self.report(ab_line(entry), "information" if entry.get("status") == "ok" else "error")
        self.show_results()


def _run_plan(session, **kwargs) -> dict:
    from workbench.engine.plan import run_plan

    return run_plan(session, **kwargs)
