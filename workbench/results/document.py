"""The results document (CONTRACTS.md, "Results"): its skeleton, key lists, CSV flattening, I/O.

Every key is always present; what was not measured is None (JSON null). The engine fills the
skeletons made here; replay, the TUI and `--compare` read documents through the helpers below.

Keys this module adds to the contract (extensions, never renames):
- record: `estimate` (the size estimate made before the row ran: seconds, memory_bytes and its
  parts footprint_bytes, scratch_bytes, check_bytes, flush_bytes; None when none was made),
  `recompiles` (torch.compile graphs compiled after the build, `compiled` impls only),
  `flags` (list of one-line notes: above-ceiling, below launch floor, interpreter timing ...),
  `fp32_precision` ("ieee" | "tf32" for float32 matmul-like ops, else None);
- timing: `launch_floor_ms`, `sm_clock_mhz` ({min, median, max, n} or None), `throttle` (list),
  `flush_kind`, `host_launch_ms`, `headroom_ms`, `batches`, `below_launch_floor`,
  `device_median_source`, `device_median_l2_warm` (docs/CONTRACTS.md, engine/timing.py);
- traffic: `l2_resident` (working set fits L2 and was measured warm, rule 3), `peak`,
  `pct_of_peak`, `pct_of_copy`, `pct_of_cublas`, `speedup_vs_pytorch` (engine/traffic.py);
- profile: `reason` (why there are no device rows), `wall_us` (the profiled region), `trace_path`
  (the row's Kineto trace, `--trace-dir`; None when none was kept);
- document: `cancelled` (run_plan was stopped; unfinished rows are `skipped`, error "cancelled"),
  `cancel_signal` (the signal that stopped a replay: "SIGINT" | "SIGTERM" | "SIGHUP", else None).
- document: `ab` (A/B comparisons with confidence intervals, engine/ab.py);
- record: `measured` (DRAM bytes and kernel time from Nsight Compute, workbench/counters.py),
  `diagnosis` (findings [{rule, evidence, suggestion, ...}], workbench/diagnosis/);
- timing: `mode` ("eager" | "graph": engine/graph_mode.py), `env` (timing-relevant environment
  switches set in the worker: engine/timing_notes.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from workbench.fileio import atomic_write_text
from workbench.results.provenance import PROVENANCE_KEYS
from workbench.results.record import Flag, Record, RecordError

SCHEMA_VERSION = 1

DOCUMENT_KEYS = ("schema_version", "provenance", "environment", "results", "cancelled", "cancel_signal", "ab")
ENVIRONMENT_KEYS = ("device", "sm_count", "l2_bytes", "driver", "cuda", "torch", "triton", "python",
                    "ceilings", "datasheet")
RECORD_KEYS = ("run_index", "op", "impl", "label", "params", "shape", "dtype", "sweep_value",
               "status", "error", "device", "build_ms", "peak_mem_bytes", "timing", "check",
               "traffic", "launch", "profile", "ptx", "recompiles", "flags", "fp32_precision", "estimate",
               "tuned", "measured", "diagnosis")
TIMING_KEYS = ("timer", "median_ms", "p20_ms", "p80_ms", "min_ms", "mean_ms", "n", "flush_l2",
               "launch_bound", "device_median_ms", "clock_fell", "samples_ms", "launch_floor_ms",
               "sm_clock_mhz", "throttle", "flush_kind", "host_launch_ms", "headroom_ms", "batches",
               "below_launch_floor", "device_median_source", "device_median_l2_warm", "mode", "env",
               "sustained", "warmup_calls", "warmup_back_to_back")
CHECK_KEYS = ("passed", "gate", "max_abs_err", "max_rel_err", "rel_l2_err", "first_bad_index", "atol", "rtol",
              "norm_rtol", "ref_rms", "nonfinite_mismatches", "chunks", "input_set", "sets_checked")
TRAFFIC_KEYS = ("bytes_read", "bytes_written", "bytes", "bytes_moved_est", "flops", "gbps", "tflops",
                "intensity", "bound", "ceiling", "pct_of_ceiling", "l2_resident", "peak", "pct_of_peak",
                "pct_of_copy", "pct_of_cublas", "speedup_vs_pytorch")
LAUNCH_KEYS = ("grid", "num_warps", "block_threads", "waves")
PROFILE_KEYS = ("rows", "kernel_count", "device_events", "reason", "wall_us", "trace_path")
PROFILE_ROW_KEYS = ("name", "kind", "calls", "self_device_us", "self_cpu_us", "pct")

# The one wording of "this time is the Triton interpreter's": a flag of the record (engine/bench.py)
# and the note report.py shows for a record timed by the interpreter.
INTERPRETER_FLAG = Flag.INTERPRETER.template  # "Triton interpreter: host time of numpy emulation, ..."

STATUSES = ("ok", "failed", "unavailable", "skipped")
CANCELLED_ERROR = "cancelled"  # the error of a row a cancel stopped before it finished (status skipped)
# Sub-records that are either None or a dict with exactly these keys.
SUB_RECORD_KEYS = {"timing": TIMING_KEYS, "check": CHECK_KEYS, "traffic": TRAFFIC_KEYS,
                   "launch": LAUNCH_KEYS, "profile": PROFILE_KEYS}
CSV_LEFT_OUT = ("ptx", "samples_ms", "rows", "timings_ms")  # not scalars / per-row keys: in the JSON document only


def blank(keys: Iterable[str], **values: Any) -> dict:
    """A dict with every key in `keys` set to None, then `values` (unknown keys raise KeyError)."""
    out = dict.fromkeys(keys)
    for key, value in values.items():
        if key not in out:
            raise KeyError(f"{key!r} is not one of {tuple(out)}")
        out[key] = value
    return out


def new_record(**values: Any) -> dict:
    """A result record with every key present (None), `flags` and `diagnosis` empty lists unless given."""
    record = blank(RECORD_KEYS, **values)
    for key in ("flags", "diagnosis"):
        if record[key] is None:
            record[key] = []
    return record


def new_document(provenance: Mapping[str, Any], environment: Mapping[str, Any]) -> dict:
    """The document skeleton: schema_version, provenance, environment, empty results."""
    return {"schema_version": SCHEMA_VERSION, "provenance": blank(PROVENANCE_KEYS, **provenance),
            "environment": blank(ENVIRONMENT_KEYS, **environment), "results": [], "cancelled": False,
            "cancel_signal": None, "ab": []}


def missing_keys(doc: Mapping[str, Any]) -> list[str]:
    """Dotted paths of contract keys absent from `doc` (empty list: the document is complete)."""
    missing = [k for k in DOCUMENT_KEYS if k not in doc]
    missing += [f"provenance.{k}" for k in PROVENANCE_KEYS if k not in doc.get("provenance", {})]
    missing += [f"environment.{k}" for k in ENVIRONMENT_KEYS if k not in doc.get("environment", {})]
    for i, record in enumerate(doc.get("results", [])):
        missing += [f"results[{i}].{k}" for k in RECORD_KEYS if k not in record]
        for name, keys in SUB_RECORD_KEYS.items():
            sub = record.get(name)
            if isinstance(sub, Mapping):
                missing += [f"results[{i}].{name}.{k}" for k in keys if k not in sub]
    return missing


def flatten(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Scalar fields only, dotted names (`timing.median_ms`), for CSV (CONTRACTS.md "CSV").

    Lists of scalars (grid, first_bad_index, flags) become ';'-joined strings; lists of dicts
    (profile rows) and the ptx record are left out, as are samples_ms. A sub-record that is None
    (`launch` not measured) gives its dotted columns, empty, never a bare `launch` column.
    """
    out: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if key in CSV_LEFT_OUT:
            continue
        if value is None and not prefix and key in SUB_RECORD_KEYS:
            out.update({f"{name}.{k}": None for k in SUB_RECORD_KEYS[key] if k not in CSV_LEFT_OUT})
        elif isinstance(value, Mapping):
            if key in ("params", "shape"):
                out.update({f"{name}.{k}": v for k, v in value.items()})
            else:
                out.update(flatten(value, f"{name}."))
        elif isinstance(value, (list, tuple)):
            if all(not isinstance(v, (Mapping, list, tuple)) for v in value):
                out[name] = ";".join(str(v) for v in value)
        else:
            out[name] = value
    return out


