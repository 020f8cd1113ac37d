"""The pure half of stage `misses` (benchmarks/stages/misses.py): the cases, the figures asked of
each (the targets of issue #19 still missed), and the parse of Nsight Compute's CSV. No torch,
no GPU: unit-tested on CPU (tests/test_stage_misses.py)."""

from __future__ import annotations

import csv
import io
import random
import re
import statistics
from dataclasses import dataclass, field

SQUARE = {"M": 16384, "N": 16384}
GEMM_4096 = {"M": 4096, "N": 4096, "K": 4096}
GEMM_8192 = {"M": 8192, "N": 8192, "K": 8192}
LONG_ROWS = {"M": 4096, "N": 262144}


@dataclass(frozen=True)
class Side:
    """One implementation timed in a case: a label, the registry's (op, impl)."""

    label: str
    op: str
    impl: str


@dataclass(frozen=True)
class Case:
    """A missed target: the sides timed together (interleaved rounds), the target's ratio
    (`ours` must be `target` times faster than `against`), and a note on what the target means."""

    name: str
    shape: dict
    dtype: str
    sides: tuple[Side, ...]
    ours: str
    against: tuple[str, ...]
    target: float
    note: str = ""
    copy: bool = False  # time a copy of the input too (memory-bound cases: % of copy)
    extra: dict = field(default_factory=dict)
    also: tuple[str, ...] = ()  # other sides held to the same target against the same references
    copy_target: float | None = None  # `ours` must also reach this % of the copy (needs copy=True)


def round_orders(name: str, labels: list[str], rounds: int) -> list[list[str]]:
    """Each round's order of the sides: a random permutation, seeded by the case's name (the same
    run to run). Not a rotation: a rotating schedule can run in step with the H200's ~1 s
    power-cap cycle and put one side in its slow state round after round
    (benchmarks/stages/_truth_core.interleave)."""
    rng = random.Random(name)
    return [rng.sample(labels, len(labels)) for _ in range(rounds)]


def cases() -> list[Case]:
    """#19's targets missed in the last side-by-side run (results/history/h200/2026-12-02), in this order."""
    gemm = lambda dtype, shape: Case(  # noqa: E731
        f"matmul {shape['M']}^3 {dtype}", shape, dtype,
        (Side("cuBLAS", "matmul", "pytorch"), Side("triton", "matmul", "triton")),
        ours="triton", against=("cuBLAS",), target=1.0, note="Triton >= 1.0x cuBLAS")
    fused = Case(
        "matmul_gelu 8192^3 bfloat16", GEMM_8192, "bfloat16",
        (Side("cuBLAS+GeLU", "matmul_gelu", "manual"), Side("fused triton", "matmul_gelu", "triton"),
         Side("compiled", "matmul_gelu", "compiled"), Side("cuBLAS matmul", "matmul", "pytorch"),
         Side("triton matmul", "matmul", "triton")),
        ours="fused triton", against=("cuBLAS+GeLU", "compiled"), target=1.05,
        note="fused >= 1.05x the faster of cuBLAS then GeLU and torch.compile (issue #40); the plain GEMMs show what the epilogue costs")
    softmax = Case(
        "softmax 16384^2 float32", SQUARE, "float32",
        (Side("triton", "softmax", "triton"), Side("compiled", "softmax", "compiled"),
         Side("pytorch", "softmax", "pytorch"), Side("cuda", "softmax", "cuda")),
        ours="triton", against=("compiled", "pytorch"), target=1.0, copy=True, also=("cuda",),
        note="triton and cuda: no slower than the best of pytorch and compiled beyond the measured spread")
    long_rows = lambda dtype: Case(  # noqa: E731
        f"softmax 4096x262144 {dtype}", LONG_ROWS, dtype,
        (Side("cuda", "softmax", "cuda"), Side("compiled", "softmax", "compiled")),
        ours="cuda", against=("compiled",), target=1.3, copy=True, copy_target=90.0,
        note="cuda (thread-block cluster, one pass) >= 90% of copy and >= 1.3x torch.compile")
    return [gemm("bfloat16", GEMM_4096), gemm("float16", GEMM_4096), fused, softmax,
            gemm("bfloat16", GEMM_8192), gemm("float16", GEMM_8192), long_rows("bfloat16"), long_rows("float32")]


