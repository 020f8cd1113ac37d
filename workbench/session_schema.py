"""Session data (plain YAML values) <-> the frozen model of `workbench.session_model`.

`build_session(data, problems)` checks the structure of CONTRACTS.md "Session file" (keys,
types, ranges) and records every problem with its path; it returns a Session only when the
structure is sound. `session_to_data(session)` is the inverse: plain types only.
Registry checks (op, impl, param, shape and dtype names) live in `workbench.session_checks`.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from typing import Any, Callable, Mapping

from workbench.dtypes import DType, Fp32Precision
from workbench.session_model import ACTIONS, SCHEMA_VERSION, ImplRef, RunSpec, Session, Settings, Sweep
from workbench.session_yaml import Problems, child_path, show

TOP_KEYS = ("schema_version", "name", "description", "plugins", "settings", "runs")
RUN_KEYS = ("op", "impls", "shape", "dtype", "actions", "sweep", "settings")
IMPL_KEYS = ("name", "params", "label")
SWEEP_KEYS = ("params", "values")
DEFAULT_ACTIONS = ("check", "bench")
DEVICE_RE = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")


def kind_of(value: object) -> str:
    """A value's YAML kind in words, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def suggest(value: object, allowed: "list[str] | tuple[str, ...]") -> str:
    close = difflib.get_close_matches(str(value), [str(a) for a in allowed], n=1)
    return f" (did you mean {show(close[0])}?)" if close else ""


def unknown_keys(data: dict, path: str, allowed: tuple[str, ...], problems: Problems) -> None:
    for key in data:
        if key not in allowed:
            problems.add(child_path(path, key),
                         f"unknown key{suggest(key, allowed)}; allowed: {', '.join(allowed)}")


# -- settings --------------------------------------------------------------------------------
def _number(low: float, *, low_open: bool = False, high: float | None = None, high_open: bool = False):
    def rule(value: Any) -> tuple[Any, str | None]:
        bounds = f"{'>' if low_open else '>='} {low:g}" + (f" and {'<' if high_open else '<='} {high:g}" if high is not None else "")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None, f"must be a number {bounds}, got {show(value)}"
        bad_low = value <= low if low_open else value < low
        bad_high = high is not None and (value >= high if high_open else value > high)
        if bad_low or bad_high or value != value:
            return None, f"must be a number {bounds}, got {show(value)}"
        return float(value), None
    return rule


def _integer(low: int):
    def rule(value: Any) -> tuple[Any, str | None]:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            word = "a positive integer" if low == 1 else f"an integer >= {low}"
            return None, f"must be {word}, got {show(value)}"
        return value, None
    return rule


def _device(value: Any) -> tuple[Any, str | None]:
    if isinstance(value, str) and DEVICE_RE.match(value):
        return value, None
    return None, f"must be auto, cpu, cuda or cuda:N, got {show(value)}"


def _boolean(value: Any) -> tuple[Any, str | None]:
    return (value, None) if isinstance(value, bool) else (None, f"must be true or false, got {show(value)}")


def _precision(value: Any) -> tuple[Any, str | None]:
    allowed = [p.value for p in Fp32Precision]
    return (value, None) if value in allowed else (None, f"must be one of {', '.join(allowed)}, got {show(value)}")


SETTING_RULES: dict[str, Callable[[Any], tuple[Any, str | None]]] = {
    "device": _device,
    "warmup_ms": _number(0),
    "rep_ms": _number(0, low_open=True),
    "min_samples": _integer(1),
    "target_rel_error": _number(0, low_open=True, high=1, high_open=True),
    "timeout_s": _number(0, low_open=True),
    "flush_l2": _boolean,
    "fp32_precision": _precision,
    "seed": _integer(0),
}
SETTING_KEYS = tuple(f.name for f in dataclasses.fields(Settings))