def dumps(doc: Mapping[str, Any]) -> str:
    """JSON text of a document (indent 2, NaN/Inf written as null)."""
    return json.dumps(finite(doc), indent=2, allow_nan=False) + "\n"


def write(doc: Mapping[str, Any], path: Path) -> None:
    """Write atomically (workbench.fileio: temporary file in the same folder, fsync, rename)."""
    atomic_write_text(path, dumps(doc))


def load(path: Path) -> dict:
    """Read a results document; raises ValueError naming the file for bad JSON or schema, or
    naming the key, the value and what is allowed for a value of the wrong type
    (document_type_error)."""
    try:
        doc = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a results document: {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path}: schema_version must be {SCHEMA_VERSION}")
    problem = document_type_error(doc)
    if problem is not None:
        raise ValueError(f"{path}: {problem}")
    return doc


# provenance values the readers use (--compare, --resume, --plot, the TUI) and what each may be
_PROVENANCE_TYPES: dict[str, tuple[type, ...]] = {
    "session": (str,), "session_sha256": (str,), "argv": (list,), "plugins": (list,), "workbench": (str,),
    "git_sha": (str,), "started": (str,)}


def document_type_error(doc: Mapping[str, Any]) -> str | None:
    """The first value of a wrong type in a results document read from a file: its `provenance`
    and `environment` (`section_type_error`), then its records (`record_type_error`); as
    `KEY: value is X; allowed: Y`, or None when it reads."""
    return section_type_error(doc) or record_type_error(doc)


def section_type_error(doc: Mapping[str, Any]) -> str | None:
    """The first wrong type in a document's `provenance` and `environment` (objects; each
    provenance value the readers use of its type, or null), or None."""
    for section in ("provenance", "environment"):
        if section in doc and not isinstance(doc[section], Mapping):
            return f"{section}: {_shown(doc[section])} is not an object (a results document has {section} {{...}})"
    provenance = doc.get("provenance") or {}
    for key, types in _PROVENANCE_TYPES.items():
        value = provenance.get(key)
        if value is not None and not isinstance(value, types):
            return f"provenance.{key}: {_shown(value)} is {type(value).__name__}; allowed: {types[0].__name__} or null"
    return None


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def record_type_error(doc: Mapping[str, Any]) -> str | None:
    """The first value of a wrong type in the document's records, as `results[i].key: value is
    X; allowed: Y` (workbench/results/record.py), or None when every record reads."""
    results = doc.get("results")
    if not isinstance(results, list):
        return f"results: {results!r} is not a list of records"
    for i, record in enumerate(results):
        try:
            Record.from_dict(record, f"results[{i}]")
        except RecordError as exc:
            return str(exc)
    return None


def finite(value: Any) -> Any:
    """`value` with every NaN and infinity replaced by None (strict JSON has neither)."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, Mapping):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value
