"""Events streamed from an execution child to the TUI and to replay (CONTRACTS.md, "Isolation and events").

Small frozen dataclasses, picklable, one per event kind. `row` identifies a result row:
(run_index, label, sweep_value). The TUI and replay consume the same events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RowKey = tuple[int, str, Any]  # (run_index, label, sweep_value)


@dataclass(frozen=True)
class Event:
    row: RowKey


@dataclass(frozen=True)
class Started(Event):
    """A row began: op, impl name, spec label, device, and what runs it (timer kind)."""

    op: str
    impl: str
    spec_label: str
    device: str


@dataclass(frozen=True)
class Built(Event):
    """The builder returned (build_ms includes the first, untimed call: JIT/compile)."""

    build_ms: float


@dataclass(frozen=True)
class Checked(Event):
    """The correctness record (CONTRACTS.md `check`)."""

    check: dict


@dataclass(frozen=True)
class Samples(Event):
    """A batch of timed samples in ms (at most 10 batches per second per child)."""

    samples_ms: tuple[float, ...]
    timer: str


@dataclass(frozen=True)
class Result(Event):
    """The finished result record (CONTRACTS.md "Results", one element of `results`)."""

    record: dict


@dataclass(frozen=True)
class Profile(Event):
    profile: dict


@dataclass(frozen=True)
class Ptx(Event):
    """The `ptx` record plus the texts (not in the results document): kernel name -> PTX/SASS."""

    ptx: dict
    texts: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Compared(Event):
    """An A/B comparison finished (one entry of the document's `ab` list, engine/ab.py);
    row: the A/B row's key (run_index, "A vs B", sweep_value)."""

    entry: dict


@dataclass(frozen=True)
class Error(Event):
    """A one-line error for the row (the row's result record follows with status failed)."""

    message: str


@dataclass(frozen=True)
class Log(Event):
    """A line a child printed (stdout/stderr captured) or a warning; level: info|warning|error."""

    text: str
    level: str = "info"
