"""The kernels table: a bench-kernels results document as rows, or as the markdown of results/h200.md's kernels table; and
the results page of one GPU kind, measured and written by one command.

    python benchmarks/kernels_table.py results/h200/bench-kernels.json   # markdown, to stdout
    python benchmarks/kernels_table.py --run --out results/h100.md [--quick] [--budget-s 240]

--run (on the GPU to be described): sessions/bench-kernels.yaml through the engine (the `kernels`
stage's warm-up and budget; `page_session` puts the targets' rows first: the GEMMs, the fused
epilogue, the long rows, then every memory-bound op and dtype), then writes OUT (the page: the
targets of issue #40 with met / missed, then every row) and OUT with .json (the results
document, checked by tests/test_results_committed.py). --quick: the memory-bound rows at 8192 x
8192 instead of 16384 x 16384, shorter timing windows, a 60 s build warm-up and a 150 s budget
(240 s without; timings on a GPU not yet taken: the first runs on H100 and H200 say how long).

One row per result: op, shape, dtype, implementation, median ms and its p20-p80 spread, GB/s or
TFLOP/s, % of the measured copy (memory-bound ops) or of cuBLAS (products), the best library
time of the same (op, shape, dtype) over this row's (`x_lib`: above 1 is faster than every
library implementation of the run; the libraries are the pytorch, compiled and manual rows), and
the autotuned config. A row that failed shows its status and first error line instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Mapping

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: the checkout's root
from benchmarks.kernels_markdown import (LIBRARY_KINDS, PRODUCT_OPS, best_library_ms, group_key,  # noqa: E402,F401
                                         markdown, rows, tuned_label)  # (re-exported: the table's names)

# The targets of issue #40: (op, impl, shape filter, what is compared, threshold).
GEMM_TARGET = 1.0    # Triton matmul / cuBLAS (x_lib: the best library time over ours)
FUSED_TARGET = 1.05  # matmul_gelu triton against the faster of manual and compiled
LONG_ROW_TARGET = 95.0  # % of copy, softmax 4096 x 262144


def targets(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One line per target row of the document: {"target", "row", "measured", "met"} (met None:
    the row did not run ok). Targets: matmul triton >= cuBLAS, matmul_gelu triton >= 1.05x the
    faster of manual and compiled (x_lib), softmax cuda at 4096 x 262144 >= 95% of copy."""
    out = []
    for r in rows(doc):
        row = f"{r['op']} {r['shape']} {r['dtype']} {r['impl']}"
        if r["op"] == "matmul" and r["impl"] == "triton":
            target, value, need = "Triton matmul >= cuBLAS", r["x_lib"], GEMM_TARGET
        elif r["op"] == "matmul_gelu" and r["impl"] == "triton":
            target, value, need = "fused GeLU epilogue >= 1.05x min(manual, compiled)", r["x_lib"], FUSED_TARGET
        elif r["op"] == "softmax" and r["impl"] == "cuda" and r["shape"] == "4096x262144":
            target, value, need = "long-row softmax >= 95% of copy", r["pct"], LONG_ROW_TARGET
        else:
            continue
        ok = r["status"] == "ok" and value is not None
        shown = (f"{value:.1f}%" if target.startswith("long") else f"{value:.3f}x") if ok else (r["status"] or "-")
        out.append({"target": target, "row": row, "measured": shown, "met": (value >= need) if ok else None})
    return out


def clock_range(doc: Mapping[str, Any]) -> str:
    """`SM clock 1335-1980 MHz over the timed windows` from the rows' timing.sm_clock_mhz, or ''."""
    lows, highs = [], []
    for rec in doc.get("results", []):
        clock = (rec.get("timing") or {}).get("sm_clock_mhz") or {}
        if clock.get("min") and clock.get("max"):
            lows.append(clock["min"])
            highs.append(clock["max"])
    return f"SM clock {min(lows):.0f}-{max(highs):.0f} MHz over the timed windows" if lows else ""


