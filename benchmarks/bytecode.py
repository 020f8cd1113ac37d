"""Write the bytecode (.pyc) of the packages a start-up imports, as `pip install` does, before a
stage times start-ups.

Why: a wheel installed with `--no-compile` (the lent GPU boxes get the TUI's wheels so) or a
package whose folder was copied without its `__pycache__`, under PYTHONDONTWRITEBYTECODE=1 (set on
those boxes), compiles every module it imports from source on every start. A user's
`pip install` writes the bytecode once. Measured start-ups must be a user's, so the stages that
time them (tuitmux, daemon_default) call `write_bytecode` first and report what it found missing.

    python benchmarks/bytecode.py [PACKAGE ...]     # prints the JSON report

`compileall` writes next to each module (`__pycache__`), whatever PYTHONDONTWRITEBYTECODE says; a
folder it cannot write to is reported (`ok: false`), not fixed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the front end's packages (the TUI's first frame)
FRONT_END_PACKAGES = ("workbench", "workbench.screens", "textual", "rich", "textual_plotext", "plotext",
                      "markdown_it", "mdit_py_plugins", "linkify_it", "uc_micro", "platformdirs", "yaml", "pygments")
# what a worker imports before its first row: torch and what torch.compile pulls in (dynamo,
# Inductor: sympy, mpmath, networkx, jinja2), Triton, the kernels
ENGINE_PACKAGES = ("workbench", "kernels", "torch", "triton", "sympy", "mpmath", "networkx", "jinja2", "markupsafe",
                   "filelock", "fsspec", "numpy", "yaml", "rich", "platformdirs", "pynvml", "typing_extensions")

_CODE = """
import compileall, importlib.util, json, os, sys, time
names = json.loads(sys.argv[1])
folders = []
for name in names:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        folders += list(spec.submodule_search_locations)
def count(folders):
    py = missing = 0
    for folder in folders:
        for base, dirs, files in os.walk(folder):
            for f in files:
                if f.endswith(".py"):
                    py += 1
                    missing += not os.path.exists(importlib.util.cache_from_source(os.path.join(base, f)))
    return py, missing
py, missing = count(folders)
t0 = time.monotonic()
ok = all(compileall.compile_dir(f, quiet=2, workers=0) for f in folders) if missing else True
_, left = count(folders)
print(json.dumps({"packages": names, "folders": len(folders), "modules": py, "without_bytecode": missing,
                  "written_s": round(time.monotonic() - t0, 2), "still_without": left, "ok": bool(ok) and not left}))
"""


def write_bytecode(python: str = sys.executable, packages: tuple[str, ...] = ENGINE_PACKAGES) -> dict:
    """Compile `packages` (those installed for `python`) where their .pyc is missing, in parallel;
    returns {packages, folders, modules, without_bytecode (before), written_s, still_without, ok}
    ({"ok": False, "error": ...} when the child fails)."""
    proc = subprocess.run([python, "-c", _CODE, json.dumps(list(packages))], cwd=ROOT, capture_output=True,
                          text=True)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"ok": False, "error": (proc.stderr or proc.stdout)[-400:]}


def main(argv: list[str] | None = None) -> int:
    names = tuple(argv if argv is not None else sys.argv[1:]) or ENGINE_PACKAGES
    report = write_bytecode(sys.executable, names)
    print(json.dumps(report))
    return 0 if report.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
