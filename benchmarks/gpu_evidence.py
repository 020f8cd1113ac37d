"""GPU evidence: build, check and time one stage of workbench on the GPU, ending with a compact table.

    python benchmarks/gpu_evidence.py --stage gelu [--quick] [--out DIR]
    python benchmarks/gpu_evidence.py --stage all --quick

Each stage is a module `benchmarks/stages/<name>.py` with
`run(quick: bool, out: pathlib.Path) -> list[dict]` (table rows) and optionally `TITLE`.
Stages run in the order given; one failing stage prints its error and the others still run.
Full outputs (results JSON, logs) go under --out (default $OUT if set, else ./evidence-out).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback
from pathlib import Path

# Every module of benchmarks/stages/ not starting with "_" is a stage ("all" runs them in this order).
STAGES = tuple(sorted(p.stem for p in (Path(__file__).resolve().parent / "stages").glob("*.py")
                      if not p.stem.startswith("_")))


def print_table(title: str, rows: list[dict]) -> None:
    if not rows:
        print(f"\n== {title}: no rows")
        return
    cols = list(dict.fromkeys(k for row in rows for k in row))
    cells = [[_fmt(row.get(c)) for c in cols] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(cols)]
    print(f"\n== {title}")
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)))


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.0f}"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stage", action="append", required=True, choices=(*STAGES, "all"), metavar="STAGE",
                        help=f"one of {', '.join(STAGES)}, or all (repeatable)")
    parser.add_argument("--quick", action="store_true", help="small sizes and few repetitions")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "evidence-out"))
    parser.add_argument("--budget-s", type=float, default=None,
                        help="override the stage's BUDGET_S (its time budget, seconds)")
    parser.add_argument("--only", default=None,
                        help="comma-separated subset for stages that take one (replay: session names; "
                             "truth: ops or op.impl.dtype rows, e.g. gelu.pytorch.bfloat16; misses: parts of case "
                             "names, e.g. 4096x262144,matmul_gelu)")
    args = parser.parse_args(argv)
    try:
        import torch  # noqa: F401  every stage needs it
    except ImportError:
        print(f"gpu_evidence: this Python ({sys.executable}) has no torch: run it with the Python that has "
              "torch and workbench installed (.venv/bin/python after `make setup`)", file=sys.stderr)
        return 2
    stages = STAGES if "all" in args.stage else tuple(args.stage)
    args.out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    tables, failed = [], 0
    for name in stages:
        t0 = time.perf_counter()
        try:
            module = importlib.import_module(f"benchmarks.stages.{name}")
            if args.budget_s is not None and hasattr(module, "BUDGET_S"):
                module.BUDGET_S = args.budget_s
            if args.only and hasattr(module, "ONLY"):
                module.ONLY = tuple(args.only.split(","))
            rows = module.run(args.quick, args.out)
            tables.append((f"{getattr(module, 'TITLE', name)} ({time.perf_counter() - t0:.0f} s)", rows))
        except (Exception, KeyboardInterrupt) as exc:  # an interrupt ends this stage, not the tables
            failed += 1
            traceback.print_exc()
            tables.append((f"{name}: FAILED ({type(exc).__name__}; see traceback above)", []))
            if isinstance(exc, KeyboardInterrupt):
                break
    for title, rows in tables:
        print_table(title, rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
