"""Results written as rows finish: the journal beside a results file, and JSON Lines documents.

A journal is JSON Lines (one JSON object a line, CONTRACTS.md "Results", JSON Lines):

    {"header": {"schema_version": 1, "provenance": {...}, "environment": {"device": ..., ...}}}
    {"result": {...one result record...}}        one line per finished row, flushed and fsynced
    ...

The header's environment is what is known before the run (the device; the other keys null). The
journal lives beside the file it will become (`journal_path`: `out.json` -> `out.json.journal.jsonl`),
so a run killed by anything, even SIGKILL or a power cut, leaves every finished row on disk;
`--resume` reads it back. The `--format jsonl` document is the same lines plus a last
`{"end": {...}}` line with the rest of the document (`cancelled`, `cancel_signal`, the final
`environment` with its ceilings, `comparison`).

Rows stopped by a cancel (status `skipped`, error "cancelled") are not finished: they are never
journaled, and a resumed run runs them.

A journal is held with an exclusive `flock` for as long as its run writes it: a second run
asked to write the same file is refused (JournalBusy) before it touches it, so two replays given
one `-o` path never overwrite each other's rows and journal.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from workbench.results import document as results
from workbench.fileio import JOURNAL_SUFFIX  # the suffix: fileio refuses it for -o

HEAD_KEYS = ("schema_version", "provenance", "environment")


def journal_path(target: str | Path) -> Path:
    """The journal of the results file `target` (a symlink's target: the journal sits beside
    the file that is written): `out.json` -> `out.json.journal.jsonl`."""
    real = Path(os.path.realpath(target))
    return real.with_name(real.name + JOURNAL_SUFFIX)


def is_finished(record: Mapping[str, Any]) -> bool:
    """False for a row a cancel stopped before it finished (run_plan's skipped / "cancelled")."""
    return not (record.get("status") == "skipped" and record.get("error") == results.CANCELLED_ERROR)


def header_line(head: Mapping[str, Any]) -> str:
    return _line({"header": {"schema_version": results.SCHEMA_VERSION,
                             **{k: head.get(k) for k in HEAD_KEYS if k != "schema_version"}}})


def result_line(record: Mapping[str, Any]) -> str:
    return _line({"result": record})


def to_jsonl(doc: Mapping[str, Any]) -> str:
    """A whole document as JSON Lines: header, one line per result, the end line."""
    rest = {k: v for k, v in doc.items() if k not in ("schema_version", "provenance", "results")}
    return (header_line(doc) + "".join(result_line(r) for r in doc.get("results") or ())
            + _line({"end": rest}))


def from_jsonl(text: str, source: str = "JSON Lines") -> dict:
    """A document from JSON Lines (a journal, or a `--format jsonl` output). A last line cut
    short (the writer was killed mid-line) is ignored. Every line after the header but the end
    line goes into `results` as it is (a `{"result": R}` line as R): a line appended by hand is
    then left out and counted by `unique_rows`, never dropped without a word; readers take the
    rows through `unique_rows`. Raises ValueError naming `source`."""
    lines = text.splitlines()
    parsed = []
    for number, line in enumerate(lines, 1):
        try:
            parsed.append(json.loads(line))
        except ValueError:
            if number == len(lines):
                break  # a torn last line: everything before it was fsynced whole
            raise ValueError(f"{source}: line {number} is not JSON") from None
    if not parsed or not isinstance(parsed[0], dict) or "header" not in parsed[0]:
        raise ValueError(f"{source}: no header line (not a workbench journal or JSON Lines document)")
    head = parsed[0]["header"]
    if not isinstance(head, dict):
        raise ValueError(f"{source}: the header line's `header` is not an object")
    if head.get("schema_version") != results.SCHEMA_VERSION:
        raise ValueError(f"{source}: schema_version must be {results.SCHEMA_VERSION}, got {head.get('schema_version')!r}")
    doc = {"schema_version": results.SCHEMA_VERSION, "provenance": head.get("provenance") or {},
           "environment": head.get("environment") or {}, "results": [], "cancelled": True,
           "cancel_signal": None}
    for item in parsed[1:]:
        if isinstance(item, dict) and "result" in item:
            doc["results"].append(item["result"])
        elif not (isinstance(item, dict) and isinstance(item.get("end"), dict)):
            doc["results"].append(item)  # not a row: unique_rows leaves it out and counts it
        else:
            doc.update({k: v for k, v in item["end"].items() if k not in ("schema_version", "provenance", "results")})
    problem = results.section_type_error(doc)
    if problem is not None:
        raise ValueError(f"{source}: {problem}")
    return doc


class JournalBusy(OSError):
    """Another live run holds this journal."""


class JournalHasRows(OSError):
    """A stopped run's journal with finished rows is there (a run that would start afresh over it)."""

    def __init__(self, path: Path, rows: int):
        super().__init__(f"{path} holds {rows} finished row(s) of a stopped run")
        self.path, self.rows = path, rows


class Journal:
    """An append-only journal at `path`: the header (and `done`, rows kept from an earlier run)
    written first, then `add` appends one finished row a line, fsynced; held with an exclusive
    flock until closed. Raises JournalBusy when another run holds it, JournalHasRows when
    `keep_rows` and a stopped run's journal with finished rows is there (the caller says: use
    --resume), OSError where the folder cannot be written.

    The first content is written to `NAME.new` beside the journal, fsynced, then renamed over it:
    a crash while a resumed run starts never leaves the kept rows half-written (the old journal
    stays whole until the new one is). A row that cannot be written (a full disk) is cut back
    off, so the journal stays whole lines for --resume; `add` then says so once through
    `failure` and writes no more (the run goes on; the document is written at the end)."""

    def __init__(self, path: str | Path, head: Mapping[str, Any], done: Iterable[Mapping[str, Any]] = (),
                 *, keep_rows: bool = False):
        self.path = Path(path)
        self.failure: OSError | None = None
        self.written = 0  # rows on disk (the kept ones and those added)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        old = open(self.path, "a+", encoding="utf-8")  # not changed before the lock is ours
        self._file = None
        try:
            _lock(old)
            if keep_rows:
                old.seek(0)
                rows = _count_rows(old.read())
                if rows:
                    raise JournalHasRows(self.path, rows)
            fresh = self.path.with_name(self.path.name + ".new")
            new = open(fresh, "w+b", buffering=0)
            try:
                _lock(new)
                done = list(done)
                _write_all(new, (header_line(head) + "".join(result_line(r) for r in done)).encode("utf-8"))
                os.fsync(new.fileno())
                os.replace(fresh, self.path)
            except BaseException:
                new.close()
                fresh.unlink(missing_ok=True)
                raise
            self._file = new
            self.written = len(done)
        finally:
            old.close()  # the lock on the old file goes with it; the new one is held
        _fsync_dir(self.path.parent)

    def add(self, record: Mapping[str, Any]) -> None:
        """Append a finished row (a cancelled one is left out: it did not finish). A failed
        write is cut back off and kept in `failure`; nothing more is written after it."""
        if self._file is None or self.failure is not None or not is_finished(record):
            return
        end = os.lseek(self._file.fileno(), 0, os.SEEK_END)
        try:
            _write_all(self._file, result_line(record).encode("utf-8"))
            os.fsync(self._file.fileno())
            self.written += 1
        except OSError as exc:
            self.failure = exc
            with contextlib.suppress(OSError):
                os.ftruncate(self._file.fileno(), end)  # whole lines only: --resume reads it back

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def discard(self) -> None:
        """Remove and close: the document it was for is written (removed while still held, so
        a run that takes the path next is never the one removed)."""
        if self._file is not None:
            self.path.unlink(missing_ok=True)
        self.close()


def _lock(file) -> None:
    try:
        import fcntl

        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except ImportError:  # not POSIX: no lock
        pass
    except OSError:
        raise JournalBusy(f"{getattr(file, 'name', '?')} is being written by another run") from None


def _write_all(file, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[file.write(view):]


def _fsync_dir(folder: Path) -> None:
    """The rename on disk too (a power cut after it keeps the new journal)."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _count_rows(text: str) -> int:
    """Finished rows in a journal's text (0 for an empty or unreadable one)."""
    try:
        return len(unique_rows(from_jsonl(text)["results"])[0]) if text.strip() else 0
    except ValueError:
        return 0


def unique_rows(records: Iterable[Any]) -> tuple[list[dict], int]:
    """(finished rows, one per key, the last of each kept, in first-seen order; how many lines were
    left out: a repeat of a key, or not a result record). A journal appended to by hand or by two
    runs may repeat a row: each key counts once among the kept rows."""
    rows: dict[tuple, dict] = {}
    dropped = 0
    for record in records:
        if not isinstance(record, dict) or not {"run_index", "label"} <= record.keys():
            dropped += 1
            continue
        if not is_finished(record):  # a cancelled row: run again, not a line too many
            continue
        key = _row_key(record)
        dropped += key in rows
        rows[key] = record
    return list(rows.values()), dropped


def open_beside(results_file: str | Path, head: Mapping[str, Any]) -> Journal | None:
    """A journal for rows about to finish, beside `results_file` (the TUI's NAME.results.json);
    None where it cannot be written (the results file's own write reports that problem)."""
    try:
        return Journal(journal_path(results_file), head)
    except OSError:
        return None


def recover(results_file: str | Path, saved: dict | None) -> tuple[dict | None, int]:
    """`saved` (the results file read back, or None) with the rows a stopped or killed run left in
    the journal beside `results_file`, as the results of a cancelled run (CONTRACTS.md, the TUI's
    results file): a journaled row replaces the saved row of the same (run_index, label,
    sweep_value), or is added; a saved row of the stopped run that it did not reach stays, flagged
    "kept from an earlier run" (Flag.KEPT); the document is that run's (the journal's provenance
    and environment) and says `cancelled`. A quit mid-run or a kill left the earlier run's start
    time and rows unflagged, as if they were the new run's. Returns (document, rows recovered);
    the caller writes the document and then removes the journal (`journal_path`)."""
    path = journal_path(results_file)
    try:
        found = from_jsonl(path.read_text(encoding="utf-8"), str(path)) if path.is_file() else None
    except (OSError, ValueError):
        return saved, 0
    kept = unique_rows(found["results"])[0] if found else []
    if not found or not kept:
        return saved, 0
    stopped = {r.get("run_index") for r in kept}
    rows = {_row_key(r): (flag_kept(r) if r.get("run_index") in stopped else r)
            for r in (saved or {}).get("results", ()) if isinstance(r, dict)}
    rows.update({_row_key(r): r for r in kept})
    head = {key: found[key] for key in HEAD_KEYS if found.get(key) is not None}
    doc = {**(saved or found), **head, "cancelled": True,
           "results": sorted(rows.values(), key=lambda r: r.get("run_index") or 0)}
    return doc, len(kept)


def flag_kept(record: Mapping[str, Any]) -> dict:
    """`record` with the flag "kept from an earlier run" (Flag.KEPT), once."""
    from workbench.results.record import Flag, flag_kinds

    flags = list(record.get("flags") or [])
    return {**record, "flags": flags if Flag.KEPT in flag_kinds(flags) else [*flags, Flag.KEPT.template]}


def _row_key(record: Mapping[str, Any]) -> tuple:
    return (record.get("run_index"), record.get("label"), json.dumps(record.get("sweep_value")))


def read_partial(path: str | Path) -> dict:
    """A stopped run's document for `--resume PATH`: its journal when there is one (the newest
    truth: it holds every finished row even after a kill), else PATH itself as a JSON or JSON Lines
    document. Raises ValueError when neither can be read (the caller names PATH)."""
    path = Path(path)
    journal = journal_path(path)
    if journal.is_file():
        return from_jsonl(journal.read_text(encoding="utf-8"), str(journal))
    if not path.is_file():
        raise ValueError(f"no such results file, and no journal {journal.name} beside it")
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith('{"header"'):
        return from_jsonl(text, str(path))
    try:
        return results.load(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{exc} (resume reads a JSON or JSON Lines results document, or its journal)") from None


def document_from_text(text: str, source: str) -> Any:
    """A results document from its text: JSON, or JSON Lines (`--format jsonl`, a journal: its
    rows through `unique_rows`). Raises ValueError naming `source` for JSON Lines it cannot read,
    json.JSONDecodeError (a ValueError) for text that is neither."""
    if text.lstrip().startswith('{"header"'):
        doc = from_jsonl(text, source)
        doc["results"] = unique_rows(doc["results"])[0]
        return doc
    return json.loads(text)


def _line(obj: Any) -> str:
    return json.dumps(results.finite(obj), allow_nan=False, separators=(",", ":")) + "\n"
