"""PTX: the highlighted PTX (or SASS) of one implementation's kernel, its instruction counts,
resources and launch geometry. `n`/`N` jump between highlighted instructions, `f` filters the
kind jumped to (all, loads, stores, barriers, ...), `s` cycles the stage shown (TTIR, TTGIR, LLIR,
PTX, SASS). `v` splits the view: the kernel source beside the stage, line to line (ptx_split);
`d` there compares with the same kernel under another specialisation (another sweep point).

Attributes down: `model`. What is shown is picked in the pane's own Selects.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widgets import Select, Static

from workbench.results.record import Launch

from .. import fmt
from ..keys import KeyScroll
from ..model import Row, RunModel
from .ptx_split import SplitView
from .ptx_view import STAGE_LABELS, PtxView, SplitState, render_ptx

ALL = "all kinds"


class PtxPane(Vertical):
    BINDINGS = [Binding("n", "jump(1)", "Next"), Binding("N", "jump(-1)", "Prev"),
                Binding("f", "next_kind", "Filter"), Binding("v", "split", "Source"),
                Binding("s", "next_stage", "Stage"), Binding("d", "diff", "Diff")]

    model: reactive[RunModel | None] = reactive(None, always_update=True, init=False, repaint=False)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._view: PtxView | None = None
        self._split_on = False
        self._compare_row: Row | None = None   # the row `d` compares with (same implementation)

    def compose(self) -> ComposeResult:
        with Horizontal(classes="pane-bar"):
            yield Select[str]([], id="ptx-impl", compact=True, prompt="implementation")
            yield Select[str]([], id="ptx-kernel", compact=True, prompt="kernel: view")
            yield Select[str]([(ALL, ALL)], id="ptx-kind", compact=True, value=ALL, allow_blank=False)
        yield Static("", id="ptx-summary", classes="summary")
        with KeyScroll(id="ptx-scroll", can_focus=True):
            yield Static("", id="ptx-code")
        yield SplitView(id="ptx-split")

    def on_mount(self) -> None:
        self.query_one(SplitView).display = False

    def watch_model(self, model: RunModel | None) -> None:
        if not self.is_mounted:
            return
        rows = self._rows()
        options = [(_title(r), _title(r)) for r in rows]
        with_text = [_title(r) for r in rows if text_views(r.ptx_texts)]
        with_kernels = [_title(r) for r in rows if _kernel_names(r)]
        first = (with_text or with_kernels or [None])[0]
        self._set_options("#ptx-impl", options, first, keep=with_text or with_kernels or None)
        self._show_kernels()

    def _rows(self) -> list[Row]:
        return [r for r in (self.model.rows.values() if self.model else ()) if r.ptx or r.ptx_texts]

    def _set_options(self, selector: str, options: list[tuple[str, str]], first: str | None = None,
                     keep: list[str] | None = None) -> None:
        """New options, keeping the current choice if it is among `keep` (default: all), else `first`."""
        select = self.query_one(selector, Select)
        current = select.value
        with self.prevent(Select.Changed):
            select.set_options(options)
            if options:
                values = [value for _, value in options]
                select.value = current if current in (keep or values) else (first or values[0])

    def _row(self) -> Row | None:
        title = self.query_one("#ptx-impl", Select).value
        return next((r for r in self._rows() if _title(r) == title), None)

    def _show_kernels(self) -> None:
        row = self._row()
        views = text_views(row.ptx_texts) if row else {}
        self._set_options("#ptx-kernel", [(v, v) for v in views] or
                          [(n, n) for n in _kernel_names(row)])
        self._show()

    def _show(self) -> None:
        row, choice = self._row(), self.query_one("#ptx-kernel", Select).value
        text = text_views(row.ptx_texts).get(choice) if row and isinstance(choice, str) else None
        kernel = choice.split(": ")[0] if isinstance(choice, str) else None
        self._view = PtxView(text, *render_ptx(text)) if text else None
        kinds = self._view.kinds if self._view else []
        self._set_options("#ptx-kind", [(ALL, ALL)] + [(k, k) for k in kinds])
        self.query_one("#ptx-summary", Static).update(summary(row, kernel))
        self._paint()
        if self._split_on:
            self._show_split(row, choice)

    def _paint(self, scroll: bool = False) -> None:
        code = self.query_one("#ptx-code", Static)
        if self._view is None:
            code.styles.width = "1fr"
            code.update(_empty_reason(self._row()))
            return
        rendered = self._view.rendered()
        code.update(rendered)
        # as wide as the widest line (tabs expanded): one PTX line is one row, so n/N can scroll by line
        widest = rendered.copy()
        widest.expand_tabs()
        code.styles.width = max((line.cell_len for line in widest.split("\n")), default=1) + 1
        if scroll and self._view.current is not None:
            # after the new text is laid out, so the scroll range and the pane's real height are known
            self.call_after_refresh(self._scroll_to_current)

    def _scroll_to_current(self) -> None:
        """Centre the current line in the code area, whatever its height (lines never wrap)."""
        if self._view is None or self._view.current is None:
            return
        scroll = self.query_one(KeyScroll)
        height = scroll.scrollable_content_region.height
        scroll.scroll_to(y=max(self._view.current - height // 2, 0), animate=False, immediate=True)

    @on(Select.Changed, "#ptx-impl")
    def _impl_picked(self, event: Select.Changed) -> None:
        event.stop()
        self._show_kernels()

    @on(Select.Changed, "#ptx-kernel")
    def _kernel_picked(self, event: Select.Changed) -> None:
        event.stop()
        self._show()

    @on(Select.Changed, "#ptx-kind")
    def _kind_picked(self, event: Select.Changed) -> None:
        event.stop()
        if self._view:
            self._view.kind = None if event.value in (ALL, Select.NULL) else str(event.value)

    def action_jump(self, step: int) -> None:
        if self._split_on:
            if not self.query_one(SplitView).jump(step):
                self.notify("no source line with loads, stores, shuffles or mma here", severity="warning", timeout=2)
            return
        if self._view and self._view.jump(step) is not None:
            self._paint(scroll=True)
        elif self._view:
            self.notify("no highlighted instruction of this kind", severity="warning", timeout=2)
        else:
            self._no_ptx_yet("step through")

    def action_next_kind(self) -> None:
        if self._view:
            kinds = [ALL] + self._view.kinds
            now = self._view.kind or ALL
            self.query_one("#ptx-kind", Select).value = kinds[(kinds.index(now) + 1) % len(kinds)]
        else:
            self._no_ptx_yet("filter")

    def _no_ptx_yet(self, what: str) -> None:
        """n, N (what: "step through") or f ("filter") with no PTX text on screen: say why,
        instead of nothing happening."""
        why = _empty_reason(self._row()).replace("\n", " ") or "no results yet: press r to run (ptx ticked)"
        self.notify(f"no PTX to {what}: {why}", severity="warning", timeout=3)


    # -- the split view: source beside a stage (ptx_split) ---------------------------------------------
    def _show_split(self, row: Row | None, choice) -> None:
        kernel, _, view = str(choice).partition(": ")
        state = split_state(row, kernel, view, other=self._compared(row, kernel))
        self.query_one(SplitView).show(state, f"source · {kernel}", _no_split_reason(row, kernel))

    def _compared(self, row: Row | None, kernel: str) -> tuple[str, dict] | None:
        other = self._compare_row
        entry = kernel_record(other, kernel) if other is not None and other is not row else None
        return (_title(other), entry) if entry else None

    def action_split(self) -> None:
        self._split_on = not self._split_on
        self.query_one(KeyScroll).display = not self._split_on
        self.query_one("#ptx-summary").display = not self._split_on  # the status line says it per line
        self.query_one(SplitView).display = self._split_on
        self._show()
        self.query_one("#split-source" if self._split_on else "#ptx-scroll").focus()

    def on_descendant_focus(self, event) -> None:
        if self._split_on and event.widget.id == "ptx-scroll":  # the app focuses the single view
            self.query_one("#split-source").focus()

    def action_next_stage(self) -> None:
        """The next view of the same kernel, in compile order (the source stays on the left)."""
        row, select = self._row(), self.query_one("#ptx-kernel", Select)
        kernel = str(select.value).partition(": ")[0]
        views = [f"{kernel}: {s}" for s in STAGE_LABELS if f"{kernel}: {s}" in text_views(row.ptx_texts if row else {})]
        if views:
            now = views.index(select.value) if select.value in views else -1
            select.value = views[(now + 1) % len(views)]

    def action_diff(self) -> None:
        """Compare with the next row of the same implementation (another sweep point); after the
        last, stop comparing."""
        row = self._row()
        kernel = str(self.query_one("#ptx-kernel", Select).value).partition(": ")[0]
        candidates = [r for r in self._rows() if row and r is not row and r.label == row.label
                      and kernel_record(r, kernel)]
        if not self._split_on or not candidates:
            self.notify("nothing to compare: run ptx for this implementation at two sweep points, "
                        "then `v` and `d`", severity="warning", timeout=3)
            return
        now = candidates.index(self._compare_row) if self._compare_row in candidates else -1
        self._compare_row = candidates[now + 1] if now + 1 < len(candidates) else None
        self._show()


def split_state(row: Row | None, kernel: str, view: str, other: tuple[str, dict] | None = None) -> SplitState | None:
    """The split view's state for one kernel of a row, None without a source map or source text."""
    texts = (row.ptx_texts or {}).get(kernel) if row else None
    entry = kernel_record(row, kernel) if row else None
    if not isinstance(texts, dict) or not texts.get("source") or not entry:
        return None
    stages = {s: texts[s] for s in STAGE_LABELS if isinstance(texts.get(s), str) and texts[s].strip()}
    language = "cuda" if str(entry.get("source_file") or "").endswith((".cu", ".cuh")) else "python"
    from workbench.ptx.launch_diff import diff_kernels  # (not before the first frame)

    diff = diff_kernels(entry, other[1]) if other else None
    return SplitState(texts["source"], entry["source_map"], stages, view if view in stages else "ptx",
                      language, diff, other[0] if other else None)


