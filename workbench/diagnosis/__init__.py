"""The lecture's workflow, automated: a diagnosis of every result record.

    from workbench.diagnosis import diagnose_record, diagnose_document
    diagnose_document(doc)            # fills record["diagnosis"] of every record in place

Each finding: {rule, evidence, suggestion, severity, data} (docs/CONTRACTS.md). RULES is the
lecture's table of symptoms and prescriptions (lecture 6, "常见判断表": many small kernels ->
fuse; CUDA time small, CPU time large -> launch overhead, CUDA graphs; slow reductions -> a fused
kernel; FP64 where FP32 was meant) plus what the PTX, the counters and the roofline show.
Plain, torch-free functions over the document's data, each unit-tested on recorded H200 rows
(tests/test_diagnosis.py).
"""

from __future__ import annotations

from typing import Any, Mapping

from workbench.diagnosis import rules_ptx as ptx
from workbench.diagnosis import rules_timing as timing
from workbench.diagnosis import rules_traffic as traffic
from workbench.diagnosis.core import Context, Finding, Rule, diagnose
from workbench.results.record import Record, read_record

HOST_BOUND = ("launch_bound",)  # a host-bound row's roofline figures describe the host, not the kernel

RULES: tuple[Rule, ...] = (
    Rule("launch_blocking", timing.launch_blocking),
    Rule("launch_bound", timing.launch_bound),
    Rule("unfused", traffic.unfused),
    Rule("extra_passes", traffic.extra_passes, unless=("unfused",)),
    Rule("fp64", ptx.fp64, static=True),
    Rule("scalar_loads", ptx.scalar_loads, static=True),
    Rule("spills", ptx.spills, static=True),
    Rule("low_occupancy", ptx.low_occupancy),
    Rule("wave_quantization", ptx.wave_quantization),
    Rule("shape_alignment", ptx.shape_alignment),
    Rule("compute_bound", traffic.compute_bound, unless=HOST_BOUND),
    Rule("memory_bound", traffic.memory_bound, unless=(*HOST_BOUND, "fp64")),  # FP64 units, not HBM, bind it
    Rule("l2_resident", traffic.l2_resident),
    Rule("recompiles", timing.recompiles),
    Rule("clock_drop", timing.clock_drop),
    Rule("cpu_contended", timing.cpu_contended),
    Rule("noisy", timing.noisy, unless=("cpu_contended",)),  # not "raise rep_ms": the cores are the cause
)
RULE_NAMES = tuple(rule.name for rule in RULES)

__all__ = ["Context", "Finding", "RULES", "RULE_NAMES", "diagnose_record", "diagnose_document"]


def diagnose_record(record: Mapping[str, Any] | Record, environment: Mapping[str, Any] | None = None,
                    peers=()) -> list[dict]:
    """The findings of one record given its document's environment and records (dicts are read
    into Records; `record` itself among `peers` stays itself, so it is nobody's peer of its own)."""
    typed = read_record(record)
    others = tuple(typed if peer is record else read_record(peer) for peer in peers)
    return diagnose(typed, Context(environment or {}, others), RULES)


def diagnose_document(doc: dict) -> dict:
    """Fill `diagnosis` of every record of a results document (in place); returns `doc`."""
    records = doc.get("results") or []
    typed = [read_record(record, f"results[{i}]") for i, record in enumerate(records)]
    ctx = Context(doc.get("environment") or {}, tuple(typed))
    for record, read in zip(records, typed):
        record["diagnosis"] = diagnose(read, ctx, RULES)
    return doc
