"""The result record as types (docs/CONTRACTS.md "Results (JSON)"): one dataclass per part and
an enum of the flags' kinds. The JSON is unchanged: `to_dict()` writes the keys CONTRACTS names,
in its order; `from_dict()` reads them back, and the two meet only at the document's boundary (the
worker's Result event, a document read or written).

    record = Record.from_dict(doc["results"][0])
    record.timing.median_ms if record.timing else None
    Flag.CPU_CONTENDED in record.flag_kinds()

Round-trip safe: a key this version does not know (a newer document's) is kept in `extra` and
written back after the known ones; a known key that an older document lacks stays absent on the
way out unless it was set since. `from_dict` refuses a value of the wrong type with one error
naming the key's path, the value and what is allowed (RecordError).

Watch mode's `last_good` (a row whose current code fails after an earlier version passed:
docs/CONTRACTS.md "Watch mode") is an optional key of such rows only: it rides in `extra` (read
and written back as it was); `last_good(record)` reads it.

The key lists of workbench/results/document.py (RECORD_KEYS, TIMING_KEYS, ...) are the fields'
names (tests/test_record.py holds them to it); `Launch` adds the geometry fields that
workbench/ptx/launch.py writes beside the four the contract names.
"""

from __future__ import annotations

import dataclasses
import numbers
import re
import string
import types
import typing
from collections import abc
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, ClassVar, Iterable, Mapping, Tuple, TypeVar, Union

P = TypeVar("P", bound="Part")


class RecordError(ValueError):
    """A value of the wrong type in a result record: `path: value is X; allowed: Y`."""


# -- flags ---------------------------------------------------------------------------------------
class Flag(Enum):
    """The kinds of a record's `flags` entries, each with its text. The JSON keeps the text (as
    it always has); code reads the kind (`Flag.of(text)`, `Record.flag_kinds()`), never a prefix.

    `template` is the flag's text with `{name}` (and `{name:spec}`) where the row's figures go:
    `Flag.X.format(...)` writes one, `Flag.of(text)` finds the kind of one (the template's fixed
    words around any figures)."""

    template: str

    def __new__(cls, code: str, template: str) -> Flag:
        obj = object.__new__(cls)
        obj._value_ = code
        obj.template = template
        return obj

    INTERPRETER = ("interpreter", "Triton interpreter: host time of numpy emulation, not kernel speed")
    BUILD_CACHED = ("build_cached",
                    "build cached: built earlier in this worker (build_ms is the first call only)")
    CPU_CONTENDED = ("cpu_contended", "CPU contended: {detail}")
    NOT_CONVERGED = ("not_converged", "median not converged: {detail}")
    BELOW_LAUNCH_FLOOR = ("below_launch_floor",
                          "median {median} ms is below the launch floor {floor} ms: within launch "
                          "noise, not a kernel speed")
    GRAPH_REPLAY = ("graph_replay", "CUDA graph replay: {detail}")
    BEATS_CUBLAS = ("beats_cublas", "beats cuBLAS {detail}")
    ABOVE_COPY = ("above_copy", "above the measured copy {detail}")
    ABOVE_PEAK = ("above_peak", "{value} is above the physical bound {detail}")
    STREAMS_GATE = ("streams_gate", "streams gate: {detail}")
    CPU_BOUND = ("cpu_bound", "CPU bound: {detail}")
    TRUST = ("trust", "trust: {detail}")
    PTX_FAILED = ("ptx_failed", "ptx failed: {detail}")
    PTX_UNAVAILABLE = ("ptx_unavailable", "ptx unavailable: {detail}")
    PTX_ERROR = ("ptx_error", "ptx: {detail}")
    WORKER_REPLACED = ("worker_replaced", "{problem}: this worker was replaced after the row")
    # watch mode before `last_good` (documents of earlier versions: the kept record was shown as current)
    WATCH_STALE = ("watch_stale", "watch: the last edit failed ({error}); showing the last good result")
    # watch mode: this row's current code fails; the record is the failure, `last_good` keeps the
    # figures of the earlier code (docs/CONTRACTS.md "Watch mode")
    WATCH_FAILED = ("watch_failed", "watch: the current code fails; last_good keeps the figures measured "
                                    "from earlier code ({then})")
    KEPT = ("kept", "kept from an earlier run: the run after it was cancelled before this row")  # the TUI's
    STRICT = ("strict", "strict: {n} value comparisons judged in a clean process that imports no plugin code")

    @property
    def code(self) -> str:
        return str(self.value)

    def format(self, **figures: Any) -> str:
        """The flag's text with `figures` in its template's places."""
        return self.template.format(**figures)

    @property
    def pattern(self) -> re.Pattern[str]:
        found = _PATTERNS.get(self)
        if found is None:
            parts = [re.escape(literal) + (".*?" if name is not None else "")
                     for literal, name, _, _ in string.Formatter().parse(self.template)]
            found = _PATTERNS[self] = re.compile("".join(parts), re.DOTALL)
        return found

    @classmethod
    def of(cls, text: Any) -> Flag | None:
        """The kind of one flag's text, or None for a flag of no known kind (a newer version's)."""
        if not isinstance(text, str):
            return None
        return next((kind for kind in cls if kind.pattern.fullmatch(text)), None)