def _no_split_reason(row: Row | None, kernel: str) -> str:
    if row is not None and kernel_record(row, kernel):
        return "results files keep the source map, not the texts: run ptx again to see them"
    return "no source map for this kernel: run ptx on a Triton or CUDA kernel (library kernels have none)"


def kernel_record(row: Row, kernel: str) -> dict | None:
    """The record entry of `kernel` in a row's ptx, if it has a source map."""
    found = next((k for k in (row.ptx or {}).get("kernels", ()) if k.get("name") == kernel), None)
    return found if found and found.get("source_map") else None


def summary(row: Row | None, kernel) -> Text:
    """Counts, resources, source and launch geometry of the kernel shown."""
    if row is None:
        return Text("no PTX yet: press r to run (rows get their PTX when `ptx` is among the run's actions)")
    ptx = row.ptx or {}
    info = next((k for k in ptx.get("kernels", ()) if k.get("name") == kernel), {})
    counts = " ".join(f"{k}={v}" for k, v in (info.get("counts") or {}).items() if v)
    resources = [f"{key} {info[key]}" for key in ("registers", "spills", "shared_bytes")
                 if info.get(key) is not None]
    text = Text(f"{ptx.get('target') or '?'} · {ptx.get('source') or 'no source'}"
                + (f" · {', '.join(resources)}" if resources else ""), style="bold")
    text.append(f"\n{counts or 'no counts'}")
    text.append(f"\n{launch_line(row.record.launch if row.record else None)}")
    for note in [*(ptx.get("notes") or ()), *(info.get("notes") or ())]:
        text.append(f"\n• {note}", style="italic")
    return text


