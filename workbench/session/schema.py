"""Session data (plain YAML values) <-> the frozen model of `workbench.session.model`.

`build_session(data, problems)` checks the structure of CONTRACTS.md "Session file" (keys,
types, ranges) and records every problem with its path; it returns a Session only when the
structure is sound. `session_to_data(session)` is the inverse: plain types only.
Registry checks (op, impl, param, shape and dtype names) live in `workbench.session.checks`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from workbench.dtypes import DType
from workbench.session.compare import compare_to_data, parse_compare
from workbench.session.model import ACTIONS, SCHEMA_VERSION, ImplRef, RunSpec, Session, Settings, Sweep
from workbench.session.settings import SETTING_KEYS, SETTING_RULES, check_settings, kind_of, suggest, unknown_keys
from workbench.session.yaml_io import Problems, child_path, show

__all__ = ["Built", "build_session", "session_to_data", "plain", "SETTING_KEYS", "SETTING_RULES",
           "check_settings", "kind_of", "suggest", "unknown_keys"]

TOP_KEYS = ("schema_version", "name", "description", "plugins", "settings", "runs")
RUN_KEYS = ("op", "impls", "shape", "dtype", "actions", "sweep", "settings", "compare")
IMPL_KEYS = ("name", "params", "label")
SWEEP_KEYS = ("params", "values")
DEFAULT_ACTIONS = ("check", "bench")


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
    if "runs" not in data and isinstance(data.get("results"), list):  # what a run writes, opened as a session
        of = (data.get("provenance") or {}).get("session") if isinstance(data.get("provenance"), dict) else None
        problems.add("", "a results document (what --replay -o PATH or the TUI writes), not a session"
                         + (f": it holds results of session {of!r}" if of else "")
                         + "; open the session file (.yaml), or use it as --compare BASELINE.json")
        return Built(None, [], [])
    if not _schema_version(data, problems):
        return Built(None, [], [])  # a newer schema: the rest, read as this one, would only be noise
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
    """False (nothing more is checked) only for a newer schema; a missing or malformed version is
    one problem among the rest, which are checked as this schema, so every problem of the file is
    shown at once, not the others only after schema_version is fixed."""
    version = data.get("schema_version")
    if "schema_version" not in data:
        problems.add("schema_version", f"missing; this program reads schema_version {SCHEMA_VERSION}")
        return True
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        problems.add("schema_version", f"must be a positive integer, got {show(version)}")
        return True
    if version > SCHEMA_VERSION:
        problems.add("schema_version", f"the file has schema_version {version}; this program reads "
                                       f"schema_version {SCHEMA_VERSION} (upgrade workbench to open it)")
        return False
    return True


def _text(data: dict, key: str, path: str, problems: Problems, *, required: bool = False) -> str | None:
    value = data.get(key)
    where = child_path(path, key)
    if value is None:
        if required:  # `op:` with nothing is there but empty, not missing
            problems.add(where, "is empty; give a value (required)" if key in data else "missing (required)")
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
        problems.add("runs", f"{'is empty' if 'runs' in data else 'missing'} (required): a list of runs, "
                             "each with at least `op`")
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
    for key, default in EMPTY_MEANS.items():
        if key in data and data[key] is None:  # `dtype:` left blank: not the same as leaving it out
            give = f"one of {', '.join(d.value for d in DType)}" if key == "dtype" else "a value"
            problems.add(child_path(path, key), f"is empty; give {give}, or leave the key out for {default}")
            bad.add(key)
    impls = field("impls", _impls, data.get("impls", "all"))
    shape = field("shape", _shape, data.get("shape"))
    dtype = field("dtype", _dtype, data.get("dtype"))
    actions = field("actions", _actions, data.get("actions"))
    sweep = field("sweep", _sweep, data.get("sweep"))
    settings = field("settings", check_settings, data.get("settings"))
    compare = field("compare", parse_compare, data.get("compare"))
    if op is None:
        return None
    run = RunSpec(op=op, impls=impls, shape=shape, dtype=dtype, actions=actions, sweep=sweep,
                  settings=settings, compare=compare)
    return run, frozenset(bad)


# a run's keys that may be left out, and what leaving one out means (an empty one is an error)
EMPTY_MEANS = {"impls": "every implementation (`all`)", "shape": "the op's default shape",
               "dtype": "the op's default dtype", "actions": f"[{', '.join(DEFAULT_ACTIONS)}]",
               "sweep": "no sweep", "settings": "the session's settings", "compare": "no A/B"}


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
    if not isinstance(value, str):  # a list of dtypes crashed the lookups below (unhashable)
        problems.add(path, f"must be one dtype name, got {show(value)}; allowed: {', '.join(allowed)}"
                           + (" (one run per dtype)" if isinstance(value, (list, tuple)) else ""))
        return None
    if value in DTYPE_ALIASES:  # another name of an allowed dtype
        problems.add(path, f"unknown dtype {show(value)}: write {show(DTYPE_ALIASES[value])}; allowed: {', '.join(allowed)}")
        return None
    if value in UNSUPPORTED_DTYPES:  # a real dtype, not a typo: "did you mean float16" misled
        problems.add(path, f"dtype {show(value)} is not supported by workbench's ops; allowed: {', '.join(allowed)}")
        return None
    if value not in allowed:
        problems.add(path, f"unknown dtype {show(value)}{suggest(value, allowed)}; allowed: {', '.join(allowed)}")
        return None
    return value


# torch's and the field's other names of the dtypes workbench takes, and dtypes it does not take
# (for those a close spelling, float64 -> float16, would mislead)
DTYPE_ALIASES = {"float": "float32", "fp32": "float32", "half": "float16", "fp16": "float16", "bf16": "bfloat16",
                 "e4m3": "float8_e4m3fn", "float8_e4m3": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn",
                 "e5m2": "float8_e5m2", "fp8_e5m2": "float8_e5m2"}
UNSUPPORTED_DTYPES = frozenset({"float64", "double", "fp64", "complex64", "complex128", "int8", "int16", "int32",
                                "int64", "uint8", "bool", "float8_e4m3fnuz", "float8_e5m2fnuz", "tf32"})


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
    if value and not set(value) & set(SWEEP_KEYS):  # `sweep: {N: [64, 128]}`: one error that shows the form
        (param, given), *more = value.items()
        example = f"{{params: [{param}], values: {show(given) if isinstance(given, list) else '[...]'}}}"
        problems.add(path, f"a sweep is {{params: [...], values: [...]}}: write sweep: {example}"
                           + (" (several params take one list of values together)" if more else ""))
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
    typed = [(type(v), v) for v in values]  # true is not 1 twice (True == 1 in Python)
    for index, item in enumerate(values):
        if isinstance(item, (dict, list)) or item is None:
            problems.add(f"{path}.values[{index}]", f"must be a number or text, got {show(item)}")
            ok = False
        elif typed.index((type(item), item)) != index:  # reported; the values still go on to be checked
            problems.add(f"{path}.values[{index}]", f"value {show(item)} is listed twice")  # against the params
    return Sweep(params=tuple(params), values=tuple(values)) if ok else None


# -- back to plain data ----------------------------------------------------------------------
def session_to_data(session: Session) -> dict[str, Any]:
    """The session as plain YAML-ready data (dicts, lists, str, int, float, bool, None)."""
    data: dict[str, Any] = {"schema_version": session.schema_version, "name": session.name}
    if session.description is not None:
        data["description"] = session.description
    if session.plugins:
        data["plugins"] = list(session.plugins)
    defaults = dataclasses.asdict(Settings())
    # only what differs from the defaults, so a hand-written file saved from the TUI does not come
    # back with every default spelled out; on load the defaults fill in the same values
    settings = {k: _whole(v) for k, v in plain(dataclasses.asdict(session.settings)).items() if v != defaults.get(k)}
    if settings:
        data["settings"] = settings
    data["runs"] = [_run_to_data(run) for run in session.runs]
    return data


def _run_to_data(run: RunSpec) -> dict[str, Any]:
    data: dict[str, Any] = {"op": run.op}
    data["impls"] = "all" if run.impls is None else [_impl_to_data(ref) for ref in run.impls]
    if run.shape:
        data["shape"] = plain(run.shape)
    if run.dtype is not None:
        data["dtype"] = str(run.dtype)
    if tuple(str(a) for a in run.actions) != DEFAULT_ACTIONS:
        data["actions"] = [str(a) for a in run.actions]
    if run.sweep is not None:
        data["sweep"] = {"params": list(run.sweep.params), "values": plain(run.sweep.values)}
    if run.settings:
        data["settings"] = {k: _whole(v) for k, v in plain(run.settings).items()}
    if run.compare is not None:
        data["compare"] = plain(compare_to_data(run.compare))
    return data


def _whole(value: Any) -> Any:
    """A setting held as a float (rep_ms) written as the user wrote it when whole: `rep_ms: 5`,
    not `5.0` (equal on load; a saved file's whole numbers do not gain .0)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        return int(value)
    return value


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
