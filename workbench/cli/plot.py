"""`workbench --plot RESULTS.json -o FIG.svg|png|pdf`: a results document's figures
(workbench/plot.py). Without matplotlib (the optional `plot` extra) one line says what to
install, exit 2."""

from __future__ import annotations

import argparse

from rich.console import Console

from workbench.cli.common import EXIT_USAGE


def run_plot(args: argparse.Namespace, err: Console) -> int:
    from pathlib import Path

    from workbench.plot import MissingPlotting, render

    if Path(args.plot).suffix.lower() in (".yaml", ".yml") and not Path(args.plot).is_dir():
        err.print(f"error: --plot {args.plot}: a session file; --plot draws a results document "
                  f"(run `workbench --replay {args.plot} -o RESULTS.json`, then --plot RESULTS.json -o FIG)",
                  markup=False)
        return EXIT_USAGE
    from workbench.results.journal import document_from_text

    try:
        with open(args.plot, encoding="utf-8") as handle:
            doc = document_from_text(handle.read(), args.plot)
    except (OSError, ValueError) as exc:
        err.print(f"error: --plot {args.plot}: not a readable results document ({exc})", markup=False)
        return EXIT_USAGE
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        err.print(f"error: --plot {args.plot}: not a results document (no `results` list; a session file? "
                  "plot what --replay -o RESULTS.json wrote)", markup=False)
        return EXIT_USAGE
    from workbench.results.document import document_type_error

    problem = document_type_error(doc)
    if problem is not None:
        err.print(f"error: --plot {args.plot}: {problem}", markup=False)
        return EXIT_USAGE
    try:
        path = render(doc, args.output)
    except MissingPlotting as exc:
        err.print(f"error: {exc}", markup=False)
        return EXIT_USAGE
    except ValueError as exc:
        err.print(f"error: --plot {args.plot}: {exc}", markup=False)
        return EXIT_USAGE
    err.print(f"figure written to {path}", markup=False)
    return 0