_PATTERNS: dict[Flag, re.Pattern[str]] = {}


def flag_kinds(flags: Iterable[Any] | None) -> set[Flag]:
    """The kinds of a list of flag texts (None: none); texts of no known kind are left out."""
    return {kind for kind in (Flag.of(text) for text in flags or ()) if kind is not None}


def has_flag(record: Mapping[str, Any] | Record | None, kind: Flag) -> bool:
    """True when `record` (a record dict or a Record; None: no record) carries a flag of `kind`."""
    if record is None:
        return False
    flags = record.flags if isinstance(record, Record) else record.get("flags")
    return kind in flag_kinds(flags)


def first_flag(record: Mapping[str, Any] | Record | None, kind: Flag) -> str | None:
    """The text of the first flag of `kind` in `record`, or None."""
    if record is None:
        return None
    flags = record.flags if isinstance(record, Record) else record.get("flags")
    return next((text for text in flags or () if Flag.of(text) is kind), None)


# -- the parts -----------------------------------------------------------------------------------
def _describe(tp: Any) -> str:
    """What a type annotation allows, in words."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(t) for t in typing.get_args(tp))
    if tp is type(None):
        return "null"
    if tp is Any:
        return "anything"
    if isinstance(tp, type) and issubclass(tp, Part):
        return f"an object ({tp.__name__})"
    base = origin or tp
    names = {float: "a number", int: "an integer", bool: "true/false", str: "a string",
             list: "a list", dict: "an object"}
    if base is list and typing.get_args(tp):
        return f"a list of {_describe(typing.get_args(tp)[0]).removeprefix('a ').removeprefix('an ')}s"
    return names.get(base, getattr(base, "__name__", str(base)))


def _json_type(value: Any) -> str:
    names = {type(None): "null", bool: "true/false", int: "an integer", float: "a number",
             str: "a string", list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__)


Checker = Callable[[Any, str], Tuple[bool, Any]]  # (value, its path) -> (fits, value converted)
_SIMPLE = {str: (str,), bool: (bool,), dict: (dict,)}


def _is_object(value: Any) -> bool:
    return type(value) is dict or isinstance(value, abc.Mapping)


def _checker(tp: Any) -> Checker:
    """A function that checks (and converts: a part's object into its dataclass) a value against
    annotation `tp`, made once per field: reading a record is a loop over these. The path is
    built lazily by the caller only where a nested part or list needs it."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        options = typing.get_args(tp)
        nullable = type(None) in options
        checks = [_checker(o) for o in options if o is not type(None)]

        def union(value: Any, where: str) -> tuple[bool, Any]:
            if value is None:
                return nullable, None
            for check in checks:
                ok, out = check(value, where)
                if ok:
                    return True, out
            return False, None
        return union
    if tp is Any:
        return lambda value, where: (True, value)
    if isinstance(tp, type) and issubclass(tp, Part):
        part = tp
        return lambda value, where: (True, part.from_dict(value, where)) if _is_object(value) else (False, None)
    base = origin or tp
    if base is float:  # an integer is a number too (JSON has one number type); numpy's count
        return lambda value, where: (type(value) in (float, int) or (isinstance(value, numbers.Real)
                                                                    and not isinstance(value, bool)), value)
    if base is int:
        return lambda value, where: (type(value) is int or (isinstance(value, numbers.Integral)
                                                           and not isinstance(value, bool)), value)
    if base is list:
        (item,) = typing.get_args(tp) or (Any,)
        check_item = _checker(item)
        plain = item in (Any, str, float, int) or typing.get_origin(item) is dict

        def items(value: Any, where: str) -> tuple[bool, Any]:
            if not isinstance(value, (list, tuple)):  # a tuple is written as a JSON list
                return False, None
            out = []
            for i, entry in enumerate(value):
                ok, converted = check_item(entry, "" if plain else f"{where}[{i}]")
                if not ok:
                    raise RecordError(f"{where}[{i}]: {entry!r} is {_json_type(entry)}; allowed: {_describe(item)}")
                out.append(converted)
            return True, out
        return items
    allowed = _SIMPLE.get(base, (base,))
    return lambda value, where: (isinstance(value, allowed), value)


@dataclass(frozen=True)
class _Layout:
    """A part's fields as reading and writing need them, worked out once per class."""

    keys: tuple[str, ...]
    known: frozenset[str]
    checks: tuple[tuple[str, Checker, Any, bool], ...]  # key, checker, annotation (for the error), needs its path
    defaults: dict[str, Any]


def _nested(tp: Any) -> bool:
    """Whether a value of annotation `tp` may hold a part or a list (whose errors name a path)."""
    options = typing.get_args(tp) if typing.get_origin(tp) in (Union, types.UnionType) else (tp,)
    return any(typing.get_origin(o) is list or o is list or (isinstance(o, type) and issubclass(o, Part))
               for o in options)


def _out(value: Any) -> Any:
    if isinstance(value, Part):
        return value.to_dict()
    if isinstance(value, list):
        return [_out(v) for v in value]
    return value


class Part:
    """What every part of the record shares: `to_dict`/`from_dict`, the unknown keys kept in
    `extra`, and item access by key (`part["median_ms"]`) for code that still writes by key."""

    extra: dict[str, Any]
    absent: frozenset[str]
    _layouts: ClassVar[dict[type, _Layout]] = {}

    @classmethod
    def _layout(cls) -> _Layout:
        layout = Part._layouts.get(cls)
        if layout is None:
            hints = typing.get_type_hints(cls)
            fields = [f for f in dataclasses.fields(cls) if f.name not in ("extra", "absent")]  # type: ignore[arg-type]
            keys = tuple(f.name for f in fields)
            layout = Part._layouts[cls] = _Layout(keys, frozenset(keys),
                                                  tuple((k, _checker(hints[k]), hints[k], _nested(hints[k]))
                                                        for k in keys),
                                                  {f.name: _default(f) for f in fields})
        return layout

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The record keys of this part, in the document's order."""
        return cls._layout().keys

    @classmethod
    def from_dict(cls: type[P], data: Mapping[str, Any], where: str | None = None) -> P:
        """The part read from its JSON object; RecordError names the first value of a wrong type."""
        where = where or cls.__name__.lower()
        if not _is_object(data):
            raise RecordError(f"{where}: {data!r} is {_json_type(data)}; allowed: an object")
        layout, values = cls._layout(), {}
        for key, check, annotation, nested in layout.checks:
            if key not in data:
                continue
            value = data[key]
            ok, converted = check(value, f"{where}.{key}" if nested and value is not None else where)
            if not ok:
                raise RecordError(f"{where}.{key}: {value!r} is {_json_type(value)}; "
                                  f"allowed: {_describe(annotation)}")
            values[key] = converted
        part = cls(**values)
        if len(values) < len(data):
            part.extra = {k: v for k, v in data.items() if k not in layout.known}
        if len(values) < len(layout.keys):
            part.absent = frozenset(k for k in layout.keys if k not in data)
        return part

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: every key the contract names (what was not measured: None), then the
        unknown keys it was read with; a key the source lacked stays out while unset."""
        layout, absent, out = self._layout(), self.absent, {}
        for key in layout.keys:
            value = getattr(self, key)
            if absent and key in absent and value == layout.defaults[key]:
                continue
            out[key] = _out(value)
        if self.extra:
            out.update(self.extra)
        return out

    # item access for code that still reads and writes the record by key
    def __getitem__(self, key: str) -> Any:
        if key in self._layout().known:
            return getattr(self, key)
        return self.extra[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if key in self._layout().known:
            setattr(self, key, value)
        else:
            self.extra[key] = value

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._layout().known or key in self.extra else default

    def update(self, **values: Any) -> None:
        for key, value in values.items():
            self[key] = value


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _bookkeeping() -> Any:
    return field(default_factory=dict, repr=False)


@dataclass
class Timing(Part):
    """`timing` (CONTRACTS.md; engine/measure/bench.py, timing.py, launch_floor.py, timing_notes.py)."""

    timer: str | None = None
    median_ms: float | None = None
    p20_ms: float | None = None
    p80_ms: float | None = None
    min_ms: float | None = None
    mean_ms: float | None = None
    n: int | None = None
    flush_l2: bool | None = None
    launch_bound: bool | None = None
    device_median_ms: float | None = None
    clock_fell: bool | None = None
    samples_ms: list[float] | None = None
    launch_floor_ms: float | None = None
    sm_clock_mhz: dict[str, Any] | None = None
    throttle: list[str] | None = None
    flush_kind: str | None = None
    host_launch_ms: float | None = None
    headroom_ms: float | None = None
    batches: int | None = None
    below_launch_floor: bool | None = None
    device_median_source: str | None = None
    device_median_l2_warm: bool | None = None
    mode: str | None = None
    env: dict[str, Any] | None = None
    sustained: bool | None = None
    warmup_calls: int | None = None
    warmup_back_to_back: int | None = None
    extra: dict[str, Any] = _bookkeeping()
    absent: frozenset[str] = field(default=frozenset(), repr=False, compare=False)


@dataclass
class Check(Part):
    """`check` (CONTRACTS.md; workbench/check/compare.CheckReport.as_dict)."""

    passed: bool | None = None
    gate: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    rel_l2_err: float | None = None
    first_bad_index: list[int] | None = None
    atol: float | None = None
    rtol: float | None = None
    norm_rtol: float | None = None
    ref_rms: float | None = None
    nonfinite_mismatches: int | None = None
    chunks: int | None = None
    input_set: str | None = None
    sets_checked: list[str] | None = None
    extra: dict[str, Any] = _bookkeeping()
    absent: frozenset[str] = field(default=frozenset(), repr=False, compare=False)


@dataclass
class Traffic(Part):
    """`traffic` (CONTRACTS.md; engine/measure/traffic.py, relative.py). The byte and FLOP counts
    come from the implementation's cost model (a plugin's too): numbers, integers in practice."""

    bytes_read: float | None = None
    bytes_written: float | None = None
    bytes: float | None = None
    bytes_moved_est: float | None = None
    flops: float | None = None
    gbps: float | None = None
    tflops: float | None = None
    intensity: float | None = None
    bound: str | None = None
    ceiling: str | None = None
    pct_of_ceiling: float | None = None
    l2_resident: bool | None = None
    peak: str | None = None
    pct_of_peak: float | None = None
    pct_of_copy: float | None = None
    pct_of_cublas: float | None = None
    speedup_vs_pytorch: float | None = None
    extra: dict[str, Any] = _bookkeeping()
    absent: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    SPEED: ClassVar[tuple[str, ...]] = ("gbps", "tflops", "pct_of_ceiling", "pct_of_peak", "pct_of_copy",
                                        "pct_of_cublas")

    def clear_speed(self) -> None:
        """The speed figures None (a measurement error: the row keeps its bytes, not its speed)."""
        for key in self.SPEED:
            setattr(self, key, None)


@dataclass
class Launch(Part):
    """`launch`: the contract's grid, num_warps, block_threads, waves, then the geometry
    workbench/ptx/launch.geometry_record adds (occupancy and what limits it)."""

    grid: list[int] | None = None
    num_warps: int | None = None
    block_threads: int | None = None
    waves: float | None = None
    blocks: int | None = None
    sm_count: int | None = None
    blocks_per_sm: int | None = None
    blocks_per_sm_limits: dict[str, Any] | None = None
    limiter: str | None = None
    occupancy: float | None = None
    registers: int | None = None
    shared_bytes: int | None = None
    notes: list[str] | None = None
    extra: dict[str, Any] = _bookkeeping()
    absent: frozenset[str] = field(default=frozenset(), repr=False, compare=False)


@dataclass
class Measured(Part):
    """`measured`: Nsight Compute's DRAM bytes and kernel time (workbench/counters.py)."""

    tool: str | None = None
    clock_control: str | None = None
    cache_control: str | None = None
    dram_bytes_read: int | None = None
    dram_bytes_write: int | None = None
    dram_bytes: int | None = None
    kernel_us: float | None = None
    kernel_count: int | None = None
    kernels: list[dict[str, Any]] | None = None
    complete: bool | None = None
    model_bytes: int | None = None
    ideal_bytes: int | None = None
    pct_of_model: float | None = None
    reason: str | None = None
    report_path: str | None = None
    extra: dict[str, Any] = _bookkeeping()
    absent: frozenset[str] = field(default=frozenset(), repr=False, compare=False)


