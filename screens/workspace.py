"""What the app is editing: the session, the run on screen, drafts of new runs, and results.

Plain Python (no Textual): the app calls these on user actions and sets attributes down from
them. A run already in the session is edited in place; a run of another op is a draft until it
is run, when it joins the session (`begin_run`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from workbench.plugins.sources import with_resolved_plugins
from workbench.session.model import RunSpec, Session

from . import editing
from .catalog import Catalog, OpInfo
from .model import RunModel
from .sessions_io import BLANK, merge_results


@dataclass(frozen=True)
class RunEntry:
    """A run with what it had: its results on screen and its records in the results document
    (a deleted run kept for undo, or a copy about to join)."""

    index: int
    run: RunSpec
    model: RunModel | None
    records: tuple[dict, ...]


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
        self.removed: list[RunEntry] = []       # deleted runs, the last one first to come back

    # -- opening ----------------------------------------------------------------------------
    def open(self, session: Session, path: Path | None, results: dict | None) -> None:
        self.session, self.path, self.saved_results = session, path, results
        self.drafts, self.index, self.run, self.removed = {}, None, None, []
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

    def run_problems(self, run: RunSpec, kernels: list[str] | tuple[str, ...] = ()) -> list[str]:
        """What `--check` would say of `run` in this session (workbench.session.api.validate_session
        on the session with this run alone: the declarations, no torch, ~20 ms), each as
        `sweep.values[2]: value 8 is listed twice`; [] when it can run. The editor's own field
        checks come first; this catches what only the whole run shows (a duplicate sweep value,
        a swept parameter an implementation lacks), which ran into a confusing failure and saved
        a file the app could then not open."""
        from workbench.session.api import validate_session

        base = self.path.parent if self.path is not None else Path.cwd()
        one = dataclasses.replace(self.session, runs=(run,))
        prefix = "runs[0]"
        found = []
        for problem in validate_session(one, base_dir=base, kernels=kernels):
            if problem.path == prefix or problem.path.startswith((prefix + ".", prefix + "[")):
                path = problem.path[len(prefix):].lstrip(".")
                found.append(f"{path}: {problem.message}" if path else problem.message)
        return found

    def model(self) -> RunModel:
        return self.models.get(self.index, RunModel()) if self.index is not None else self._draft_model

    def adopt_draft(self) -> bool:
        """Put the draft on screen (a new run not yet run) into the session, as running it would;
        True when there was one. A save saves what is on screen: `+ gelu` then ctrl+s saves
        the new run, never "nothing to save"."""
        if self.index is not None or self.run is None:
            return False
        self.session, self.index = editing.commit(self.session, self.index, self.run)
        self.drafts.pop(self.run.op, None)
        self.models[self.index] = self._draft_model
        return True

    # -- running ----------------------------------------------------------------------------
    def begin_run(self) -> tuple[Session, int]:
        """Put the run on screen into the session; returns (a one-run session to run, its index).
        Its `plugins` are absolute (relative ones are to the session's folder, as replay reads
        them): the engine's children start in another folder. The run's model starts with its
        rows queued (RunModel.planned)."""
        self.session, self.index = editing.commit(self.session, self.index, self.run)
        self.drafts.pop(self.run.op, None)
        op = self.op
        self.models[self.index] = RunModel.planned(self.run.op, editing.row_keys(self.run, op) if op else ())
        base = self.path.parent if self.path is not None else Path.cwd()
        return with_resolved_plugins(dataclasses.replace(self.session, runs=(self.run,)), base), self.index

    def finish(self, doc: dict, index: int) -> dict:
        """Fold the results document of run `index` in; returns the merged document to write."""
        self.saved_results = merge_results(self.saved_results, doc, index)
        if doc.get("cancelled"):  # the rows shown are the ones saved: earlier results kept included
            doc = {**doc, "results": [r for r in self.saved_results["results"] if r.get("run_index") == index]}
        self.models.setdefault(index, RunModel()).finish(doc)
        return self.saved_results

    def run_titles(self) -> list[tuple[int, str]]:
        ops = self.catalog.ops if self.catalog else {}
        return [(i, editing.title(r, ops[r.op]) if r.op in ops else r.op)
                for i, r in enumerate(self.session.runs)]

    # -- managing runs: delete (and undo), duplicate, reorder -------------------------------
    def delete_run(self, index: int) -> RunEntry:
        """Take run `index` out of the session, with its results; `undo_delete` puts it back."""
        records = tuple(r for r in self._records() if r.get("run_index") == index)
        removed = RunEntry(index, self.session.runs[index], self.models.get(index), records)
        self._reorder([i for i in range(len(self.session.runs)) if i != index])
        self.removed.append(removed)
        if self.session.runs:
            self.pick_run(min(index, len(self.session.runs) - 1))
        else:
            self.pick_op(removed.run.op)
        return removed

    def undo_delete(self) -> RunEntry | None:
        """The last deleted run back at its place (None when nothing was deleted)."""
        if not self.removed:
            return None
        removed = self.removed.pop()
        order: list[int | None] = list(range(len(self.session.runs)))
        order.insert(min(removed.index, len(order)), None)
        self._reorder(order, removed)
        self.pick_run(order.index(None))
        return removed

    def duplicate_run(self, index: int) -> int:
        """A copy of run `index` (without its results) right after it; returns the copy's index."""
        order: list[int | None] = list(range(len(self.session.runs)))
        order.insert(index + 1, None)
        self._reorder(order, RunEntry(index + 1, self.session.runs[index], None, ()))
        self.pick_run(index + 1)
        return index + 1

    def move_run(self, index: int, delta: int) -> int:
        """Move run `index` by `delta` places (clamped to the list); returns where it went."""
        order = list(range(len(self.session.runs)))
        target = max(0, min(len(order) - 1, index + delta))
        order.insert(target, order.pop(index))
        self._reorder(order)
        self.pick_run(target)
        return target

    def _records(self) -> list[dict]:
        return list((self.saved_results or {}).get("results", ()))

    def _reorder(self, order: list[int | None], new: RunEntry | None = None) -> None:
        """Runs, models and result records in `order` (old indices; None: `new` goes there)."""
        runs, models, records, old = [], {}, [], self._records()
        for index, was in enumerate(order):
            run, model = (new.run, new.model) if was is None else (self.session.runs[was], self.models.get(was))
            mine = new.records if was is None else [r for r in old if r.get("run_index") == was]
            runs.append(run)
            if model is not None:
                models[index] = model
            records += [{**r, "run_index": index} for r in mine]
        self.session = dataclasses.replace(self.session, runs=tuple(runs))
        self.models = models
        if self.saved_results is not None:
            self.saved_results = {**self.saved_results, "results": records}
