"""A re-run row against its previous result, in words (watch mode's Log lines and replay output).

    change_line(old_record, new_record)
    -> ("0.512 ms -> 0.498 ms (-2.7%) · 4190 -> 4310 GB/s · ptx ld_global_v4 0 -> 4, spills 8 -> 0", "info")

Time is the median; GB/s the effective bandwidth (`traffic.gbps`); the PTX part lists the
static instruction counts (CONTRACTS.md `ptx`), registers and spills that changed, per kernel
(matched by name; a single kernel on each side is matched whatever its name). Torch-free.
The functions take a record dict or a Record (workbench/results/record.py) and read its fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Union

from workbench.plugins.sources import changed_files
from workbench.results.record import Flag, Record, read_record

AnyRecord = Union[Mapping[str, Any], Record]

ARROW = "->"
STALE_FLAG = Flag.WATCH_STALE.template  # documents before `last_good`: "watch: the last edit failed ({error}); ..."
FAILED_FLAG = Flag.WATCH_FAILED.template  # "watch: the current code fails; last_good keeps ... ({then})"


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def _ms(value: float | None, unit_of: float | None = None) -> str:
    """A time in its unit: '0.498 ms', '12.3 µs', '850 ns' (4 significant digits). unit_of: the
    unit is that value's (a change reads in one unit: '72.18 µs -> 109.8 µs', not '-> 0.1098 ms')."""
    if value is None:
        return "-"
    pick = value if unit_of is None else min(value, unit_of)
    if pick >= 0.1:
        return f"{value:.4g} ms"
    return f"{value * 1e3:.4g} µs" if pick >= 1e-4 else f"{value * 1e6:.4g} ns"


def _median(record: Record) -> float | None:
    return record.timing.median_ms if record.timing else None


def _gbps(record: Record) -> float | None:
    return record.traffic.gbps if record.traffic else None


def speed_text(data: AnyRecord) -> str:
    """'0.512 ms · 4190 GB/s' (what is known of a finished record)."""
    record = read_record(data)
    median, gbps = _median(record), _gbps(record)
    parts = [_ms(median)] if median is not None else []
    parts += [f"{_num(gbps)} GB/s"] if gbps is not None else []
    return " · ".join(parts)


def time_change(old: AnyRecord, new: AnyRecord) -> str | None:
    before, after = _median(read_record(old)), _median(read_record(new))
    if before is None or after is None:
        return None
    pct = f" ({(after / before - 1) * 100:+.1f}%)" if before > 0 else ""
    return f"{_ms(before, after)} {ARROW} {_ms(after, before)}{pct}"


def gbps_change(old: AnyRecord, new: AnyRecord) -> str | None:
    before, after = _gbps(read_record(old)), _gbps(read_record(new))
    if before is None or after is None:
        return None
    return f"{_num(before)} {ARROW} {_num(after)} GB/s"


def _kernels(record: Record) -> list[dict]:
    return list((record.ptx or {}).get("kernels") or [])


def _pairs(old: list[dict], new: list[dict]) -> list[tuple[str, dict, dict]]:
    if len(old) == 1 and len(new) == 1:
        return [(new[0].get("name", "?"), old[0], new[0])]
    by_name = {k.get("name"): k for k in old}
    return [(k.get("name", "?"), by_name[k.get("name")], k) for k in new if k.get("name") in by_name]


def _values(kernel: Mapping[str, Any]) -> dict[str, Any]:
    """The figures compared: instruction counts (totals left out: their parts are shown),
    registers and spills."""
    counts = {k: v for k, v in (kernel.get("counts") or {}).items() if not k.endswith("_total")}
    return {**counts, "registers": kernel.get("registers"), "spills": kernel.get("spills")}


def ptx_changes(old: AnyRecord, new: AnyRecord) -> list[str]:
    """'ld_global_v4 0 -> 4' per figure that changed (prefixed by the kernel's name when there
    are several kernels); [] when either side has no PTX."""
    old_k, new_k = _kernels(read_record(old)), _kernels(read_record(new))
    if not old_k or not new_k:
        return []
    changes = [] if len(old_k) == len(new_k) else [f"kernels {len(old_k)} {ARROW} {len(new_k)}"]
    pairs = _pairs(old_k, new_k)
    for name, before, after in pairs:
        a, b = _values(before), _values(after)
        prefix = f"{name}: " if len(pairs) > 1 else ""
        for key in dict.fromkeys([*b, *a]):
            if a.get(key) != b.get(key) and not (a.get(key) in (None, 0) and b.get(key) in (None, 0)):
                changes.append(f"{prefix}{key} {a.get(key) or 0} {ARROW} {b.get(key) or 0}")
    return changes


