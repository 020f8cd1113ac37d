"""Stage `coldstart`: the default session replayed on a fresh box, every cache empty (issue #39,
item 2), and its timeline.

    python benchmarks/gpu_evidence.py --stage coldstart [--quick] [--out DIR]

`python -m workbench --replay default --format json` runs with XDG_CACHE_HOME pointed at a new
temporary folder (workbench's cache folder, and so its build, PTX, Triton, Inductor, torch
extension and CuPy caches, start empty) and WORKBENCH_TRACE at OUT/coldstart-trace.txt. The table:
summary rows (wall, rows by status, the cache folder's subfolders, what was new in ~/.cache after
the run, each softmax.cu module built and the kernels it holds), then the timeline in s since the
first mark: every row's start, built and result sent, every build-ahead task's start and end, the
worker starts and the PTX view's nvcc steps. --quick
(the stage's default budget) cuts the timing settings (rep_ms 30, warm-up 10 ms, 5 samples), not
the shapes: the compiles are the default session's. Stopped with Ctrl-C at LIMIT_S (partial
results). Without a GPU it replays the CPU `smoke-quick` session instead.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from pathlib import Path

TITLE = "Cold start: the default session with every cache empty"
ROOT = Path(__file__).resolve().parents[2]
LIMIT_S = 120  # then Ctrl-C: the CLI writes its partial results (given up to 30 s more)
QUICK_SETTINGS = {"rep_ms": 30.0, "warmup_ms": 10.0, "min_samples": 5}
# the marks (workbench/trace.py) the timeline keeps: each row's start, build and result, each
# build-ahead task, the plan, the worker starts and the PTX view's nvcc steps
TIMELINE = ("build ", "plan: ", "pool: starting", "zygote: torch imported", "nvcc ")
ROW_MARKS = (": start", ": built", ": result sent")


def run(quick: bool, out: Path) -> list[dict]:
    from benchmarks.stages.replay import _replay as replay_once  # the CLI run, Ctrl-C at the limit

    out.mkdir(parents=True, exist_ok=True)
    gpu = _has_gpu()
    session = _session(quick, out) if gpu else "smoke-quick"
    trace = out / "coldstart-trace.txt"
    trace.unlink(missing_ok=True)
    from benchmarks.stages.daemon_default import user_bytecode

    bytecode = user_bytecode()  # a fresh box's caches are empty, its packages' .pyc were written at install
    home_cache = Path.home() / ".cache"
    before = _listing(home_cache)
    with tempfile.TemporaryDirectory(prefix="wb-cold-") as fresh:
        env = {**os.environ, "XDG_CACHE_HOME": fresh, "WORKBENCH_TRACE": str(trace)}
        ran, doc = replay_once("coldstart", session, out, limit_s=LIMIT_S, env=env)
        modules = _softmax_modules(Path(fresh) / "workbench" / "build")
        folders = sorted(p.name for p in (Path(fresh) / "workbench").iterdir()) if (Path(fresh) / "workbench").is_dir() else []
    outside = sorted(set(_listing(home_cache)) - set(before))
    summary = {**ran, "session": "default" if gpu else "smoke-quick (no GPU)", "cache folders": " ".join(folders),
               "new in ~/.cache": " ".join(outside) or "nothing",
               "bytecode written first": f"{bytecode.get('without_bytecode')} of {bytecode.get('modules')} modules "
                                         f"had none ({bytecode.get('written_s')} s, ok {bytecode.get('ok')})"}
    summary.update({f"softmax module {i + 1}": m for i, m in enumerate(modules)})
    return [{"what": k, "value": v} for k, v in summary.items()] + _timeline(trace)


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def _session(quick: bool, out: Path) -> str:
    """The shipped default session, or (quick) a copy with shorter timing settings."""
    from workbench.session.api import load_session, save_session, shipped_path

    if not quick:
        return "default"
    session = load_session(shipped_path("default"), check_ops=False)
    session = dataclasses.replace(session, settings=dataclasses.replace(session.settings, **QUICK_SETTINGS))
    path = out / "sessions" / "default-cold-quick.yaml"
    save_session(session, path)
    return str(path)


def _softmax_modules(build: Path) -> list[str]:
    """Each softmax module built (load_inline's folder) with the kernels its define names."""
    found = []
    for folder in sorted(build.glob("wb_softmax_*")):
        ninja = folder / "build.ninja"
        text = ninja.read_text(errors="replace") if ninja.is_file() else ""
        define = next((w for w in text.split() if w.startswith("-DWB_SOFTMAX_KERNELS=")), None)
        kernels = define.split("=", 1)[1].split("__") if define else None
        found.append(f"{folder.name}: " + (f"{len(kernels)} kernels ({', '.join(kernels)})" if kernels else "every kernel"))
    return found


def _listing(folder: Path) -> list[str]:
    """The entries of `folder` (what a run could leave outside workbench's cache folder)."""
    try:
        return sorted(p.name for p in folder.iterdir())
    except OSError:
        return []


def _timeline(trace: Path) -> list[dict]:
    """The trace's row, build-ahead, plan and nvcc marks in s since the first mark."""
    from workbench import trace as wb_trace

    marks = wb_trace.read(str(trace))
    if not marks:
        return [{"what": "no trace marks", "t_s": None}]
    t0 = marks[0][0]
    return [{"what": phase, "t_s": round(t - t0, 2), "pid": pid} for t, pid, phase in marks
            if phase.startswith(TIMELINE) or (phase.startswith("row ") and phase.endswith(ROW_MARKS))]


if __name__ == "__main__":  # python benchmarks/stages/coldstart.py [--quick] OUT
    args = [a for a in sys.argv[1:] if a != "--quick"]
    target = Path(args[0] if args else "evidence-out")
    sys.path.insert(0, str(ROOT))
    from benchmarks.gpu_evidence import print_table

    print_table(TITLE, run("--quick" in sys.argv, target))
