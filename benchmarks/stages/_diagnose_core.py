"""The pure half of stage `diagnose` (benchmarks/stages/diagnose.py): the parts as session data,
and the summary rows read back from their results documents. No torch, no GPU: unit-tested on
CPU (tests/test_stage_diagnose.py).

Parts in order (a tight budget drops the last runs; --quick keeps the first run or two of each):
- counters: ncu's DRAM bytes of one call against the cost model, fused GeLU and softmax at
  16384^2 in float32 and bfloat16 (within COUNTERS_TOLERANCE of the model), and the manual
  (unfused) forms against their unfused model;
- ab: triton against pytorch softmax in bfloat16 at 16384^2, and triton against triton (A/A);
- lecture: the lecture's rows with check + bench + profile (+ ptx): the MLP at dim 128 beside its
  `+graph` variant (launch-bound), manual GeLU (unfused), cuda_naive (FP64), manual softmax,
  matmul float32 at 4096 and 4097.
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


def parts(quick: bool) -> list[tuple[str, dict]]:
    """(name, session data) per part; each run of a session is run (and written) on its own."""
    counters = [_run("gelu", ["manual", "pytorch"] + ([] if quick else ["triton"]), "float32",
                     ["check", "counters"], SQUARE),
                _run("softmax", ["triton"] if quick else ["manual", "pytorch", "triton"], "bfloat16",
                     ["check", "counters"], SQUARE)]
    if not quick:
        counters += [_run("gelu", ["pytorch", "triton"], "bfloat16", ["check", "counters"], SQUARE),
                     _run("softmax", ["manual", "pytorch", "triton"], "float32", ["check", "counters"], SQUARE)]
    lecture = [
        _run("mlp", ["pytorch", "pytorch+graph"] + ([] if quick else ["compiled", "compiled+graph"]), "float32",
             ["check", "bench", "profile"], MLP_SHAPE),
        _run("gelu", ["manual", "pytorch"] + ([] if quick else ["cuda_naive", "cuda"]), "float32",
             ["check", "bench", "profile", "ptx"], SQUARE),
    ]
    if not quick:  # the cuda build (load_inline, ~1 min cold) and these runs are the full stage's
        lecture += [
            _run("softmax", ["manual", "pytorch", "triton"], "float32", ["check", "bench", "profile"], SQUARE),
            _run("matmul", ["pytorch", "triton"], "float32", ["check", "bench", "ptx"], {"M": 4096, "N": 4096, "K": 4096},
                 sweep={"params": ["M", "N", "K"], "values": [4096, 4097]}),
        ]
    ab_settings = {"rep_ms": 100.0 if quick else 300.0}  # 2 x rep_ms for the pair
    ab = [_run("softmax", ["pytorch", "triton"], "bfloat16", ["check"], SQUARE, compare=["triton", "pytorch"],
               settings=ab_settings)]
    if not quick:
        ab.append(_run("softmax", ["triton"], "bfloat16", ["check"], SQUARE, compare=["triton", "triton"],
                       settings=ab_settings))
    fast = {"warmup_ms": 10.0, "rep_ms": 50.0, "min_samples": 10} if quick else {}
    return [(name, {"schema_version": 1, "name": f"diagnose-{name}", "settings": {"device": "cuda", **fast},
                    "runs": runs}) for name, runs in (("counters", counters), ("ab", ab), ("lecture", lecture))]


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
