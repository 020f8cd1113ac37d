"""The kernels table's rows and markdown from a results document (a bench-kernels run): one row
per result with its median, spread, GB/s or TFLOP/s, % of copy or of cuBLAS, the best library
time over ours and the tuned config. Used by benchmarks/kernels_table.py (the CLI and the results
page) and the `kernels` GPU stage."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

LIBRARY_KINDS = ("pytorch", "compiled", "manual")
PRODUCT_OPS = ("matmul", "matmul_gelu", "mlp", "cdist")


def group_key(rec: Mapping[str, Any]) -> tuple:
    return rec["op"], tuple(sorted((rec.get("shape") or {}).items())), rec.get("dtype")


def best_library_ms(results: Iterable[Mapping[str, Any]]) -> dict[tuple, float]:
    """(op, shape, dtype) -> the fastest ok library row's median ms."""
    best: dict[tuple, float] = {}
    for rec in results:
        median = (rec.get("timing") or {}).get("median_ms")
        if rec.get("status") == "ok" and median and rec["impl"].split("_")[0] in LIBRARY_KINDS:
            key = group_key(rec)
            best[key] = min(best.get(key, median), median)
    return best


def tuned_label(rec: Mapping[str, Any]) -> str | None:
    """`BLOCK_M=128 ... (tuned)` from the row's `tuned`, None where nothing was tuned."""
    tuned = rec.get("tuned")
    if not tuned:
        return None
    config = " ".join(f"{k}={v}" for k, v in (tuned.get("config") or {}).items())
    return f"{config} ({tuned.get('source')})"


def rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The table rows of a results document (see the module docstring)."""
    results = doc.get("results", [])
    best = best_library_ms(results)
    out = []
    for rec in results:
        timing, traffic = rec.get("timing") or {}, rec.get("traffic") or {}
        median = timing.get("median_ms")
        product = rec["op"] in PRODUCT_OPS
        lib = best.get(group_key(rec))
        row = {"op": rec["op"], "shape": "x".join(str(v) for v in (rec.get("shape") or {}).values()),
               "dtype": rec.get("dtype"), "impl": rec.get("label") or rec["impl"], "status": rec.get("status"),
               "median_ms": median,
               "spread_pct": _spread(timing),
               "value": traffic.get("tflops") if product else traffic.get("gbps"),
               "unit": "TFLOP/s" if product else "GB/s",
               "pct": traffic.get("pct_of_cublas") if product else traffic.get("pct_of_copy"),
               "pct_of": "cuBLAS" if product else "copy",
               "x_lib": round(lib / median, 3) if lib and median else None,
               "tuned": tuned_label(rec),
               "error": ((rec.get("error") or "").splitlines() or [""])[0][:100] or None}
        out.append(row)
    return out


def _spread(timing: Mapping[str, Any]) -> float | None:
    p20, p80, median = timing.get("p20_ms"), timing.get("p80_ms"), timing.get("median_ms")
    if p20 is None or p80 is None or not median:
        return None
    return round(100.0 * (p80 - p20) / median, 2)


def markdown(doc: Mapping[str, Any]) -> str:
    """The H200 page's kernels table (results/h200.md)."""
    env = doc.get("environment") or {}
    head = (f"Measured on {env.get('device', '?')} (torch {env.get('torch', '?')}, triton {env.get('triton', '?')}); "
            f"copy reference {((env.get('ceilings') or {}).get('copy_gbps') or 0):.0f} GB/s.\n\n"
            "| op | shape | dtype | implementation | median ms (p20-p80 %) | GB/s or TFLOP/s | % of copy / cuBLAS "
            "| best library / ours | tuned config |\n|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows(doc):
        if r["status"] != "ok":
            lines.append(f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['impl']} | {r['status']}: {r['error']} "
                         "| | | | |")
            continue
        value = f"{r['value']:.0f} {r['unit']}" if r["value"] is not None else ""
        pct = f"{r['pct']:.1f}% of {r['pct_of']}" if r["pct"] is not None else ""
        x_lib = f"{r['x_lib']:.3f}x" if r["x_lib"] is not None else ""
        lines.append(f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['impl']} | {r['median_ms']:.4f} "
                     f"({r['spread_pct']}) | {value} | {pct} | {x_lib} | {r['tuned'] or ''} |")
    return head + "\n".join(lines) + "\n"
