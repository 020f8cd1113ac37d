"""The pure half of stage `diagnose` (benchmarks/stages/diagnose.py): the parts as session data,
and the summary rows read back from their results documents. No torch, no GPU: unit-tested on
CPU (tests/test_stage_diagnose.py).

Parts in order, the cheapest first (a tight budget drops the last runs: ncu's, one subprocess
per row, are the dearest); --quick keeps one run of every item of EVIDENCE, the issue's list, in
its cheapest form:
- ab: triton against pytorch softmax in bfloat16 at 16384^2, and triton against triton (A/A);
- lecture: the lecture's rows with check + bench + profile (+ ptx): the MLP at dim 128 beside its
  `+graph` variant (launch-bound), manual GeLU (unfused), cuda_naive (FP64), manual softmax,
  matmul float32 at 4096 and 4097;
- counters: ncu's DRAM bytes of one call against the cost model, fused GeLU and softmax at
  16384^2 in float32 and bfloat16 (within COUNTERS_TOLERANCE of the model; --quick: all but
  softmax float32's fused form), and the manual (unfused) forms against their unfused model.
"""

from __future__ import annotations

from typing import Any

COUNTERS_TOLERANCE = 0.10
SQUARE = {"M": 16384, "N": 16384}
MLP_SHAPE = {"batch": 128, "dim": 128, "layers": 4, "steps": 2}


def _run(op: str, impls: list, dtype: str, actions: list, shape: dict | None = None, **extra) -> dict:
    run = {"op": op, "impls": impls, "dtype": dtype, "actions": actions}
    if shape:
        run["shape"] = dict(shape)
    run.update(extra)
    return run


def parts(quick: bool, cpu: bool = False) -> list[tuple[str, dict]]:
    """(name, session data) per part; each run of a session is run (and written) on its own.

    quick keeps one run of every item of EVIDENCE, at the full sizes (the cheapest form of each:
    cuda_naive's FP64 from its PTX alone, no load_inline build; cuBLAS alone at 4096/4097).
    cpu: the same runs at tiny shapes on the CPU (the stage's logic tried without a GPU: what
    needs one is `unavailable` with its reason)."""
    counters = [_run("gelu", ["pytorch", "manual"] + ([] if quick else ["triton"]), "float32",
                     ["check", "counters"], SQUARE),
                _run("softmax", ["triton"] if quick else ["manual", "pytorch", "triton"], "bfloat16",
                     ["check", "counters"], SQUARE),
                _run("gelu", ["pytorch"] if quick else ["pytorch", "triton"], "bfloat16", ["check", "counters"], SQUARE),
                _run("softmax", ["manual"] if quick else ["manual", "pytorch", "triton"], "float32",
                     ["check", "counters"], SQUARE)]
    lecture = [
        _run("mlp", ["pytorch", "pytorch+graph"] + ([] if quick else ["compiled", "compiled+graph"]), "float32",
             ["check", "bench", "profile"], MLP_SHAPE),
        _run("gelu", ["manual", "pytorch"] + ([] if quick else ["cuda_naive", "cuda"]), "float32",
             ["check", "bench", "profile", "ptx"], SQUARE),
        _run("softmax", ["manual", "pytorch"] + ([] if quick else ["triton"]), "float32",
             ["check", "bench", "profile"], SQUARE),
        _run("matmul", ["pytorch"] + ([] if quick else ["triton"]), "float32", ["check", "bench", "ptx"],
             {"M": 4096, "N": 4096, "K": 4096}, sweep={"params": ["M", "N", "K"], "values": [4096, 4097]}),
    ]
    if quick:  # FP64 is in the PTX: nvcc's PTX (seconds) instead of the load_inline build (~1 min cold)
        lecture.insert(2, _run("gelu", ["cuda_naive"], "float32", ["ptx"], SQUARE))
    ab_settings = {"rep_ms": 100.0 if quick else 300.0}  # 2 x rep_ms for the pair
    ab = [_run("softmax", ["pytorch", "triton"], "bfloat16", ["check"], SQUARE, compare=["triton", "pytorch"],
               settings=ab_settings),
          _run("softmax", ["triton"], "bfloat16", ["check"], SQUARE, compare=["triton", "triton"],
               settings=ab_settings)]
    fast = {"warmup_ms": 10.0, "rep_ms": 50.0, "min_samples": 10} if quick else {}
    device = {"device": "cuda"}
    if cpu:
        for run in counters + lecture + ab:
            _shrink(run)
        device = {"device": "cpu", "flush_l2": False, "target_rel_error": 0.5, "min_samples": 3}
    return [(name, {"schema_version": 1, "name": f"diagnose-{name}", "settings": {**fast, **device}, "runs": runs})
            for name, runs in (("ab", ab), ("lecture", lecture), ("counters", counters))]


