"""The truth stage's rows with the engine/do_bench ratio split in two, from truth-details.json files.

    python benchmarks/truth_split.py results/history/h200/2026-12-03d/truth-call*/truth-details.json

Per row and file: the committed ratio (engine / do_bench: the medians of the calls made in the
GPU's fast state where the file has them, `statistic: same_state`), the ratio of the medians over
all rounds, the same-flush
ratio (the engine's loop with do_bench's zero flush / do_bench: the loop itself), the flush effect
(the engine's read flush / its zero flush: the write-back of dirty lines `zero_()` leaves), and the
paired ratios (medians of the per-round ratios). A markdown table to stdout; `*` marks a figure
outside 2%. Older files without zero-flush rounds show `-` for the split.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.stages._truth_core import Case, all_rounds, flush_split, paired_ratio, summary_row  # noqa: E402

LIMIT = 0.02


def _found(detail: dict) -> dict[str, list]:
    return {name: [(r["ms"], r.get("sm_clock_mhz")) for r in rounds] for name, rounds in detail["rounds"].items()}


def split_rows(details: dict) -> list[dict]:
    """One dict per timed row of a truth-details.json document: op, impl, dtype, n_rounds, ratio,
    paired_ratio and flush_split()'s figures (absent without zero-flush rounds)."""
    out = []
    for detail in details.get("rows") or []:
        if not detail.get("rounds"):
            continue
        found = _found(detail)
        ratio = summary_row(Case(detail["op"], detail["impl"], detail["dtype"], {}), found, detail.get("state_split"))["ratio"]
        out.append({"op": detail["op"], "impl": detail["impl"], "dtype": detail["dtype"],
                    "n_rounds": len(found["engine"]), "ratio": ratio, "all_rounds_ratio": all_rounds(found)["ratio"],
                    "paired_ratio": paired_ratio(found),
                    **flush_split(found)})
    return out


def _cell(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" + ("*" if abs(value - 1.0) > LIMIT else "")


def markdown(files: list[Path]) -> str:
    lines = ["| file | row | rounds | ratio | all rounds | paired | same flush | paired same flush | read/zero flush |",
             "|---|---|---|---|---|---|---|---|---|"]
    for path in files:
        for r in split_rows(json.loads(path.read_text())):
            lines.append(f"| {path.parent.name} | {r['op']} {r['impl']} {r['dtype']} | {r['n_rounds']} | "
                         f"{_cell(r['ratio'])} | {_cell(r['all_rounds_ratio'])} | {_cell(r['paired_ratio'])} | {_cell(r.get('same_flush_ratio'))} | "
                         f"{_cell(r.get('paired_same_flush_ratio'))} | {_cell(r.get('flush_effect'))} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Print the table for the truth-details.json files in argv; 2 with one clear line on stderr
    for no file, a path that is not a file, or a file that is not a truth stage's details."""
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    usage = "usage: python benchmarks/truth_split.py TRUTH-DETAILS.json ... (--help for more)"
    if not argv:
        print(f"truth_split: no file given; {usage}", file=sys.stderr)
        return 2
    for arg in argv:
        if arg.startswith("-"):
            print(f"truth_split: unknown option {arg}; {usage}", file=sys.stderr)
            return 2
        path = Path(arg)
        what = "a directory" if path.is_dir() else "no such file" if not path.exists() else None
        if what is not None:
            what += " (give truth-details.json files written by the truth stage)"
        if what is None:
            try:
                details = json.loads(path.read_text())
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                what = f"not JSON ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
            else:
                rows = details.get("rows") if isinstance(details, dict) else None
                if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
                    what = "not a truth-details.json (no list of rows)"
                elif not any(isinstance(r.get("rounds"), dict) and "engine" in r["rounds"] and "do_bench" in r["rounds"]
                             for r in rows):
                    what = ("no row with engine and do_bench rounds (truth-dobench.json has the medians only: its rounds "
                            "are in truth-details.json beside it)")
        if what is not None:
            print(f"truth_split: {arg}: {what}", file=sys.stderr)
            return 2
    print(markdown([Path(a) for a in argv]))
    print(f"\n`*`: outside {LIMIT:.0%} of 1.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
