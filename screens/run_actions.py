"""Managing the session's runs from the keyboard and the palette: delete (u undoes it),
duplicate, move up and down; and the run's dtype and actions from the palette.

The Workspace does the bookkeeping (runs, their results on screen and in NAME.results.json move
together); this mixin refuses while a run is in flight (its index would move under it), then
redraws, autosaves and rewrites the results file.
"""

from __future__ import annotations

import dataclasses

from textual.binding import Binding

from . import editing, sessions_io
from .sidebar import OpList

UNDO_KEY = Binding("u", "undo_delete", "Undo delete", show=False)


class RunsMixin:
    """Mixed into WorkbenchApp: uses its `ws`, `running`, `report`, `show_run`,
    `schedule_autosave`, `data_dir` and `log_pane`. A key acts on the run highlighted in the run
    list (that is where the keys are), a palette command on the run it names."""

    def _target(self, index: int | None) -> int | None:
        """The run a run-list key acts on: `index` (the palette names it), else the run
        highlighted in the list; None (with a notice) when there is none or runs may not change."""
        if self.running:
            self.notify("a run is in progress: runs are deleted or moved once it is over (escape cancels)",
                        severity="warning")
            return None
        if index is None:
            index = self.query_one(OpList).highlighted_run()
        if index is None or not 0 <= index < len(self.ws.session.runs):
            self.notify("highlight a run in the list first (a new run, + op, joins the session when run)",
                        severity="warning")
            return None
        return index

    async def action_delete_run(self, index: int | None = None) -> None:
        index = self._target(index)
        if index is not None:
            removed = self.ws.delete_run(index)
            await self._runs_changed(f"deleted run {removed.index} ({removed.run.op}): u brings it back")
            if not self.running:  # the bar's summary may be of the run just deleted (the Log keeps it)
                self.run_bar.status = "ready" if self.ws.session.runs else \
                    "no runs: pick an op (+) in the list to add one; u brings the last back"

    async def action_undo_delete(self) -> None:
        if self.running:
            self.notify("a run is in progress: undo once it is over", severity="warning")
        elif not self.ws.removed:
            self.notify("nothing to undo", severity="information")
        else:
            restored = self.ws.undo_delete()
            await self._runs_changed(f"run {restored.index} ({restored.run.op}) is back")

    async def action_duplicate_run(self, index: int | None = None) -> None:
        index = self._target(index)
        if index is not None:
            copy = self.ws.duplicate_run(index)
            await self._runs_changed(f"run {copy} is a copy of run {index}")

    async def action_move_run(self, delta: int, index: int | None = None) -> None:
        index = self._target(index)
        if index is not None:
            after = self.ws.move_run(index, delta)
            if after != index:
                await self._runs_changed(f"run {index} is now run {after}")

    async def action_set_dtype(self, dtype: str) -> None:
        ws = self.ws
        if ws.run is not None and ws.op is not None and dtype in ws.op.dtypes:
            self._edit(dataclasses.replace(ws.run, dtype=dtype))
            await self.show_run()

    async def action_toggle_action(self, action: str) -> None:
        ws = self.ws
        if ws.run is not None:
            actions = set(ws.run.actions) ^ {action}
            self._edit(editing.with_actions(ws.run, actions))
            await self.show_run()

    async def _runs_changed(self, note: str) -> None:
        await self.show_run()
        self.schedule_autosave()
        self.notify(note, timeout=3)
        self.log_pane.add(note)
        if self.ws.saved_results is not None:
            path = sessions_io.results_file(self.ws.path, self.data_dir, self.ws.session.name)
            try:
                sessions_io.write_results(self.ws.saved_results, path)
            except (OSError, ValueError) as exc:
                self.report(f"results not rewritten: {exc}", "warning")
