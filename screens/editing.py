"""Editing a run: the UI's edits turned into a new `RunSpec` (pure functions, no Textual).

The app keeps one RunSpec per op being edited; widgets post raw text, these functions parse it
(raising ValueError with one line naming the field) and return a changed copy.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterable, Mapping

from workbench.engine.rows import run_row_keys
from workbench.events import RowKey
from workbench.params import param_problem, show
from workbench.session.model import ImplRef, RunSpec, Session, Sweep

from .catalog import OpInfo

DEFAULT_ACTIONS = ("check", "bench")
INTEGER_TEXT = re.compile(r"-?[0-9]+")  # what a shape field takes (a sign for the message)
INT64_MAX = 2 ** 63 - 1  # torch sizes are int64: a dimension beyond it cannot even be allocated
TOO_LARGE = f"must be at most 2^63-1 = {INT64_MAX:,} (torch sizes are int64)"


def default_run(op: OpInfo) -> RunSpec:
    """A new run of `op`: its default shape and dtype, check and bench, and every implementation
    that can do them here (`impls: all` when each can): the checklist shows the others unticked,
    where a run of `all` would make them `unavailable` rows nobody asked for (the CUDA ones on a
    CPU machine)."""
    usable = [i.name for i in op.impls if not i.blocked(DEFAULT_ACTIONS, op.default_dtype)]
    impls = None if len(usable) in (0, len(op.impls)) else tuple(ImplRef(name) for name in usable)
    return RunSpec(op=op.name, impls=impls, shape=dict(op.defaults), dtype=op.default_dtype,
                   actions=DEFAULT_ACTIONS)


def shape_of(run: RunSpec, op: OpInfo) -> dict[str, Any]:
    """The run's shape with the op's defaults for what it leaves out."""
    return {**op.defaults, **run.shape}


def dtype_of(run: RunSpec, op: OpInfo) -> str:
    return run.dtype or op.default_dtype


def selected(run: RunSpec, op: OpInfo) -> list[str]:
    """Names of the selected implementations (`impls: all` selects every one)."""
    if run.impls is None:
        return [i.name for i in op.impls]
    return [ref.name for ref in run.impls]


def with_impls(run: RunSpec, op: OpInfo, names: Iterable[str]) -> RunSpec:
    """Select `names`, keeping the params and labels of refs already there, in the op's order."""
    names = set(names)
    if run.impls is None and names == {i.name for i in op.impls}:
        return run
    kept = {ref.name: ref for ref in run.impls or ()}
    refs = tuple(kept.get(i.name, ImplRef(i.name)) for i in op.impls if i.name in names)
    return dataclasses.replace(run, impls=refs)


def params_of(run: RunSpec, op: OpInfo, impl: str) -> dict[str, Any]:
    """An implementation's params: its defaults, updated with the run's overrides."""
    info = op.impl(impl)
    ref = next((r for r in run.impls or () if r.name == impl), None)
    return {**(info.params if info else {}), **(ref.params if ref else {})}


def with_params(run: RunSpec, op: OpInfo, impl: str, texts: Mapping[str, str]) -> RunSpec:
    """Set `impl`'s params from text; only values that differ from the defaults are kept.
    Raises ValueError naming a value the parameter cannot take (workbench.params)."""
    info = op.impl(impl)
    defaults = info.params if info else {}
    overrides = {k: v for k, t in texts.items() if t.strip() and (v := parse_value(t)) != defaults.get(k)}
    for key, value in overrides.items():
        problem = param_problem(key, value, defaults.get(key))
        if problem:
            raise ValueError(f"{impl} {key}: {problem}")
    if run.impls is None:  # `all` written out, so that one of them can carry params
        run = dataclasses.replace(run, impls=tuple(ImplRef(i.name) for i in op.impls))
    refs = tuple(dataclasses.replace(r, params=overrides) if r.name == impl else r
                 for r in run.impls or ())
    return dataclasses.replace(run, impls=refs)


def with_shape(run: RunSpec, op: OpInfo, texts: Mapping[str, str], dtype: str) -> RunSpec:
    """Set the shape fields from text and the dtype; raises ValueError naming every bad field
    ("M: ...; N: ...": the editor showed one, and an earlier bad field looked accepted)."""
    shape, problems = {}, []
    for name in op.shape_fields:
        try:
            shape[name] = _positive_int(name, texts.get(name, ""))
        except ValueError as exc:
            problems.append(str(exc))
    if problems:  # the op's own rules on the fields that parsed (M: 0 hid behind N: abc), others at their defaults
        checked = op.validate({name: shape.get(name, op.defaults.get(name, 1)) for name in op.shape_fields}, dtype)
        raise ValueError("; ".join([checked, *problems] if checked else problems))
    problem = op.validate(shape, dtype)
    if problem:
        raise ValueError(problem)
    return dataclasses.replace(run, shape=shape, dtype=dtype)


def with_actions(run: RunSpec, actions: Iterable[str]) -> RunSpec:
    order = ("check", "bench", "profile", "ptx")
    chosen = tuple(a for a in order if a in set(actions))
    return dataclasses.replace(run, actions=chosen or DEFAULT_ACTIONS)