def spec_change(old_data: AnyRecord, new_data: AnyRecord) -> str | None:
    """'shape M 256 -> 128' (and/or 'dtype a -> b') when the row now measures another problem,
    else None."""
    old, new = read_record(old_data), read_record(new_data)
    old_shape, new_shape = old.shape or {}, new.shape or {}
    moved = [f"{key} {old_shape.get(key)} {ARROW} {new_shape.get(key)}"
             for key in dict.fromkeys([*old_shape, *new_shape]) if old_shape.get(key) != new_shape.get(key)]
    parts = [f"shape {', '.join(moved)}"] if moved else []
    if old.dtype != new.dtype:
        parts.append(f"dtype {old.dtype} {ARROW} {new.dtype}")
    return ", ".join(parts) or None


def change_line(old_data: AnyRecord | None, new_data: AnyRecord,
                error: str | None = None) -> tuple[str, str]:
    """(text, level) for a re-run row: `new` against `old` (None: its first result). error: the
    failure of this edit when `new` is the last good result kept on screen."""
    old = read_record(old_data) if old_data is not None else None
    new = read_record(new_data)
    if error is not None:  # `new`: the last good record, of the earlier code
        kept = speed_text(new)
        return f"edit failed: {error}; the row is failed now" + (
            f" (last good, from the earlier code: {kept})" if kept else ""), "error"
    status = new.status
    if status != "ok":
        return f"{status}: {new.error or ''}".rstrip(": "), "error" if status == "failed" else "warning"
    if old is None or old.status != "ok":
        was = f" (was {old.status})" if old is not None else ""
        return f"ok{was}" + (f" · {speed_text(new)}" if speed_text(new) else ""), "info"
    spec = spec_change(old, new)
    if spec:  # another problem: its time against the old one's is no speed-up
        return f"ok · {spec}: not compared" + (f" · {speed_text(new)}" if speed_text(new) else ""), "info"
    parts = [p for p in (time_change(old, new), gbps_change(old, new)) if p]
    contended = [side for side, record in (("before", old), ("now", new))
                 if Flag.CPU_CONTENDED in record.flag_kinds()]
    if contended and parts:  # a busy host's time is not the edit's doing
        parts.append(f"CPU contended {' and '.join(contended)}: the change may be the host's, not the edit's")
    ptx = ptx_changes(old, new)
    parts += [f"ptx {', '.join(ptx)}"] if ptx else []
    return " · ".join(parts) or "ok, no change in the figures", "info"


def with_last_good(failed: Mapping[str, Any], good: Mapping[str, Any], then: Mapping[str, Any] | None,
                   now: Mapping[str, Any] | None) -> dict:
    """The record of a row whose current code failed (`failed`, as the engine wrote it: its status,
    error and check) with its last ok record under `last_good` and a flag saying so.

    then: the provenance of the run that measured `good` ({"plugins", "session_sha256",
    "started"}; None: not known); now: this run's provenance. `last_good.changed` lists the
    plugin files whose sha256 differs between the two (docs/CONTRACTS.md "Watch mode")."""
    then, now = then or {}, now or {}
    plugins, current = then.get("plugins"), now.get("plugins")
    changes = changed_files(plugins, current) if plugins is not None and current is not None else []
    last = {"record": {k: v for k, v in good.items() if k != "last_good"}, "plugins": plugins,
            "session_sha256": then.get("session_sha256"), "started": then.get("started"),
            "changed": [{"path": c.path, "sha256_then": c.then, "sha256_now": c.now} for c in changes]}
    session_moved = last["session_sha256"] is not None and last["session_sha256"] != now.get("session_sha256")
    flags = [f for f in failed.get("flags") or [] if Flag.of(f) not in (Flag.WATCH_STALE, Flag.WATCH_FAILED)]
    return {**failed, "flags": [*flags, FAILED_FLAG.format(then=measured_from(last, session_moved))],
            "last_good": last}


def measured_from(last: Mapping[str, Any], session_moved: bool = False) -> str:
    """What a `last_good` was measured from, against the current code: 'rmsnorm.py sha256
    1a2b3c4d5e6f' per plugin file changed since (and 'the session file changed')."""
    parts = [f"{Path(str(c.get('path'))).name} sha256 {str(c['sha256_then'])[:12]}" if c.get("sha256_then")
             else f"{Path(str(c.get('path'))).name}: not used then" for c in last.get("changed") or ()]
    parts += ["the session file changed"] if session_moved else []
    if parts:
        return ", ".join(parts)
    return "no plugin file changed" if last.get("plugins") is not None else "its files' sha256 not recorded"
