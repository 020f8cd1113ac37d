"""The results of one run as the panes see them, folded from engine events (plain Python).

A `RunModel` holds one `Row` per (label, sweep_value), in arrival order (a run started in the
app lists its rows first, in document order: `planned`). `apply(event)` takes any
event of `workbench.events`; `finish(doc)` takes the results document `run_plan` returned.
`RunModel.from_doc` rebuilds the panes' view of a saved NAME.results.json.
"""

from __future__ import annotations

from workbench.fmt import printable

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from workbench import events as ev
from workbench.results.record import Record, Timing, Traffic, read_record


@dataclass
class Row:
    """One implementation at one sweep point."""

    label: str
    impl: str
    sweep_value: Any = None
    status: str = "queued"            # queued (planned, or an event came before Started) | running | ok | failed | unavailable | skipped
    samples_ms: list[float] = field(default_factory=list)
    timer: str | None = None
    build_ms: float | None = None
    check: dict | None = None
    record: Record | None = None      # a record dict given here is read into a Record (__setattr__)
    profile: dict | None = None
    ptx: dict | None = None
    ptx_texts: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    device: str | None = None         # where it runs (Started), then the record's (screens/devices_view.py)

    def __setattr__(self, name: str, value: Any) -> None:
        """The record is typed from the moment the front end holds it: a record dict (an
        event's, a loaded document's) is read into a Record here, once."""
        if name == "record" and value is not None:
            value = read_record(value)
        super().__setattr__(name, value)

    def get(self, section: str, key: str) -> Any:
        """A field of the finished record (`timing.median_ms`), None until then."""
        part = getattr(self.record, section, None) if self.record else None
        return getattr(part, key, None) if part is not None else None

    @property
    def timing(self) -> Timing:
        """The record's timing; an empty one (every figure None) until then."""
        return (self.record.timing if self.record else None) or Timing()

    @property
    def traffic(self) -> Traffic:
        """The record's traffic; an empty one (every figure None) until then."""
        return (self.record.traffic if self.record else None) or Traffic()

    @property
    def flags(self) -> list[str]:
        return self.record.flags if self.record else []

    @property
    def kept(self) -> bool:
        """The record is an earlier run's: the run after it was cancelled before this row
        (Flag.KEPT, sessions_io.merge_results). Its figures are not this run's."""
        from workbench.results.record import Flag, flag_kinds

        return Flag.KEPT in flag_kinds(self.flags)