def parse_sweep(params_text: str, values_text: str, op: OpInfo) -> Sweep | None:
    """`M, N` and `256, 1024, 4096` -> Sweep; empty params -> None; raises ValueError in
    --check's words (`sweep.values[2]: must be a positive integer, got 0`)."""
    params = tuple(p.strip() for p in params_text.replace(",", " ").split() if p.strip())
    if not params:
        return None
    known = set(op.shape_fields) | {k for i in op.impls for k in i.params}
    unknown = [(index, p) for index, p in enumerate(params) if p not in known]
    if unknown:
        index, name = unknown[0]
        raise ValueError(f"sweep.params[{index}]: {show(name)} is neither a shape field of {op.name} "
                         f"({', '.join(op.shape_fields)}) nor a parameter of its implementations; allowed: "
                         f"{', '.join(sorted(known))}")
    values = tuple(parse_value(v) for v in values_text.replace(",", " ").split())
    if not values:
        raise ValueError("sweep.values: give at least one value")
    problems = []  # every bad value, as --check lists them
    for index, value in enumerate(values):
        for param in params:
            if param in op.shape_fields:
                ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
                problem = None if ok else f"must be a positive integer, got {show(value)}"
                problem = problem or _too_large(value)
            else:
                default = next(i.params[param] for i in op.impls if param in i.params)
                problem = param_problem(param, value, default)
            if problem:  # the parameter named where the sweep has several
                problems.append(f"sweep.values[{index}]: {f'{param}: ' if len(params) > 1 else ''}{problem}")
    if problems:
        raise ValueError("; ".join(problems))
    return Sweep(params=params, values=values)


def sweep_texts(sweep: Sweep | None) -> tuple[str, str]:
    if sweep is None:
        return "", ""
    return ", ".join(sweep.params), ", ".join(str(v) for v in sweep.values)


def parse_value(text: str) -> Any:
    """A typed value as the session file would hold it, read as YAML reads a plain scalar:
    '128' -> 128, '0.5' -> 0.5, 'true' -> True; anything else stays text ('1e6' too, which
    YAML 1.1 reads as text: float() made it 1000000.0, and the message that refused it then
    named a value nobody typed). So the editor and `--check` of the saved file agree."""
    import yaml

    text = text.strip()
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return value if isinstance(value, (bool, int, float, str)) and text else text


def _positive_int(name: str, text: str) -> int:
    """The field's text as a size, or ValueError in --check's words naming the text as typed
    (`M: must be a positive integer, got "1e6"`). Only ASCII digits, with an optional minus for
    --check's message on a negative number: int() also takes `1_000` and other scripts' digits,
    and the field once filtered keystrokes (type="integer"), so `1e6` silently became 16."""
    stripped = text.strip()
    if not INTEGER_TEXT.fullmatch(stripped):
        raise ValueError(f"{name}: must be a positive integer, got {show(stripped)}")
    try:
        value = int(stripped)
    except ValueError:  # more digits than Python turns into an int (4300): far beyond int64
        raise ValueError(f"{name}: {TOO_LARGE}, got {show(stripped)}") from None
    if value < 0:  # the words --check uses for the same value (session_schema)
        raise ValueError(f"{name}: must be a positive integer, got {value}")
    # 0 is the op's to refuse (OpInfo.validate: its spec): `sleep_ms: 0` is a size the sleep op
    # takes, as --check does, where gelu's M: 0 gets the words above from the spec
    problem = _too_large(value)
    if problem:
        raise ValueError(f"{name}: {problem}")
    return value


def _too_large(value: int) -> str | None:
    if value <= INT64_MAX:
        return None
    return f"{TOO_LARGE}, got {value}"


def row_keys(run: RunSpec, op: OpInfo) -> list[RowKey]:
    """The keys (run index 0, label, sweep value) of the rows the run will produce, in the
    order of its results document: implementations x sweep points (engine/rows, the one
    counter)."""
    return run_row_keys(0, run, [i.name for i in op.impls])


def row_count(run: RunSpec, op: OpInfo) -> int:
    """Rows the run will produce: implementations x sweep points."""
    return len(row_keys(run, op))


def dims_text(run: RunSpec, op: OpInfo) -> str:
    """`512x512`; a swept field by its name (`2xN`): its value in the shape (the op's default
    where the file gives none) is not one the run takes (`add 2x512` would misname a run
    sweeping N over 7, 64, 128)."""
    swept = set(run.sweep.params) if run.sweep else set()
    return "x".join(name if name in swept else str(v) for name, v in shape_of(run, op).items())


def label(run: RunSpec, op: OpInfo) -> str:
    sweep = f" sweep {','.join(run.sweep.params)}" if run.sweep else ""
    return f"{run.op} {dims_text(run, op)} {dtype_of(run, op)}{sweep}"


SHORT_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}


def title(run: RunSpec, op: OpInfo) -> str:
    """A short line for the run list: `gelu 512x512 f32`, `add 2xN f16 ↔N` for a sweep, `(ptx)`
    when it does not bench."""
    dtype = dtype_of(run, op)
    text = f"{run.op} {dims_text(run, op)} {SHORT_DTYPES.get(dtype, dtype)}"
    if run.sweep:
        text += f" ↔{','.join(run.sweep.params)}"
    if "bench" not in run.actions:
        text += f" ({'+'.join(run.actions)})"
    return text


def commit(session: Session, index: int | None, run: RunSpec) -> tuple[Session, int]:
    """Put `run` into the session: replace run `index`, or append it. Returns the new index."""
    runs = list(session.runs)
    if index is None or index >= len(runs):
        runs.append(run)
        index = len(runs) - 1
    else:
        runs[index] = run
    return dataclasses.replace(session, runs=tuple(runs)), index