def page(doc: Mapping[str, Any], command: str) -> str:
    """The results page of one GPU kind: where and how it was measured, the targets, every row."""
    env, prov = doc.get("environment") or {}, doc.get("provenance") or {}
    lines = [f"# Our kernels on {env.get('device', '?')}", "",
             f"Made by `{command}` ({prov.get('started', '?')}, git {prov.get('git_sha', '?')}; driver "
             f"{env.get('driver', '?')}, CUDA {env.get('cuda', '?')}, torch {env.get('torch', '?')}, triton "
             f"{env.get('triton', '?')}). {clock_range(doc)}. Medians of the engine's timed samples, L2 "
             "flushed; % of copy against the copy measured on this GPU, % of cuBLAS against cuBLAS in "
             "the same run. Autotuned rows name their choice (tuned on this device: workbench/tuning.py).",
             "", "## Targets (issue #40)", "", "| target | row | measured | met |", "|---|---|---|---|"]
    for t in targets(doc):
        met = {True: "yes", False: "**no**", None: "not run"}[t["met"]]
        lines.append(f"| {t['target']} | {t['row']} | {t['measured']} | {met} |")
    lines += ["", "## Every implementation", "", markdown(doc)]
    return "\n".join(lines)


def page_session(session: Any, quick: bool) -> Any:
    """bench-kernels for a results page: the target rows (GEMMs, fused epilogue, long rows) first,
    so a budget cut loses memory-bound rows rather than targets; --quick: memory-bound rows at
    8192 x 8192 and the quick timing windows."""
    import dataclasses

    def first(run) -> int:
        return 0 if run.op in PRODUCT_OPS else 1 if run.shape.get("N") == 262144 else 2
    runs = sorted(session.runs, key=first)  # stable: the session's order within each group
    settings = session.settings
    if quick:
        runs = [dataclasses.replace(r, shape={"M": 8192, "N": 8192}) if r.shape == {"M": 16384, "N": 16384} else r
                for r in runs]
        settings = dataclasses.replace(settings, rep_ms=30.0, warmup_ms=5.0, min_samples=5)
    return dataclasses.replace(session, runs=tuple(runs), settings=settings)


def run_page(out: Path, quick: bool, budget_s: float, command: str) -> int:
    """Measure bench-kernels here (page_session) and write the page to `out`, the document beside."""
    import tempfile

    from benchmarks.stages import kernels as stage
    from benchmarks.stages._op_runs import has_gpu, run_session, warm_builds

    if not has_gpu():
        print("kernels_table --run: no CUDA GPU here: a results page describes a GPU", file=sys.stderr)
        return 2
    from workbench.engine.plan import default_cache_dir

    session = page_session(stage.load(), quick)
    warm_s = stage.WARM_BUDGET_S if not quick else min(stage.WARM_BUDGET_S, 60.0)
    for note in warm_builds(stage.warm_session(session), default_cache_dir() / "build", warm_s):
        print(f"  {note}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as work:
        doc = run_session(session, Path(work), budget_s)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    out.write_text(page(doc, command))
    for t in targets(doc):
        print(f"{t['target']}: {t['row']}: {t['measured']} ({'met' if t['met'] else 'MISSED' if t['met'] is False else 'not run'})")
    print(f"kernels_table: wrote {out} and {out.with_suffix('.json')}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--run":
        import argparse

        parser = argparse.ArgumentParser(prog="kernels_table.py --run")
        parser.add_argument("--out", type=Path, required=True, help="the page, e.g. results/h100.md")
        parser.add_argument("--quick", action="store_true")
        parser.add_argument("--budget-s", type=float, default=None,
                            help="rows not started by then are skipped (default 240, --quick 150)")
        args = parser.parse_args(argv[1:])
        budget = args.budget_s if args.budget_s is not None else (150.0 if args.quick else 240.0)
        if args.out.suffix != ".md":
            print(f"kernels_table --run: --out must name a .md page, got {args.out}", file=sys.stderr)
            return 2
        command = "python benchmarks/kernels_table.py " + " ".join(argv)
        return run_page(args.out, args.quick, budget, command)
    if len(argv) != 1:
        print("usage: python benchmarks/kernels_table.py RESULTS.json\n"
              "       python benchmarks/kernels_table.py --run --out results/KIND.md [--quick] [--budget-s S]",
              file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        print(f"kernels_table: cannot read {path}: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