# What the Evidence list asks of this stage (issue #15), and the run of a part that shows it:
# (part, op, dtype, an implementation or compare pair, an action). tests/test_stage_diagnose.py
# checks that --quick and the full stage both hold each.
EVIDENCE = {
    "ncu vs model: fused GeLU float32": ("counters", "gelu", "float32", "pytorch", "counters"),
    "ncu vs model: fused GeLU bfloat16": ("counters", "gelu", "bfloat16", "pytorch", "counters"),
    "ncu vs model: fused softmax bfloat16": ("counters", "softmax", "bfloat16", "triton", "counters"),
    "ncu vs unfused model: manual GeLU": ("counters", "gelu", "float32", "manual", "counters"),
    "ncu vs unfused model: manual softmax": ("counters", "softmax", "float32", "manual", "counters"),
    "diagnosis: manual GeLU unfused": ("lecture", "gelu", "float32", "manual", "profile"),
    "diagnosis: cuda_naive FP64": ("lecture", "gelu", "float32", "cuda_naive", "ptx"),
    "diagnosis: manual softmax": ("lecture", "softmax", "float32", "manual", "profile"),
    "diagnosis: MLP dim 128 launch-bound": ("lecture", "mlp", "float32", "pytorch", "profile"),
    "diagnosis: MLP dim 128 +graph": ("lecture", "mlp", "float32", "pytorch+graph", "bench"),
    "diagnosis: matmul 4097 against 4096": ("lecture", "matmul", "float32", "pytorch", "bench"),
    "A/B: triton vs pytorch softmax bfloat16": ("ab", "softmax", "bfloat16", ("triton", "pytorch"), "check"),
    "A/B: triton vs triton": ("ab", "softmax", "bfloat16", ("triton", "triton"), "check"),
}
TINY = {"M": 4, "N": 256, "K": 64, "batch": 8, "dim": 16}  # the CPU path's sizes, by field


def _shrink(run: dict) -> None:
    run["shape"] = {k: TINY.get(k, v) for k, v in run.get("shape", {}).items()}
    if run.get("sweep"):  # 4097 against 4096 becomes 65 against 64
        run["sweep"] = {**run["sweep"], "values": [TINY["K"], TINY["K"] + 1]}


def evidence_runs(parts_: list[tuple[str, dict]]) -> dict[str, dict | None]:
    """EVIDENCE item -> the run of `parts_` that shows it (None: missing)."""
    found = {}
    for item, (part, op, dtype, impl, action) in EVIDENCE.items():
        runs = dict(parts_)[part]["runs"]
        found[item] = next((r for r in runs if r["op"] == op and r["dtype"] == dtype and action in r["actions"]
                            and (r.get("compare") == list(impl) if isinstance(impl, tuple) else impl in r["impls"])),
                           None)
    return found


# -- summary rows ----------------------------------------------------------------------------
def counters_rows(doc: dict) -> list[dict]:
    """One row per record with counters: measured DRAM bytes against the model's moved bytes."""
    rows = []
    for r in doc.get("results") or ():
        m = r.get("measured") or {}
        if not m:
            continue
        item = f"ncu {r['op']} {r['label']} {r['dtype']}"
        if m.get("reason") or not m.get("dram_bytes"):
            rows.append({"item": item, "status": r.get("status"), "note": m.get("reason") or r.get("error")})
            continue
        ratio = m["dram_bytes"] / m["model_bytes"] if m.get("model_bytes") else None
        rows.append({"item": item, "status": r.get("status"), "kernels": m.get("kernel_count"),
                     "read_GB": m["dram_bytes_read"] / 1e9, "write_GB": m["dram_bytes_write"] / 1e9,
                     "model_GB": (m.get("model_bytes") or 0) / 1e9, "measured/model": ratio,
                     "within_10pct": ratio is not None and abs(ratio - 1) <= COUNTERS_TOLERANCE})
    return rows


def lecture_rows(doc: dict) -> list[dict]:
    """One row per record: its median and its findings by rule, with the key figures."""
    rows = []
    for r in doc.get("results") or ():
        timing = r.get("timing") or {}
        label = r["label"] + (f" @ {r['sweep_value']}" if r.get("sweep_value") is not None else "")
        findings = "; ".join(_finding_text(f) for f in r.get("diagnosis") or ()) or "-"
        rows.append({"item": f"{r['op']} {label}", "status": r.get("status"),
                     "median_ms": timing.get("median_ms"), "findings": findings,
                     "note": r.get("error")})
    return rows


def _finding_text(finding: dict) -> str:
    data = finding.get("data") or {}
    keys = ("kernels", "ratio", "fp64_arith", "graph_speedup", "pct_of_copy", "pct_of_cublas", "waves")
    figures = ", ".join(f"{k} {_short(data[k])}" for k in keys if data.get(k) is not None)
    return f"{finding['rule']}" + (f" ({figures})" if figures else "")


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def ab_rows(doc: dict) -> list[dict]:
    return [{"item": f"A/B {e.get('op')} {e.get('dtype')}: {e.get('a')} vs {e.get('b')}", "status": e.get("status"),
             "ratio": e.get("ratio"), "ci_low": e.get("ci_low"), "ci_high": e.get("ci_high"), "n": e.get("n"),
             "verdict": e.get("verdict"), "note": e.get("error")} for e in doc.get("ab") or ()]


def merge(doc: dict | None, part: dict) -> dict:
    """`part` (one run's document, run_index 0) appended to `doc` as its next run."""
    if doc is None:
        return part
    index = 1 + max((r.get("run_index", 0) for r in doc.get("results") or ()), default=-1)
    doc["results"] += [{**r, "run_index": index} for r in part.get("results") or ()]
    doc["ab"] = (doc.get("ab") or []) + [{**e, "run_index": index} for e in part.get("ab") or ()]
    doc["environment"] = part.get("environment") or doc.get("environment")
    return doc
