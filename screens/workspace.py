"""What the app is editing: the session, the run on screen, drafts of new runs, and results.

Plain Python (no Textual): the app calls these on user actions and sets attributes down from
them. A run already in the session is edited in place; a run of another op is a draft until it
is run, when it joins the session (`begin_run`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from workbench.session_model import RunSpec, Session

from . import editing
from .catalog import Catalog, OpInfo
from .model import RunModel
from .sessions_io import BLANK, merge_results


class Workspace:
    def __init__(self) -> None:
        self.catalog: Catalog | None = None
        self.session: Session = BLANK
        self.path: Path | None = None
        self.index: int | None = None          # the run on screen, when it is in the session
        self.run: RunSpec | None = None
        self.drafts: dict[str, RunSpec] = {}
        self.models: dict[int, RunModel] = {}
        self.saved_results: dict | None = None
        self._draft_model = RunModel()

    # -- opening ----------------------------------------------------------------------------
    def open(self, session: Session, path: Path | None, results: dict | None) -> None:
        self.session, self.path, self.saved_results = session, path, results
        self.drafts, self.index, self.run = {}, None, None
        indices = {r.get("run_index") for r in (results or {}).get("results", ())}
        self.models = {i: RunModel.from_doc(results, i) for i in indices if isinstance(i, int)}
        if session.runs and self.catalog and self.catalog.op(session.runs[0].op):
            self.pick_run(0)
        elif self.catalog and self.catalog.ops:
            self.pick_op(next(iter(self.catalog.ops)))

    @property
    def op(self) -> OpInfo | None:
        return self.catalog.op(self.run.op) if self.catalog and self.run else None

    # -- choosing what is on screen ---------------------------------------------------------
    def pick_op(self, name: str) -> None:
        """A new run of `name` (its draft, if one is being edited): joins the session when run."""
        if self.index is None and self.run is not None and self.run.op == name:
            return
        op = self.catalog.op(name)
        self.index, self.run = None, self.drafts.get(name) or editing.default_run(op)
        self._draft_model = RunModel(op=name)

    @property
    def current_id(self) -> str:
        """The op list's id of what is on screen: `run:<index>` or `op:<name>`."""
        if self.index is not None:
            return f"run:{self.index}"
        return f"op:{self.run.op}" if self.run else ""

    def pick_run(self, index: int) -> None:
        self.index, self.run = index, self.session.runs[index]

    # -- editing ----------------------------------------------------------------------------
    def edit(self, run: RunSpec) -> bool:
        """Make `run` the one on screen; True when it changed (the session too, if in it)."""
        if run == self.run:
            return False
        self.run = run
        if self.index is not None:
            self.session, _ = editing.commit(self.session, self.index, run)
        else:
            self.drafts[run.op] = run
        return True

    def model(self) -> RunModel:
        return self.models.get(self.index, RunModel()) if self.index is not None else self._draft_model

    # -- running ----------------------------------------------------------------------------
    def begin_run(self) -> tuple[Session, int]:
        """Put the run on screen into the session; returns (a one-run session to run, its index)."""
        self.session, self.index = editing.commit(self.session, self.index, self.run)
        self.drafts.pop(self.run.op, None)
        self.models[self.index] = RunModel(op=self.run.op)
        return dataclasses.replace(self.session, runs=(self.run,)), self.index

    def finish(self, doc: dict, index: int) -> dict:
        """Fold the results document of run `index` in; returns the merged document to write."""
        self.models.setdefault(index, RunModel()).finish(doc)
        self.saved_results = merge_results(self.saved_results, doc, index)
        return self.saved_results

    def run_titles(self) -> list[tuple[int, str]]:
        ops = self.catalog.ops if self.catalog else {}
        return [(i, editing.title(r, ops[r.op]) if r.op in ops else r.op)
                for i, r in enumerate(self.session.runs)]