def launch_line(launch: Launch | dict | None) -> str:
    """`launch: grid 64×1 · threads/block 128 · warps 4 · waves 0.5` (a launch dict is read into a Launch)."""
    if launch is not None and not isinstance(launch, Launch):
        launch = Launch.from_dict(launch)
    if launch is None or not launch.to_dict():
        return "launch geometry: -"
    grid = "×".join(str(g) for g in launch.grid or ()) or "-"
    parts = [f"grid {grid}"]
    parts += [f"{label} {value}" for value, label in
              ((launch.block_threads, "threads/block"), (launch.num_warps, "warps"), (launch.waves, "waves"))
              if value is not None]
    return "launch: " + " · ".join(parts)


def text_views(texts: dict) -> dict[str, str]:
    """`kernel: ptx`, `kernel: sass`, ... -> text, for every non-empty text of every kernel."""
    views = {}
    for kernel, entry in (texts or {}).items():
        entry = entry if isinstance(entry, dict) else {"ptx": entry}
        views.update({f"{kernel}: {view}": text for view, text in entry.items()
                      if isinstance(text, str) and text.strip()})
    return views


def _kernel_names(row: Row | None) -> list[str]:
    return [k["name"] for k in ((row.ptx or {}).get("kernels", ()) if row else ())]


def _empty_reason(row: Row | None) -> str:
    if row is None:
        return ""
    if _kernel_names(row):
        # short lines: the code view does not wrap at words (at 80x24 it broke "n|ot")
        return ("no PTX text here: results files keep\nthe counts, not the texts.\n"
                "Press r to run it again with ptx ticked.")
    notes = "; ".join((row.ptx or {}).get("notes") or ())
    return fmt.tui_text(row.error) or notes or "no PTX for this implementation"


def _title(row: Row) -> str:
    return fmt.row_title(row.label, row.sweep_value)
