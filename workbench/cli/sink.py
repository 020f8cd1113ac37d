"""Where a replay's results go, while rows finish and once at the end.

While the run lasts: with `-o PATH` (a file), every finished row goes to the journal beside it
(workbench/results/journal.py: flushed and fsynced, so a kill loses no finished row); with
`--format jsonl` and no `-o`, every row is streamed to stdout as it finishes.
At the end: the document in the chosen format, to `-o` (atomically for a file, written through
for a device node, FIFO or /dev/stdout) or to stdout; then the journal is removed, unless the run
was cancelled and the document's format (table, CSV) cannot be resumed from: then it stays for
`--resume`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Iterable, Mapping

from rich.console import Console

from workbench import events as ev
from workbench.results import document as results
from workbench.cli.common import Env, output_style, write_output, write_stdout
from workbench.errors import WorkbenchError
from workbench.fileio import is_stream
from workbench.results.journal import (Journal, JournalBusy, JournalHasRows, header_line, is_finished, journal_path,
                                       result_line, to_jsonl)
from workbench.results.report import render, to_table

RESUMABLE_FORMATS = ("json", "jsonl")


class Sink:
    """head: the document's `provenance` and `environment` as known before the run; done: the
    records a resumed run keeps. Raises WorkbenchError when the journal cannot be written
    (before anything runs)."""

    def __init__(self, args: argparse.Namespace, env: Env, head: Mapping[str, Any],
                 done: Iterable[Mapping[str, Any]] = ()):
        self.args, self.env, self.head = args, env, dict(head)
        self.rows = [dict(r) for r in done]
        self.streaming = args.format == "jsonl" and args.output is None
        self.journal: Journal | None = None
        self.made: list[Path] = []  # the folders -o makes (a typo in a path builds a tree: the closing line names them)
        if args.output is not None and not is_stream(args.output):
            self.made = _missing_folders(Path(args.output))
            path = journal_path(args.output)
            try:
                self.journal = Journal(path, self.head, self.rows, keep_rows=not getattr(args, "resume", None))
            except JournalHasRows as exc:  # a re-run without --resume discarded a killed run's rows
                raise WorkbenchError(f"-o {args.output}: a stopped run's journal with {exc.rows} finished row(s) is "
                                     f"there ({path}); keep them with --resume {args.output}, or remove the journal "
                                     "to start afresh") from None
            except JournalBusy:
                raise WorkbenchError(f"-o {args.output}: another workbench run is writing it now (its journal {path} "
                                     "is held); give another -o path, or wait for that run to end") from None
            except OSError as exc:
                raise WorkbenchError(f"-o {args.output}: its journal {path} cannot be written ({exc})") from None
        if self.streaming:
            write_stdout(header_line(self.head) + "".join(result_line(r) for r in self.rows))

    def on_event(self, event: ev.Event) -> None:
        """Keep, journal and stream each Result as it arrives."""
        if not isinstance(event, ev.Result):
            return
        if is_finished(event.record):
            self.rows.append(event.record)
            if self.journal is not None:
                self.journal.add(event.record)
        if self.streaming:
            write_stdout(result_line(event.record))

    def partial(self, signal_name: str | None) -> dict:
        """The document of what finished, for a run aborted before run_plan returned."""
        doc = results.new_document(self.head.get("provenance") or {}, self.head.get("environment") or {})
        doc.update(results=list(self.rows), cancelled=True, cancel_signal=signal_name)
        return doc

    def finish(self, doc: dict, err: Console) -> None:
        """Write the document; then remove the journal (or keep it, see the module docstring).
        Raises WorkbenchError when the write failed (the data then went to stdout)."""
        try:
            write_output(self.text(doc), self.args, self.env)
        except WorkbenchError as exc:  # one line: what was not written, where the data and the rows are
            raise WorkbenchError(f"{exc}; {self._kept_note('the document was not written')}") from None
        except BaseException:
            if self.journal is None and self.args.output is not None:  # a stream target: no journal
                write_stdout(self.text(doc))  # (a second signal while a FIFO waited for its reader)
            self._keep_journal(err, "the document was not written")
            raise
        if self.args.output is not None and not is_stream(self.args.output):
            # where the data went (--resume PATH rewrites PATH: never without a word)
            made = f"; made the folder {self.made[-1]}" + (" and those under it" if len(self.made) > 1 else "") \
                if self.made else ""
            err.print(f"results written to {self.args.output} ({len(doc.get('results') or [])} row(s), "
                      f"{self.args.format}{made})", markup=False, highlight=False)
        if self.journal is None:
            return
        if doc.get("cancelled") and self.args.format not in RESUMABLE_FORMATS:
            self._keep_journal(err, f"a {self.args.format} document cannot be resumed from")
        else:
            self.journal.discard()

    def text(self, doc: dict) -> str:
        fmt = self.args.format
        if fmt == "jsonl":  # streamed: only the end line is left to write
            whole = to_jsonl(doc)
            return whole.splitlines(keepends=True)[-1] if self.streaming else whole
        if fmt != "table":
            return render(doc, fmt)
        width, color = output_style(self.env, self.args)
        return to_table(doc, width=width, color=color)

    def _keep_journal(self, err: Console, why: str) -> None:
        if self.journal is not None:
            err.print(self._kept_note(why), markup=False, highlight=False)

    def _kept_note(self, why: str) -> str:
        """Where the finished rows are kept (the journal, closed), and how to go on."""
        if self.journal is None:
            return why
        self.journal.close()
        if self.journal.failure is not None:  # a full disk: the rows before it are there
            return (f"{self.journal.written} finished row(s) are kept in {self.journal.path} (its next write "
                    f"failed too): workbench --replay FILE --resume {self.args.output}")
        return (f"the finished rows are kept in {self.journal.path} ({why}): "
                f"workbench --replay FILE --resume {self.args.output}")


def _missing_folders(path: Path) -> list[Path]:
    """The folders above `path` that do not exist yet, innermost first (writing it makes them)."""
    missing = []
    folder = path.expanduser().parent
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing
