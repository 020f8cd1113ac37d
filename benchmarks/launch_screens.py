"""A/B launcher for the TUI: the checkout's workbench with its `workbench.screens` package taken
from another folder (another version of screens/, e.g. `git archive REV screens | tar x -C DIR`).

    python benchmarks/launch_screens.py SCREENS_FOLDER [workbench arguments]

benchmarks/tui_tmux_latency.py runs it through `--entry "'benchmarks/launch_screens.py' 'DIR/screens'"`
(absolute paths), in turns with the checkout's own screens/, on one machine. Only screens/ is
swapped: the engine, kernels and sessions are the checkout's.
"""

import importlib.util
import runpy
import sys

if len(sys.argv) < 2:
    sys.exit("usage: launch_screens.py SCREENS_FOLDER [workbench arguments]")
folder = sys.argv.pop(1)
spec = importlib.util.spec_from_file_location("workbench.screens", folder + "/__init__.py",
                                              submodule_search_locations=[folder])
if spec is None or spec.loader is None:
    sys.exit(f"launch_screens.py: no screens package in {folder}")
module = importlib.util.module_from_spec(spec)
sys.modules["workbench.screens"] = module
import workbench  # noqa: E402

workbench.screens = module  # type: ignore[attr-defined]
spec.loader.exec_module(module)
runpy.run_module("workbench", run_name="__main__", alter_sys=True)