@dataclass
class RunModel:
    """Rows of one run, plus the document's environment once finished."""

    op: str = ""
    rows: dict[tuple[str, Any], Row] = field(default_factory=dict)
    environment: dict | None = None
    ab: list[dict] = field(default_factory=list)   # A/B entries (engine/ab.py), from Compared events
    finished: bool = False
    version: int = 0                  # bumped on every change; panes redraw when it moves

    def row(self, key: ev.RowKey, impl: str = "") -> Row:
        _, label, sweep = key
        label = printable(label)  # control characters written out: every pane and chart shows this label
        found = self.rows.get((label, _hashable(sweep)))
        if found is None:
            found = self.rows[(label, _hashable(sweep))] = Row(label=label, impl=impl or label,
                                                               sweep_value=sweep)
        return found

    @classmethod
    def planned(cls, op: str, keys: Iterable[ev.RowKey]) -> "RunModel":
        """A run's model as the run starts: a queued row for each row it will produce, in the
        order of its document (editing.row_keys). The results table lists them from `r` on, so
        a cursor key pressed before the first event has a row to move to, and the rows keep
        their places while events fill them in (engines report in their own order: rows that
        cannot run here first)."""
        model = cls(op=op)
        for key in keys:
            model.row(key)
        return model

    def drop_unreached(self) -> None:
        """The rows no event reached (a `planned` row of a run that crashed, or that its
        document lacks) are taken out: the panes list only what the run did."""
        kept = {key: row for key, row in self.rows.items() if row != Row(row.label, row.impl, row.sweep_value)}
        if len(kept) != len(self.rows):
            self.rows = kept
            self.version += 1

    def apply(self, event: ev.Event) -> None:
        """Fold one engine event into the rows."""
        self.version += 1
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def finish(self, doc: dict | None) -> None:
        doc = doc or {}
        self.environment = doc.get("environment")
        self.ab = list(doc.get("ab") or self.ab)
        for record in doc.get("results", ()):
            self._take_record(record)
        self._in_document_order(doc.get("results", ()))
        self.drop_unreached()
        self.finished = True
        self.version += 1

    def _take_record(self, data: dict | Record) -> None:
        record = read_record(data)
        impl = record.impl or ""
        row = self.row((0, record.label or impl, record.sweep_value), impl)
        row.record, row.impl = record, impl
        row.status = "ok" if "status" in record.absent else record.status  # type: ignore[assignment]
        row.error = record.error or row.error
        row.check = (record.check.to_dict() if record.check else None) or row.check
        if "build_ms" not in record.absent:
            row.build_ms = record.build_ms
        row.profile = record.profile or row.profile
        row.ptx = record.ptx or row.ptx
        row.device = record.device or row.device
        timing = record.timing or Timing()
        row.timer = timing.timer or row.timer
        if timing.samples_ms and not row.samples_ms:
            row.samples_ms = list(timing.samples_ms)

    def _in_document_order(self, records) -> None:
        """The rows in the order of the run's document (the session's), those it lacks after: in
        arrival order a watch cycle put its re-run rows after the kept ones, and they stayed there."""
        rank: dict = {}
        for data in records:
            label, impl = data.get("label"), data.get("impl") or ""
            rank.setdefault((printable(label or impl), _hashable(data.get("sweep_value"))), len(rank))
        if rank:
            self.rows = dict(sorted(self.rows.items(), key=lambda item: rank.get(item[0], len(rank))))

    @property
    def sweep_values(self) -> list[Any]:
        return list(dict.fromkeys(r.sweep_value for r in self.rows.values() if r.sweep_value is not None))

    @property
    def labels(self) -> list[str]:
        return list(dict.fromkeys(r.label for r in self.rows.values()))

    @classmethod
    def from_doc(cls, doc: dict, run_index: int) -> "RunModel":
        """The rows of `run_index` in a saved results document."""
        model = cls()
        records = [r for r in doc.get("results", ()) if r.get("run_index") == run_index]
        model.op = records[0]["op"] if records else ""
        model.finish({**doc, "results": records,
                      "ab": [e for e in doc.get("ab") or () if e.get("run_index") == run_index]})
        return model


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _started(model: RunModel, e: ev.Started) -> None:
    model.op = e.op
    row = model.row(e.row, e.impl)
    row.status, row.device, row.impl = "running", e.device, e.impl or row.impl  # planned, its impl was its label


def _built(model: RunModel, e: ev.Built) -> None:
    model.row(e.row).build_ms = e.build_ms


def _checked(model: RunModel, e: ev.Checked) -> None:
    model.row(e.row).check = e.check


def _samples(model: RunModel, e: ev.Samples) -> None:
    row = model.row(e.row)
    row.samples_ms.extend(e.samples_ms)
    row.timer = e.timer


def _result(model: RunModel, e: ev.Result) -> None:
    model._take_record(e.record)


def _profile(model: RunModel, e: ev.Profile) -> None:
    model.row(e.row).profile = e.profile


def _ptx(model: RunModel, e: ev.Ptx) -> None:
    row = model.row(e.row)
    row.ptx, row.ptx_texts = e.ptx, dict(e.texts)


def _error(model: RunModel, e: ev.Error) -> None:
    model.row(e.row).error = e.message


def _compared(model: RunModel, e: ev.Compared) -> None:
    model.ab.append(e.entry)


_HANDLERS: dict[type, Callable[[RunModel, Any], None]] = {ev.Started: _started, ev.Built: _built, ev.Checked: _checked, ev.Samples: _samples,
             ev.Result: _result, ev.Profile: _profile, ev.Ptx: _ptx, ev.Error: _error, ev.Compared: _compared}
