"""The results of one run as the panes see them, folded from engine events (plain Python).

A `RunModel` holds one `Row` per (label, sweep_value), in arrival order. `apply(event)` takes any
event of `workbench.events`; `finish(doc)` takes the results document `run_plan` returned.
`RunModel.from_doc` rebuilds the panes' view of a saved NAME.results.json.
"""

from __future__ import annotations

from workbench.fmt import printable

from dataclasses import dataclass, field
from typing import Any

from workbench import events as ev


@dataclass
class Row:
    """One implementation at one sweep point."""

    label: str
    impl: str
    sweep_value: Any = None
    status: str = "queued"            # queued (an event came before Started) | running | ok | failed | unavailable | skipped
    samples_ms: list[float] = field(default_factory=list)
    timer: str | None = None
    build_ms: float | None = None
    check: dict | None = None
    record: dict | None = None
    profile: dict | None = None
    ptx: dict | None = None
    ptx_texts: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    device: str | None = None         # where it runs (Started), then the record's (screens/devices_view.py)

    def get(self, section: str, key: str) -> Any:
        """A field of the finished record (`timing.median_ms`), None until then."""
        return ((self.record or {}).get(section) or {}).get(key)


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
        self.finished = True
        self.version += 1

    def _take_record(self, record: dict) -> None:
        row = self.row((0, record.get("label") or record["impl"], record.get("sweep_value")),
                       record["impl"])
        row.record, row.impl, row.status = record, record["impl"], record.get("status", "ok")
        row.error = record.get("error") or row.error
        row.check = record.get("check") or row.check
        row.build_ms = record.get("build_ms", row.build_ms)
        row.profile = record.get("profile") or row.profile
        row.ptx = record.get("ptx") or row.ptx
        row.device = record.get("device") or row.device
        timing = record.get("timing") or {}
        row.timer = timing.get("timer") or row.timer
        if timing.get("samples_ms") and not row.samples_ms:
            row.samples_ms = list(timing["samples_ms"])

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
    row.status, row.device = "running", e.device


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


_HANDLERS = {ev.Started: _started, ev.Built: _built, ev.Checked: _checked, ev.Samples: _samples,
             ev.Result: _result, ev.Profile: _profile, ev.Ptx: _ptx, ev.Error: _error, ev.Compared: _compared}