def selected(only: tuple[str, ...] | None) -> list[Case]:
    """cases(), or those whose name contains one of `only` (gpu_evidence.py --only: comma-separated,
    e.g. "4096x262144,matmul_gelu"), in cases()' order."""
    return [c for c in cases() if not only or any(o and o in c.name for o in only)]


def median_of_rounds(rounds: list[float]) -> float:
    return statistics.median(rounds)


def figures(case: Case, rounds: dict[str, list[float]], copy_ms: float | None = None) -> dict:
    """Per side its median over rounds; the target's ratio (best `against` median / ours, so >1:
    ours faster), whether it is met, and the paired ratio (median of per-round ratios)."""
    medians = {label: median_of_rounds(ms) for label, ms in rounds.items() if ms}
    out: dict = {"medians_ms": medians}
    if copy_ms:
        out["pct_of_copy"] = {label: 100.0 * copy_ms / ms for label, ms in medians.items()}
        if case.copy_target is not None and case.ours in medians:
            pct = out["pct_of_copy"][case.ours]
            out.update(copy_target_pct=case.copy_target, copy_pct=pct, copy_met=pct >= case.copy_target,
                       copy_gap_points=case.copy_target - pct)
    against = [a for a in case.against if a in medians]
    if case.ours in medians and against:
        best = min(against, key=lambda a: medians[a])
        ratio = medians[best] / medians[case.ours]
        paired = statistics.median(a / o for a, o in zip(rounds[best], rounds[case.ours]))
        out.update(against=best, ratio=ratio, paired_ratio=paired, target=case.target, met=ratio >= case.target)
        # what `ours` would have to run in to meet the target against this run's best reference
        out["needed_ms"] = medians[best] / case.target
        out["gap_pct"] = 100.0 * (medians[case.ours] / out["needed_ms"] - 1.0)
        for label in (x for x in case.also if x in medians):  # the same target for another of ours
            r = medians[best] / medians[label]
            out.setdefault("also", {})[label] = {
                "ratio": r, "met": r >= case.target,
                "paired_ratio": statistics.median(a / o for a, o in zip(rounds[best], rounds[label])),
                "gap_pct": 100.0 * (medians[label] / out["needed_ms"] - 1.0)}
    return out


# -- Nsight Compute ----------------------------------------------------------------------------
NCU_SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy", "ComputeWorkloadAnalysis", "WarpStateStats")
# Hopper's wgmma pipe, by whichever name this ncu has; the XU pipe (MUFU: ex2, rcp), where a
# 16-bit softmax spends its exponentials; why warps wait (per issued instruction); the DRAM bytes
# (one read and one write of the row?). Regexes, so that a name this ncu lacks is no error.
NCU_METRICS = ("regex:sm__pipe_tensor_op_(gmma|hmma)_cycles_active.avg.pct_of_peak_sustained_(active|elapsed)",
               "sm__cycles_elapsed.avg.per_second",
               r"regex:^sm__inst_executed_pipe_xu\.avg\.pct_of_peak_sustained_active$",
               r"regex:^smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\.ratio$",
               r"regex:^dram__bytes_(read|write)\.sum$")
