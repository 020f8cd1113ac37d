"""Findings, the context rules see, and the run over every rule (torch-free, plain data).

A rule is a plain function `rule(record, ctx) -> Finding | None` over one result record (a
Record, workbench/results/record.py: timing, traffic, launch, measured as fields; profile and
ptx plain objects) and a Context:
the document's environment and the other records (peers: the `+graph` variant, the fused form,
the 4096 beside a 4097). Records of older documents simply lack some keys; a rule that finds
no evidence returns None. `diagnose` runs RULES in order; a rule may name the findings that make
it moot (`Rule.unless`: a host-bound row is not "at 0.7% of cuBLAS").

A row that could not run here (`unavailable`: a CUDA kernel on a machine without a GPU) may still
carry its PTX (nvcc and Triton compile for sm_90 without one); the rules marked `static`, which
read the PTX alone (FP64 in a float32 kernel, scalar loads, spills), still apply to it, so a
laptop shows the lecture's `cuda_naive` computing in FP64. Other statuses get no findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Mapping, Sequence

from workbench.results.record import Record

SEVERITIES = ("problem", "note")


@dataclass(frozen=True)
class Finding:
    """rule: a short name ("unfused"); evidence: what the numbers say, with the numbers;
    suggestion: the prescription; severity: "problem" (a fix is known) or "note" (context);
    data: the key figures as numbers (for tables and tests)."""

    rule: str
    evidence: str
    suggestion: str
    severity: str = "problem"
    data: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"rule": self.rule, "evidence": self.evidence, "suggestion": self.suggestion,
                "severity": self.severity, "data": dict(self.data)}


@dataclass(frozen=True)
class Context:
    """environment: the document's `environment`; peers: every record of the document."""

    environment: Mapping[str, Any] = field(default_factory=dict)
    peers: Sequence[Record] = ()

    def same_point(self, record: Record) -> list[Record]:
        """Other ok records of the same run, shape, dtype and sweep point."""
        return [p for p in self._index[0].get(_point(record), ()) if p is not record]

    def same_label(self, record: Record) -> list[Record]:
        """Other ok records of the same run and label (a sweep's other points)."""
        return [p for p in self._index[1].get(_label(record), ()) if p is not record]

    def same_label_at(self, record: Record, shape: Mapping[str, Any]) -> Record | None:
        """The first other ok record of the same run and label at `shape`, or None."""
        for peer in self._index[2].get((*_label(record), _shape(shape)), ()):
            if peer is not record:
                return peer
        return None

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """compute() once per key for this document (a sweep's evidence, the same for each point)."""
        memo = self.__dict__.setdefault("_memo", {})
        if key not in memo:
            memo[key] = compute()
        return memo[key]

    @cached_property
    def _index(self) -> tuple[dict, dict, dict]:
        """The ok peers by point, by (run, label), by (run, label, shape), in document order: the
        scans over every peer made a replay of 2500 rows spend minutes in its diagnosis, after
        Ctrl-C too (~3.7k rows took over 10 s to exit, measured)."""
        by_point: dict = {}
        by_label: dict = {}
        by_shape: dict = {}
        for peer in self.peers:
            if peer.status == "ok":
                by_point.setdefault(_point(peer), []).append(peer)
                by_label.setdefault(_label(peer), []).append(peer)
                by_shape.setdefault((*_label(peer), _shape(peer.shape or {})), []).append(peer)
        return by_point, by_label, by_shape


def _label(record: Record) -> tuple:
    return (record.run_index, record.label)


def _shape(shape: Mapping[str, Any]) -> str:
    return repr(sorted(shape.items()))


def _point(record: Record) -> tuple:
    return (record.run_index, repr(sorted((record.shape or {}).items())), record.dtype, repr(record.sweep_value))


@dataclass(frozen=True)
class Rule:
    name: str
    check: Callable[[Record, Context], Finding | None]
    unless: tuple[str, ...] = ()
    static: bool = False  # reads the PTX record alone: applies to an `unavailable` row with PTX


def diagnose(record: Record, ctx: Context, rules: Sequence[Rule]) -> list[dict]:
    """The findings of one record (problems first, then notes); [] for rows that did not run ok,
    except an `unavailable` row with PTX kernels, which gets the `static` rules' findings."""
    status = record.status
    if status == "unavailable" and (record.ptx or {}).get("kernels"):
        rules = [rule for rule in rules if rule.static]
    elif status != "ok":
        return []
    found: list[Finding] = []
    for rule in rules:
        if any(f.rule in rule.unless for f in found):
            continue
        finding = rule.check(record, ctx)
        if finding is not None:
            found.append(finding)
    found.sort(key=lambda f: SEVERITIES.index(f.severity))
    return [f.as_dict() for f in found]