def check_settings(data: Any, path: str, problems: Problems) -> dict[str, Any]:
    """Validated settings overrides (only the keys present), normalised (ints -> floats for ms)."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        problems.add(path, f"must be a mapping of settings, got {kind_of(data)}")
        return {}
    unknown_keys(data, path, SETTING_KEYS, problems)
    out = {}
    for key in SETTING_KEYS:
        if key in data:
            value, error = SETTING_RULES[key](data[key])
            if error:
                problems.add(child_path(path, key), error)
            else:
                out[key] = value
    return out


# -- top level -------------------------------------------------------------------------------
@dataclasses.dataclass
class Built:
    """What the structure check produced: the session when sound, else the sound parts.

    runs: (index in the file, run, keys with problems) for every run that names its op, so
    that registry checks can report the rest of its problems too; plugins: the well-formed
    plugin entries.
    """

    session: Session | None
    runs: list[tuple[int, RunSpec, frozenset[str]]]
    plugins: list[str]


def build_session(data: Any, problems: Problems) -> Built:
    """Check the structure; `Built.session` is None when anything is wrong (see `problems`)."""
    if not isinstance(data, dict):
        problems.add("", f"a session must be a mapping with schema_version, name and runs; got {kind_of(data)}")
        return Built(None, [], [])
    if not _schema_version(data, problems):
        return Built(None, [], [])  # a newer (or missing) schema: the rest would only be noise
    unknown_keys(data, "", TOP_KEYS, problems)
    name = _text(data, "name", "", problems, required=True)
    description = _text(data, "description", "", problems)
    plugins = _text_list(data.get("plugins"), "plugins", problems)
    settings = check_settings(data.get("settings"), "settings", problems)
    runs = _runs(data, problems)
    if problems:
        return Built(None, runs, plugins)
    session = Session(name=name, runs=tuple(run for _, run, _ in runs), description=description,
                      plugins=tuple(plugins), settings=Settings(**settings),
                      schema_version=data["schema_version"])
    return Built(session, runs, plugins)


def _schema_version(data: dict, problems: Problems) -> bool:
    version = data.get("schema_version")
    if "schema_version" not in data:
        problems.add("schema_version", f"missing; this program reads schema_version {SCHEMA_VERSION}")
        return False
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        problems.add("schema_version", f"must be a positive integer, got {show(version)}")
        return False
    if version > SCHEMA_VERSION:
        problems.add("schema_version", f"the file has schema_version {version}; this program reads "
                                       f"schema_version {SCHEMA_VERSION} (upgrade workbench to open it)")
        return False
    return True


def _text(data: dict, key: str, path: str, problems: Problems, *, required: bool = False) -> str | None:
    value = data.get(key)
    where = child_path(path, key)
    if value is None:
        if required:
            problems.add(where, "missing (required)")
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        problems.add(where, f"must be non-empty text, got {show(value)}")
        return None
    return value


def _text_list(value: Any, path: str, problems: Problems) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        problems.add(path, f"must be a list of text, got {kind_of(value)}")
        return []
    out = []
    for index, item in enumerate(value):
        if isinstance(item, str) and item.strip():
            out.append(item)
        else:
            problems.add(child_path(path, index), f"must be non-empty text, got {show(item)}")
    return out


def _runs(data: dict, problems: Problems) -> list[tuple[int, RunSpec, frozenset[str]]]:
    runs = data.get("runs")
    if runs is None:
        problems.add("runs", "missing (required): a list of runs, each with at least `op`")
        return []
    if not isinstance(runs, list) or not runs:
        problems.add("runs", f"must be a non-empty list of runs, got {show(runs)}")
        return []
    built = ((i, _run(item, f"runs[{i}]", problems)) for i, item in enumerate(runs))
    return [(i, *run) for i, run in built if run is not None]


# -- one run ---------------------------------------------------------------------------------
def _run(data: Any, path: str, problems: Problems) -> tuple[RunSpec, frozenset[str]] | None:
    """The run and the names of its keys that had problems (the run stands in with neutral
    values for those, so that registry checks can still look at the rest); None without op."""
    if not isinstance(data, dict):
        problems.add(path, f"a run must be a mapping with at least `op`, got {kind_of(data)}")
        return None
    unknown_keys(data, path, RUN_KEYS, problems)
    bad: set[str] = set()

    def field(key: str, check, *args):
        before = len(problems.items)
        value = check(*args, child_path(path, key), problems)
        if len(problems.items) > before:
            bad.add(key)
        return value

    op = _text(data, "op", path, problems, required=True)
    impls = field("impls", _impls, data.get("impls", "all"))
    shape = field("shape", _shape, data.get("shape"))
    dtype = field("dtype", _dtype, data.get("dtype"))
    actions = field("actions", _actions, data.get("actions"))
    sweep = field("sweep", _sweep, data.get("sweep"))
    settings = field("settings", check_settings, data.get("settings"))
    if op is None:
        return None
    run = RunSpec(op=op, impls=impls, shape=shape, dtype=dtype, actions=actions, sweep=sweep,
                  settings=settings)
    return run, frozenset(bad)


def _impls(value: Any, path: str, problems: Problems) -> tuple[ImplRef, ...] | None:
    if value == "all" or value is None:
        return None
    if not isinstance(value, list) or not value:
        problems.add(path, f"must be `all` or a non-empty list of implementation names, got {show(value)}")
        return None
    refs: list[ImplRef] = []
    labels: dict[str, int] = {}
    for index, item in enumerate(value):
        where = child_path(path, index)
        ref = _impl(item, where, problems)
        if ref is None:
            continue
        if ref.display in labels:
            problems.add(where, f"label {show(ref.display)} repeats impls[{labels[ref.display]}]; "
                                "give one of them a distinct `label`")
        labels.setdefault(ref.display, index)
        refs.append(ref)
    return tuple(refs)


def _impl(item: Any, path: str, problems: Problems) -> ImplRef | None:
    if isinstance(item, str) and item:
        return ImplRef(name=item)
    if not isinstance(item, dict):
        problems.add(path, f"must be an implementation name or {{name, params, label}}, got {show(item)}")
        return None
    unknown_keys(item, path, IMPL_KEYS, problems)
    name = _text(item, "name", path, problems, required=True)
    label = _text(item, "label", path, problems)
    params = item.get("params") or {}
    if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
        problems.add(child_path(path, "params"), f"must be a mapping of parameter names to values, got {show(params)}")
        return None
    if name is None:
        return None
    return ImplRef(name=name, params=dict(params), label=label)


def _shape(value: Any, path: str, problems: Problems) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.add(path, f"must be a mapping of size parameters (e.g. {{M: 1024, N: 1024}}), got {show(value)}")
        return {}
    out = {}
    for key, size in value.items():
        if isinstance(size, bool) or not isinstance(size, int):  # the sign is the op's rule (NON_NEGATIVE)
            problems.add(child_path(path, key), f"must be a positive integer, got {show(size)}")
        else:
            out[str(key)] = size
    return out


def _dtype(value: Any, path: str, problems: Problems) -> str | None:
    if value is None:
        return None
    allowed = [d.value for d in DType]
    if value not in allowed:
        problems.add(path, f"unknown dtype {show(value)}{suggest(value, allowed)}; allowed: {', '.join(allowed)}")
        return None
    return value


def _actions(value: Any, path: str, problems: Problems) -> tuple[str, ...]:
    if value is None:
        return DEFAULT_ACTIONS
    if not isinstance(value, list) or not value:
        problems.add(path, f"must be a non-empty list of {', '.join(ACTIONS)}, got {show(value)}")
        return DEFAULT_ACTIONS
    for index, action in enumerate(value):
        if action not in ACTIONS:
            problems.add(child_path(path, index),
                         f"unknown action {show(action)}{suggest(action, ACTIONS)}; allowed: {', '.join(ACTIONS)}")
        elif value.index(action) != index:
            problems.add(child_path(path, index), f"action {show(action)} is listed twice")
    return tuple(value)


def _sweep(value: Any, path: str, problems: Problems) -> Sweep | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        problems.add(path, f"must be a mapping {{params: [...], values: [...]}}, got {show(value)}")
        return None
    unknown_keys(value, path, SWEEP_KEYS, problems)
    params = value.get("params")
    params = [params] if isinstance(params, str) else params
    values = value.get("values")
    ok = True
    if not isinstance(params, list) or not params or not all(isinstance(p, str) and p for p in params):
        problems.add(child_path(path, "params"), f"must be a non-empty list of shape fields or impl params, got {show(params)}")
        ok = False
    elif len(set(params)) != len(params):
        problems.add(child_path(path, "params"), f"lists a parameter twice: {show(params)}")
        ok = False
    if not isinstance(values, list) or not values:
        problems.add(child_path(path, "values"), f"must be a non-empty list of values, got {show(values)}")
        return None
    for index, item in enumerate(values):
        if isinstance(item, (dict, list)) or item is None:
            problems.add(f"{path}.values[{index}]", f"must be a number or text, got {show(item)}")
            ok = False
        elif values.index(item) != index:
            problems.add(f"{path}.values[{index}]", f"value {show(item)} is listed twice")
            ok = False
    return Sweep(params=tuple(params), values=tuple(values)) if ok else None


# -- back to plain data ----------------------------------------------------------------------
def session_to_data(session: Session) -> dict[str, Any]:
    """The session as plain YAML-ready data (dicts, lists, str, int, float, bool, None)."""
    data: dict[str, Any] = {"schema_version": session.schema_version, "name": session.name}
    if session.description is not None:
        data["description"] = session.description
    if session.plugins:
        data["plugins"] = list(session.plugins)
    data["settings"] = plain(dataclasses.asdict(session.settings))
    data["runs"] = [_run_to_data(run) for run in session.runs]
    return data


def _run_to_data(run: RunSpec) -> dict[str, Any]:
    data: dict[str, Any] = {"op": run.op}
    data["impls"] = "all" if run.impls is None else [_impl_to_data(ref) for ref in run.impls]
    if run.shape:
        data["shape"] = plain(run.shape)
    if run.dtype is not None:
        data["dtype"] = str(run.dtype)
    data["actions"] = [str(a) for a in run.actions]
    if run.sweep is not None:
        data["sweep"] = {"params": list(run.sweep.params), "values": plain(run.sweep.values)}
    if run.settings:
        data["settings"] = plain(run.settings)
    return data


def _impl_to_data(ref: ImplRef) -> str | dict[str, Any]:
    if not ref.params and ref.label is None:
        return ref.name
    data: dict[str, Any] = {"name": ref.name}
    if ref.params:
        data["params"] = plain(ref.params)
    if ref.label is not None:
        data["label"] = ref.label
    return data


def plain(value: Any) -> Any:
    """Mappings -> dict, tuples -> list, str enums -> str; raises TypeError on anything else."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    raise TypeError(f"not plain session data: {value!r} ({type(value).__name__})")
