"""Stage `replay`: the lecture's sessions replayed headless through the CLI, as a user would.

    python benchmarks/gpu_evidence.py --stage replay [--quick] [--out DIR]

Each session runs as `python -m workbench --replay SESSION --format json -o OUT/NAME.json`
(stderr to OUT/NAME.log). The table: one summary row per session (rows by status, exit code,
wall time), then the GeLU and softmax rows (impl, median ms, GB/s, % of the measured copy
ceiling, kernels per call from the profiler). --quick replays smaller copies of the sessions
(written to OUT/sessions/, shapes and repetitions reduced). Without a GPU it replays the CPU
`smoke-quick` session instead, so the stage itself can be tried anywhere.

Time: the stage has a budget (BUDGET_S); a session over its own limit (or over what is left of
the budget) is interrupted with Ctrl-C (SIGINT), which makes the CLI write its partial results
(exit 130, unfinished rows `skipped`); sessions are not started once the budget is spent.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TITLE = "Replay of the lecture sessions through the CLI"
ROOT = Path(__file__).resolve().parents[2]
BUDGET_S = 400          # the whole stage: sessions are interrupted when it is spent (< 8 min in all)
SESSION_LIMIT_S = 240   # one session at most 4 minutes, then Ctrl-C
MIN_SESSION_S = 45      # do not start a session with less time than this left
DETAIL_OPS = ("gelu", "softmax")
ONLY: tuple[str, ...] | None = None  # a subset of FULL (gpu_evidence.py --only)

# --quick: shape fields replaced in every run; sweep values per run (by position).
FULL = ("lecture06-gelu", "lecture06-softmax", "lecture06-profile", "lecture06-fused", "lecture06-matmul",
        "lecture06-mlp")
QUICK_SHAPES = {
    "lecture06-gelu": {"shape": {"M": 4096, "N": 4096}},
    "lecture06-softmax": {"shape": {"M": 4096, "N": 4096}},
    "lecture06-fused": {"sweep": [[1024, 2048], [1024, 2048]]},
    "lecture06-matmul": {"sweep": [[127, 128, 129, 4095, 4096, 4097], [1024, 4096]]},
    "lecture06-profile": {},
    "lecture06-mlp": {"sweep": [[2, 6, 10], [4, 12, 20], [256, 768, 1280], [256, 768, 1280]]},
}
QUICK_SETTINGS = {"rep_ms": 30.0, "warmup_ms": 10.0, "min_samples": 5}
FULL_SETTINGS = {"lecture06-matmul": {"rep_ms": 50.0, "min_samples": 5}}


def run(quick: bool, out: Path) -> list[dict]:
    has_gpu = _has_gpu()
    names = (tuple(n for n in FULL if n in ONLY) + _files(ONLY) if ONLY else FULL) if has_gpu else ("smoke-quick",)
    rows: list[dict] = []
    details: list[dict] = []
    start = time.monotonic()
    for name in names:
        left = BUDGET_S - (time.monotonic() - start)
        if left < MIN_SESSION_S:
            rows.append({"session": name, "status": f"not started: stage budget {BUDGET_S} s spent"})
            continue
        target = _session_file(name, quick and has_gpu, out)
        summary, doc = _replay(name, target, out, limit_s=min(SESSION_LIMIT_S, left))
        rows.append(summary)
        if doc is not None:
            details += _detail_rows(name, doc)
    return rows + details


def _files(only: tuple[str, ...]) -> tuple[str, ...]:
    """The --only entries that are session files (a path ending in .yaml, relative to the
    repository root), replayed as they are; anything else must be a name in FULL."""
    unknown = [n for n in only if n not in FULL and not n.endswith(".yaml")]
    if unknown:
        raise ValueError(f"replay --only: {', '.join(unknown)}: not one of {', '.join(FULL)} nor a .yaml file")
    missing = [n for n in only if n.endswith(".yaml") and not (ROOT / n).is_file()]
    if missing:
        raise ValueError(f"replay --only: no session file {', '.join(missing)} under {ROOT}")
    return tuple(n for n in only if n.endswith(".yaml"))


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def _session_file(name: str, quick: bool, out: Path) -> str:
    """The shipped session by name, or (quick, or with full-mode settings) a derived copy; a
    .yaml path as it is."""
    from workbench.session.api import load_session, save_session, shipped_path

    if name.endswith(".yaml"):
        return str(ROOT / name)
    overrides = dict(QUICK_SETTINGS) if quick else dict(FULL_SETTINGS.get(name, {}))
    if not overrides:
        return name
    session = load_session(shipped_path(name), check_ops=False)
    runs = tuple(_shrink(run, index, QUICK_SHAPES.get(name, {})) if quick else run
                 for index, run in enumerate(session.runs))
    session = dataclasses.replace(session, runs=runs,
                                  settings=dataclasses.replace(session.settings, **overrides))
    path = out / "sessions" / f"{name}{'-quick' if quick else ''}.yaml"
    save_session(session, path)
    return str(path)


def _shrink(run, index: int, change: dict[str, Any]):
    if "shape" in change and run.shape:
        run = dataclasses.replace(run, shape={**run.shape, **change["shape"]})
    if "sweep" in change and run.sweep is not None:
        values = tuple(change["sweep"][index])
        run = dataclasses.replace(run, sweep=dataclasses.replace(run.sweep, values=values))
    return run


def _replay(name: str, session: str, out: Path, limit_s: float) -> tuple[dict, dict | None]:
    name = Path(name).stem
    result, log = out / f"{name}.json", out / f"{name}.log"
    cmd = [sys.executable, "-m", "workbench", "--replay", session, "--format", "json", "-o", str(result)]
    t0 = time.monotonic()
    with open(log, "w") as log_file:
        proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT)
        try:
            code = proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)  # the CLI stops the engine and writes partial results
            try:
                code = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
    wall_s = time.monotonic() - t0
    doc = json.loads(result.read_text()) if result.exists() else None
    statuses = [r["status"] for r in (doc or {}).get("results", [])]
    summary = {"session": name, "exit": code, "wall_s": round(wall_s, 1), "rows": len(statuses),
               **{s: statuses.count(s) for s in ("ok", "failed", "unavailable", "skipped")},
               "device": ((doc or {}).get("environment") or {}).get("device")}
    if doc is None:
        summary["status"] = f"no results; see {log}"
    return summary, doc


def _detail_rows(name: str, doc: dict) -> list[dict]:
    ceilings = (doc.get("environment") or {}).get("ceilings") or {}
    copy_gbps = ceilings.get("copy_gbps")
    rows = []
    for rec in doc.get("results", []):
        if rec["op"] not in DETAIL_OPS or name == "lecture06-profile":
            continue
        timing, traffic, profile = rec.get("timing") or {}, rec.get("traffic") or {}, rec.get("profile") or {}
        gbps = traffic.get("gbps")
        rows.append({
            "session": name, "op": rec["op"], "impl": rec["label"],
            "shape": "x".join(str(v) for v in (rec.get("shape") or {}).values()), "status": rec["status"],
            "median_ms": timing.get("median_ms"), "gbps": gbps,
            "pct_copy": 100.0 * gbps / copy_gbps if gbps and copy_gbps else None,
            "kernels_per_call": profile.get("kernel_count"),
            "check": None if rec.get("check") is None else ("pass" if rec["check"]["passed"] else "FAIL"),
            "error": (rec.get("error") or "")[:80] or None,
        })
    return rows


if __name__ == "__main__":  # python benchmarks/stages/replay.py [--quick] OUT
    args = [a for a in sys.argv[1:] if a != "--quick"]
    target = Path(args[0] if args else "evidence-out")
    target.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    from benchmarks.gpu_evidence import print_table

    print_table(TITLE, run("--quick" in sys.argv, target))
