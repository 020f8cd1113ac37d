"""`--compare BASELINE.json`: each result against the baseline row it matches (CONTRACTS.md).

A row is `slower` when its p20 is above the baseline's p80 AND its median ratio (current /
baseline) is above 1 + threshold; `faster` symmetrically (its p80 below the baseline's p20 AND
baseline / current above 1 + threshold); otherwise `same`. Where both records hold their samples
(`timing.samples_ms`, setting keep_samples), the A/B statistics replace the p20/p80 test: the
ratio of medians with a bootstrap interval (workbench/abstats.py, unpaired: the documents were
timed apart), `slower` when the whole interval is above 1 and the ratio above 1 + threshold,
`faster` symmetrically; `ci_low`/`ci_high` are then filled. Rows without timing on either side,
or timed under the Triton interpreter on either side (host time of numpy's emulation), are
`n/a`; rows on one side only are `new` / `missing`. Rows match by (op, label, shape, dtype,
sweep_value), the n-th such row of one document with the n-th of the other. Results from
different GPUs are never compared (`Comparison.different_gpu`), nor are two rows that ran on
GPUs of different names in a run spread over a mixed host (`--devices`: each row's device name is
its place's in `environment.devices`; such a pair is `n/a`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from rich.table import Table
from rich.text import Text

from workbench.abstats import MIN_PAIRS, RatioCI, unpaired_ratio
from workbench.engine.multi.merge import device_name_of
from workbench.fmt import printable
from workbench.results.record import Flag, Record, Timing, has_flag, read_record
from workbench.results.report import fmt_num, shape_text

# A row timed under the Triton interpreter measured numpy's emulation on the host, not a kernel
# (results.INTERPRETER_FLAG): two back-to-back CPU replays of one session called such rows
# 1.37x and 1.62x slower (measured), so they are `n/a`, never a regression.
INTERPRETER = "interpreter"

VERDICT_STYLE = {"slower": "bold red", "faster": "green", "same": "", "n/a": "dim", "new": "cyan",
                 "missing": "yellow"}


@dataclass(frozen=True)
class RowComparison:
    op: str
    label: str
    shape: Mapping[str, Any]
    dtype: str | None
    sweep_value: Any
    verdict: str                      # slower | faster | same | n/a | new | missing
    baseline_median_ms: float | None
    median_ms: float | None
    ratio: float | None               # current median / baseline median
    ci_low: float | None = None       # bootstrap interval of the ratio (both documents hold samples)
    ci_high: float | None = None
    contended: bool = False           # either side was timed with the CPU contended (its flags)

    def as_dict(self) -> dict[str, Any]:
        return {"op": self.op, "label": self.label, "shape": dict(self.shape), "dtype": self.dtype,
                "sweep_value": self.sweep_value, "verdict": self.verdict,
                "baseline_median_ms": self.baseline_median_ms, "median_ms": self.median_ms,
                "ratio": self.ratio, "ci_low": self.ci_low, "ci_high": self.ci_high, "contended": self.contended}


@dataclass(frozen=True)
class Comparison:
    threshold: float
    device: str | None
    baseline_device: str | None
    rows: list[RowComparison] = field(default_factory=list)

    @property
    def different_gpu(self) -> bool:
        return bool(self.device and self.baseline_device and self.device != self.baseline_device)

    def count(self, verdict: str) -> int:
        return sum(1 for r in self.rows if r.verdict == verdict)

    @property
    def regressions(self) -> int:
        return self.count("slower")

    @property
    def contended_regressions(self) -> int:
        """Slower rows timed with the CPU contended (`*`): the exit code tells them apart (3, not 1)."""
        return sum(1 for r in self.rows if r.verdict == "slower" and r.contended)

    def summary(self) -> str:
        parts = [f"{self.count(v)} {v}" for v in ("slower", "faster", "same", "n/a", "new", "missing") if self.count(v)]
        return f"compared with baseline (threshold {self.threshold:g}): {', '.join(parts) or 'no rows'}"

    def as_dict(self, baseline_path: str | None = None) -> dict[str, Any]:
        return {"baseline": baseline_path, "threshold": self.threshold, "device": self.device,
                "baseline_device": self.baseline_device, "different_gpu": self.different_gpu,
                "rows": [r.as_dict() for r in self.rows]}


def row_key(record: Mapping[str, Any] | Record) -> tuple:
    shape = json.dumps(record.get("shape") or {}, sort_keys=True)
    return (record.get("op"), record.get("label"), shape, record.get("dtype"),
            json.dumps(record.get("sweep_value"), default=str))


def verdict(current: Mapping[str, Any] | Record, baseline: Mapping[str, Any] | Record, threshold: float) -> tuple[str, float | None]:
    """(verdict, median ratio current/baseline) for two matched result records."""
    now, then = read_record(current), read_record(baseline)
    cur, base = now.timing or Timing(), then.timing or Timing()
    if (now.status != "ok" or then.status != "ok" or INTERPRETER in (cur.timer, base.timer)
            or cur.median_ms is None or cur.p20_ms is None or cur.p80_ms is None
            or base.median_ms is None or base.p20_ms is None or base.p80_ms is None
            or base.median_ms <= 0 or cur.median_ms <= 0):
        return "n/a", None
    ratio = cur.median_ms / base.median_ms
    interval = sample_interval(current, baseline)
    if interval is not None:
        ci = interval
        if ci.ci_low > 1 and ci.ratio > 1 + threshold:
            return "slower", ci.ratio
        if ci.ci_high < 1 and 1 / ci.ratio > 1 + threshold:
            return "faster", ci.ratio
        return "same", ci.ratio
    if cur.p20_ms > base.p80_ms and ratio > 1 + threshold:
        return "slower", ratio
    if cur.p80_ms < base.p20_ms and 1 / ratio > 1 + threshold:
        return "faster", ratio
    return "same", ratio


def sample_interval(current: Mapping[str, Any] | Record, baseline: Mapping[str, Any] | Record) -> RatioCI | None:
    """The bootstrap interval of current / baseline when both records hold >= MIN_PAIRS samples
    (fewer tell nothing at 95%, workbench/abstats.py: the p20/p80 rule decides then)."""
    a, b = ((read_record(r).timing or Timing()).samples_ms or [] for r in (current, baseline))
    if len(a) < MIN_PAIRS or len(b) < MIN_PAIRS:
        return None
    try:
        return unpaired_ratio(a, b)
    except ValueError:  # a zero or non-finite sample: fall back to the p20/p80 rule
        return None


def compare_documents(current: Mapping[str, Any], baseline: Mapping[str, Any], threshold: float = 0.05) -> Comparison:
    """Match every result of `current` with `baseline` and give each a verdict."""
    base_rows: dict[tuple, list[Record]] = {}
    for record in map(read_record, baseline.get("results") or []):  # each record read once
        base_rows.setdefault(row_key(record), []).append(record)
    used: dict[tuple, int] = {}
    rows = []
    for record in map(read_record, current.get("results") or []):
        key = row_key(record)
        nth = used.get(key, 0)
        used[key] = nth + 1
        candidates = base_rows.get(key, [])
        if nth < len(candidates):
            base = candidates[nth]
            word, ratio = verdict(record, base, threshold)
            if device_name_of(record, current) != device_name_of(base, baseline):  # a mixed-GPU host's rows
                word, ratio = "n/a", None
            rows.append(_row(record, word, ratio, base, interval=sample_interval(record, base) if word != "n/a" else None))
        else:
            rows.append(_row(record, "new", None, None))
    for key, records in base_rows.items():
        for record in records[used.get(key, 0):]:
            rows.append(_row(record, "missing", None, record, current_side=False))
    return Comparison(threshold, _device(current), _device(baseline), rows)


def contended(record: Mapping[str, Any] | Record | None) -> bool:
    """Whether a record's timing carries the CPU-contention flag (its medians are not the op's alone)."""
    return has_flag(record, Flag.CPU_CONTENDED)


def _row(data, word, ratio, base, current_side: bool = True, interval: RatioCI | None = None) -> RowComparison:
    def median(r):
        timing = read_record(r).timing if r is not None else None
        return timing.median_ms if timing is not None else None
    record = read_record(data)
    return RowComparison(op=record.op, label=record.label, shape=record.shape or {},
                         dtype=record.dtype, sweep_value=record.sweep_value, verdict=word,
                         baseline_median_ms=median(base), median_ms=median(record) if current_side else None,
                         ratio=ratio, ci_low=interval.ci_low if interval else None,
                         ci_high=interval.ci_high if interval else None,
                         contended=word in ("slower", "faster", "same") and (contended(record) or contended(base)))


UNRESOLVED_MARK = "?"  # on a `same` the spreads decided (its median ratio is past the threshold)


def unresolved(row: RowComparison, threshold: float) -> bool:
    """A `same` whose median ratio is past the threshold either way: the spreads, not the
    medians, decided it (the table's caption says so)."""
    return row.verdict == "same" and row.ratio is not None and row.ratio > 0 and max(row.ratio, 1 / row.ratio) > 1 + threshold


def _device(doc: Mapping[str, Any]) -> str | None:
    return (doc.get("environment") or {}).get("device")


MISSING_SHOWN = 5  # baseline rows absent from this run listed one by one; the rest are counted


def comparison_table(comparison: Comparison) -> Table:
    """The rows with their verdicts; past MISSING_SHOWN, the baseline's rows that are not in this
    run are one line under the table (a baseline of a larger session listed every one of them)."""
    missing = [r for r in comparison.rows if r.verdict == "missing"]
    hidden = missing[MISSING_SHOWN:]
    notes = [f"... and {len(hidden)} more baseline row(s) not in this run (missing)"] if hidden else []
    if any(r.contended for r in comparison.rows):
        notes.append("* timed with the CPU contended (this run or the baseline: see the row's flags): the "
                     "medians are not the op's alone, and neither is this verdict"
                     + ("; only such rows are slower: exit 3, not 1" if comparison.regressions
                        and comparison.regressions == comparison.contended_regressions else ""))
    if any(unresolved(r, comparison.threshold) for r in comparison.rows):
        notes.append(f"{UNRESOLVED_MARK} same with a ratio past the threshold: the medians differ by more than "
                     f"{comparison.threshold:.0%}, but the runs' spreads overlap (p20-p80, or the 95% interval "
                     "spans 1), so no change is shown")
    if any(r.verdict == "n/a" for r in comparison.rows):  # times on both sides, and still no verdict: say why
        notes.append("n/a: not compared: a side did not finish ok, ran under the Triton interpreter (host time "
                     "of its emulation, not a kernel), or ran on another GPU of a mixed host")
    caption = "\n".join(notes) or None
    table = Table(title=comparison.summary(), title_justify="left", header_style="bold", pad_edge=False,
                  caption=caption, caption_justify="left")
    with_ci = any(r.ci_low is not None for r in comparison.rows)
    for name in ("op", "impl", "shape", "sweep", "baseline ms", "now ms", "ratio", *(["95% CI"] if with_ci else []), "verdict"):
        table.add_column(name, justify="right" if name.endswith("ms") or name == "ratio" else "left")
    hidden_ids = {id(r) for r in hidden}
    for r in (r for r in comparison.rows if id(r) not in hidden_ids):
        interval = [f"{r.ci_low:.3f}-{r.ci_high:.3f}" if r.ci_low is not None else "-"] if with_ci else []
        table.add_row(Text(printable(r.op)), Text(printable(r.label)), shape_text(r.shape), "-" if r.sweep_value is None else str(r.sweep_value),
                      fmt_num(r.baseline_median_ms), fmt_num(r.median_ms),
                      "-" if r.ratio is None else f"{r.ratio:.3f}x", *interval,
                      Text(r.verdict + (UNRESOLVED_MARK if unresolved(r, comparison.threshold) else "")
                           + ("*" if r.contended else ""), VERDICT_STYLE.get(r.verdict, "")))
    return table
