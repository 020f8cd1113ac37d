"""Replay's progress on stderr: a rich progress bar on a terminal, else one line per finished row.

Lines come in session order, numbered by the row's place in the session (`[3/11]`), although
rows finish out of order (an unavailable row is decided at once, a ptx-only row finishes in the
run's first child): a row's line waits until every row before it has finished. A write that
fails (the terminal of a closed SSH session) is dropped: progress never stops a run.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable, Iterator

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from workbench import events as ev
from workbench.engine.measure.capture import FAULTHANDLER_LINE
from workbench.cli.common import Env
from workbench.events import RowKey
from workbench.fmt import clip, printable
from workbench.results.document import CANCELLED_ERROR
from workbench.results.record import Flag, read_record
from workbench.results.report import fmt_num, shape_text


class InOrder:
    """Results in, (place, record) out in session order. keys: every row key in session order;
    done: keys already finished elsewhere (a resumed run's), never waited for. A key not in
    `keys` comes out at once (the engine and the session disagree: better shown than held)."""

    def __init__(self, keys: Iterable[RowKey], done: Iterable[RowKey] = ()):
        self.keys = list(keys)
        self.place = {key: index for index, key in enumerate(self.keys)}
        self.finished: dict[int, dict] = {self.place[k]: {} for k in done if k in self.place}
        self.next = 0
        self._skip_done()

    def add(self, key: RowKey, record: dict) -> list[tuple[int, dict]]:
        if key not in self.place:
            return [(len(self.keys), record)]
        self.finished[self.place[key]] = record
        ready = []
        while self.next in self.finished:
            ready.append((self.next + 1, self.finished.pop(self.next)))
            self.next += 1
            self._skip_done()
        return ready

    def _skip_done(self) -> None:
        while self.finished.get(self.next) == {}:
            del self.finished[self.next]
            self.next += 1


@contextlib.contextmanager
def progress(keys: list[RowKey], env: Env, err: Console, verbose: bool,
             done: Iterable[RowKey] = ()) -> Iterator[Callable[[ev.Event], None]]:
    """An on_event callback: a progress bar on a terminal, else a line per finished row."""
    order = InOrder(keys, done)
    total = len(keys)
    bar = None
    if env.stderr_tty:
        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TimeElapsedColumn(), console=err, transient=True)
        task = bar.add_task("starting", total=total, completed=len(set(done) & set(order.place)))

    def say(line: str) -> None:
        with contextlib.suppress(OSError):
            (bar.console if bar else err).print(printable(line, lines=True), markup=False, highlight=False)

    cancelled = [0]  # rows a stop left unrun: one line for them all at the end, not one a row
    stacks = [0]  # a hung worker's thread stacks (faulthandler lines): shown with -v, else counted

    def on_event(event: ev.Event) -> None:
        if isinstance(event, ev.Started) and bar is not None:
            bar.update(task, description=escape(printable(f"{event.op} {event.row[1]} {event.spec_label}")))
        elif isinstance(event, ev.Result):
            if bar is not None:
                bar.update(task, advance=1)
            for place, record in order.add(event.row, event.record):
                if record.get("status") == "skipped" and record.get("error") == CANCELLED_ERROR:
                    cancelled[0] += 1  # thousands of lines after a Ctrl-C at ~3.7k rows slowed its exit
                elif bar is None or record.get("status") == "failed":
                    say(row_line(record, place, total))
        elif isinstance(event, ev.Log) and (verbose or event.level != "info"):
            if not verbose and FAULTHANDLER_LINE.match(event.text):
                stacks[0] += 1
                return
            say(f"{event.level}: {event.text}")

    try:
        if bar is None:
            yield on_event
            return
        with bar:
            yield on_event
    finally:
        if cancelled[0]:
            say(f"{cancelled[0]} row(s) not run: cancelled (skipped, error \"cancelled\")")
        if stacks[0]:
            say(f"{stacks[0]} line(s) of a hung worker's thread stacks left out (-v shows them)")


def row_line(data: dict[str, Any], place: int, total: int) -> str:
    """`[3/11] gelu triton 2x8 float32: ok 0.51 ms` (and the error's first line, if any)."""
    record = read_record(data)
    sweep = record.sweep_value
    where = shape_text(record.shape) + (f" @{sweep}" if sweep is not None else "")
    text = printable(f"[{place}/{total}] {record.op} {record.label} {where} {record.dtype or ''}: "
                     f"{record.status}")
    if record.timing is not None and record.timing.median_ms is not None:
        text += f" {fmt_num(record.timing.median_ms)} ms"
        if Flag.CPU_CONTENDED in record.flag_kinds():  # with -o the table (its notes) is not printed: the flag was in the document only
            text += " (CPU contended: other processes held the cores, not the op's time alone)"
    if record.error:
        text += f" ({clip(str(record.error).splitlines()[0], 400)})"
    return text