STALL = re.compile(r"smsp__average_warps_issue_stalled_([a-z_]+)_per_issue_active\.ratio")
BYTES = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12}  # ncu's units are decimal
WANTED = {  # short name -> the metric names ncu's sections print (first found wins)
    "duration_us": ("Duration", "gpu__time_duration.sum"),
    "sm_throughput_pct": ("Compute (SM) Throughput", "SM Throughput", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    "memory_throughput_pct": ("Memory Throughput",),
    "dram_throughput_pct": ("DRAM Throughput", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
    "sm_clock_hz": ("SM Frequency", "sm__cycles_elapsed.avg.per_second"),
    "registers": ("Registers Per Thread",),
    "shared_kib_per_block": ("Dynamic Shared Memory Per Block",),
    "waves_per_sm": ("Waves Per SM",),
    "grid": ("Grid Size",),
    "block": ("Block Size",),
    "achieved_occupancy_pct": ("Achieved Occupancy",),
    "issue_busy_pct": ("Issue Slots Busy",),
    "sm_busy_pct": ("SM Busy",),
    "warp_cycles_per_issue": ("Warp Cycles Per Issued Instruction",),
    "ipc_active": ("Executed Ipc Active",),
    "cluster_size": ("Cluster Size",),
    "max_active_clusters": ("Max Active Clusters",),
    "xu_pipe_pct": ("sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",),
    "dram_read_bytes": ("dram__bytes_read.sum",),
    "dram_write_bytes": ("dram__bytes_write.sum",),
}
UNIT_SCALE = {"usecond": 1.0, "msecond": 1e3, "nsecond": 1e-3, "second": 1e6, "us": 1.0, "ms": 1e3, "ns": 1e-3,
              "hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9, "cycle/second": 1.0, "cycle/nsecond": 1e9,
              "cycle/usecond": 1e6, "kbyte": 1.0, "byte": 1 / 1024}


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> list[dict]:
    """Kernels from `ncu --csv --page details` output (lines before the CSV header are skipped):
    one dict per kernel ID in launch order: {"id", "name", "metrics": {metric name: (value, unit)},
    and WANTED's short names as numbers (durations in us, clocks in Hz) where found}."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    kernels: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        kid = row.get("ID")
        if kid is None:
            continue
        k = kernels.setdefault(kid, {"id": int(kid) if kid.isdigit() else kid, "name": row.get("Kernel Name", ""),
                                     "grid": row.get("Grid Size"), "block": row.get("Block Size"), "metrics": {}})
        name = (row.get("Metric Name") or "").strip()
        if name:
            k["metrics"][name] = ((row.get("Metric Value") or "").strip(), (row.get("Metric Unit") or "").strip())
    out = []
    for k in kernels.values():
        for short, names in WANTED.items():
            if short in ("grid", "block"):
                continue
            for name in names:
                if name in k["metrics"]:
                    value, unit = k["metrics"][name]
                    number = _number(value)
                    if number is not None and short in ("duration_us", "sm_clock_hz", "shared_kib_per_block"):
                        number *= UNIT_SCALE.get(unit.lower(), 1.0)
                    elif number is not None and short.endswith("_bytes"):
                        number *= BYTES.get(unit.lower(), 1.0)
                    k[short] = number
                    break
        tensor = [v for n, v in k["metrics"].items() if re.match(r"sm__pipe_tensor_op_(gmma|hmma)_cycles_active", n)]
        k["tensor_pipe_pct"] = max((_number(v) for v, _ in tensor if _number(v) is not None), default=None)
        stalls = {m.group(1): _number(v) for n, (v, _) in k["metrics"].items()
                  if (m := STALL.fullmatch(n)) and _number(v) is not None}
        # the six largest reasons a warp waited, in cycles per issued instruction
        k["stalls"] = dict(sorted(stalls.items(), key=lambda kv: -kv[1])[:6]) or None
        out.append(k)
    return sorted(out, key=lambda k: (isinstance(k["id"], str), k["id"]))


def label_kernels(kernels: list[dict], marks: list[tuple[str, int]]) -> list[dict]:
    """Give each kernel the side it belongs to: `marks` are (label, kernels launched by its one
    profiled call), in profiling order (the ncu entry's output)."""
    out, i = [], 0
    for label, count in marks:
        for k in kernels[i:i + count]:
            out.append({**k, "side": label})
        i += count
    return out