@dataclass
class DiagnosisEntry(Part):
    """One finding of `diagnosis` (workbench/diagnosis/core.Finding.as_dict)."""

    rule: str | None = None
    evidence: str | None = None
    suggestion: str | None = None
    severity: str | None = None
    data: dict[str, Any] | None = None
    extra: dict[str, Any] = _bookkeeping()
    absent: frozenset[str] = field(default=frozenset(), repr=False, compare=False)


@dataclass
class Record(Part):
    """One result record (one row): CONTRACTS.md "Results (JSON)" and its extensions.

    profile, ptx, estimate and tuned stay plain objects (their shapes are the profiler's, the PTX
    extractor's, admission's and workbench/tuning.Tuned.record's)."""

    run_index: int | None = None
    op: str | None = None
    impl: str | None = None
    label: str | None = None
    params: dict[str, Any] | None = None
    shape: dict[str, Any] | None = None
    dtype: str | None = None
    sweep_value: Any = None
    status: str | None = None
    error: str | None = None
    device: str | None = None
    build_ms: float | None = None
    peak_mem_bytes: int | None = None
    timing: Timing | None = None
    check: Check | None = None
    traffic: Traffic | None = None
    launch: Launch | None = None
    profile: dict[str, Any] | None = None
    ptx: dict[str, Any] | None = None
    recompiles: int | None = None
    flags: list[str] = field(default_factory=list)
    fp32_precision: str | None = None
    estimate: dict[str, Any] | None = None
    tuned: dict[str, Any] | None = None
    measured: Measured | None = None
    diagnosis: list[DiagnosisEntry] = field(default_factory=list)
    extra: dict[str, Any] = _bookkeeping()
    absent: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    PARTS: ClassVar[dict[str, type[Part]]] = {"timing": Timing, "check": Check, "traffic": Traffic,
                                              "launch": Launch, "measured": Measured}

    def __setitem__(self, key: str, value: Any) -> None:
        """By key, as a dict: a part given as its JSON object is read into its dataclass."""
        part = self.PARTS.get(key)
        if part is not None and isinstance(value, Mapping):
            value = part.from_dict(value, key)
        elif key == "diagnosis" and isinstance(value, list):
            value = [DiagnosisEntry.from_dict(v, "diagnosis") if isinstance(v, Mapping) else v for v in value]
        super().__setitem__(key, value)

    def flag_kinds(self) -> set[Flag]:
        """The kinds of this record's flags (Flag), those of no known kind left out."""
        return flag_kinds(self.flags)

    def add_flag(self, kind: Flag, **figures: Any) -> str:
        """Append a flag of `kind` with `figures` in its text; returns the text."""
        text = kind.format(**figures)
        self.flags.append(text)
        return text

    def fail(self, error: str) -> None:
        """status failed with `error`."""
        self.status, self.error = "failed", error


def last_good(record: Mapping[str, Any] | Record | None) -> dict[str, Any] | None:
    """Watch mode's `last_good` of a record (`{"record", "plugins", "started", "changed"}`: the last
    ok record of the row, measured from earlier code), or None where the row has none."""
    if record is None:
        return None
    found = record.get("last_good")
    return found if isinstance(found, dict) else None


def read_record(data: Mapping[str, Any] | Record, where: str = "record") -> Record:
    """A Record from a record dict (a Record is returned as it is)."""
    return data if isinstance(data, Record) else Record.from_dict(data, where)
