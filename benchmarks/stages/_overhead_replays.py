"""The replay parts of stage `overhead`: whole `python -m workbench --replay` processes, per
process and against a warm daemon (`--daemon`), interleaved, in one call.

Order: five-way cold (per process, empty caches), five-way per process (warm caches), five-way
with --daemon twice (the first starts the daemon: zygote, CUDA, Inductor's first compile; the
second is `five_way_gelu_warm_s`), one row per process, one row with --daemon twice (the second
is `one_row_warm_s`), then ROUNDS more pairs of five-way per process / with --daemon. The rows'
medians of the warm per-process runs against the warm daemon runs give
`daemon_vs_per_process_worst` (worst |ratio - 1| over implementations; the issue: within 1%).
The daemon lives in a private folder of its own and is stopped at the end, whatever happened.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROUNDS = {True: 1, False: 2}  # extra interleaved pairs: quick, full


def replays(figures, folder: Path, env: dict, side: int, gpu: bool, quick: bool, deadline: float,
            five: tuple[str, ...], session_file: Callable, root: Path) -> None:
    """Every figure goes to figures.put as soon as it is measured; a step that fails or finds the
    budget spent leaves its error (figures.fail) and the rest still run."""
    daemon_dir = tempfile.mkdtemp(prefix="wbd-")  # short: a Unix socket's path holds ~100 characters
    daemon_env = {**env, "WORKBENCH_DAEMON_DIR": daemon_dir}

    def replay(name: str, impls, daemon: bool):
        return lambda: replay_once(folder, daemon_env, name, impls, side, gpu, daemon, session_file, root)

    steps = [("five_way_gelu_cold_s", "per_process", replay("five-way", five, False)),
             ("five_way_gelu_warm_per_process_s", "per_process", replay("five-way", five, False)),
             ("five_way_gelu_daemon_first_s", None, replay("five-way", five, True)),
             ("five_way_gelu_warm_s", "daemon", replay("five-way", five, True)),
             ("one_row_warm_per_process_s", None, replay("one-row", ("pytorch",), False)),
             ("one_row_daemon_first_s", None, replay("one-row", ("pytorch",), True)),
             ("one_row_warm_s", None, replay("one-row", ("pytorch",), True))]
    for index in range(ROUNDS[quick]):
        steps += [(f"five_way_gelu_interleaved_{index}_per_process_s", "per_process", replay("five-way", five, False)),
                  (f"five_way_gelu_interleaved_{index}_daemon_s", "daemon", replay("five-way", five, True))]
    medians: dict[str, dict[str, list]] = {}
    try:
        for key, mode, step in steps:
            if time.monotonic() > deadline:
                figures.fail(key, TimeoutError("the stage budget was spent before this part"))
                continue
            try:
                wall_s, detail = step()
            except Exception as exc:  # one replay failing never loses the others
                figures.fail(key, exc)
                continue
            figures.put(key, wall_s, **detail)
            if mode and key != "five_way_gelu_cold_s":
                for label, row in detail["rows"].items():
                    medians.setdefault(label, {"per_process": [], "daemon": []})[mode].append(row["median_ms"])
        worst, ratios = median_ratios(medians, "daemon", "per_process")
        figures.put("daemon_vs_per_process_worst", worst, ratios=ratios, medians_ms=medians,
                    within_1pct=worst is not None and worst <= 0.01)
    finally:
        figures.detail["daemon_stopped"] = stop_daemons(daemon_env, root)
        figures.save()
        shutil.rmtree(daemon_dir, ignore_errors=True)


def replay_once(folder: Path, env: dict, name: str, impls, side: int, gpu: bool, daemon: bool,
                session_file: Callable, root: Path):
    """Wall seconds of one whole replay process, with its rows' statuses, build and median times
    (and provenance.daemon for a --daemon run)."""
    path = session_file(folder, name, impls, side, gpu)
    target = folder / f"{name}-{time.monotonic_ns()}.json"
    argv = [sys.executable, "-m", "workbench", "--replay", str(path), "--format", "json", "-o", str(target)]
    t0 = time.perf_counter()
    proc = subprocess.run(argv + (["--daemon"] if daemon else ["--no-daemon"]), cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)  # --no-daemon: the daemon is the default
    wall_s = time.perf_counter() - t0
    doc = json.loads(target.read_text()) if target.exists() else {"results": [], "provenance": {}}
    rows = {r["label"]: {"status": r["status"], "build_ms": r["build_ms"],
                         "median_ms": (r["timing"] or {}).get("median_ms"), "error": r["error"]}
            for r in doc["results"]}
    return wall_s, {"exit": proc.returncode, "rows": rows, "daemon": (doc.get("provenance") or {}).get("daemon"),
                    "stderr_tail": proc.stderr[-400:]}


def median_ratios(medians: dict[str, dict[str, list]], a: str, b: str) -> tuple[float | None, dict]:
    """Per implementation, median of its `a` medians over median of its `b` medians, and the
    worst |ratio - 1| (None when no implementation has both)."""
    ratios = {}
    for impl, got in medians.items():
        top, bottom = [m for m in got[a] if m], [m for m in got[b] if m]
        ratios[impl] = statistics.median(top) / statistics.median(bottom) if top and bottom else None
    return max((abs(r - 1) for r in ratios.values() if r), default=None), ratios


def stop_daemons(env: dict, root: Path) -> object:
    """`workbench --daemon-stop --format json` in the daemon folder: what it stopped, or why not."""
    try:
        proc = subprocess.run([sys.executable, "-m", "workbench", "--daemon-stop", "--format", "json"], cwd=root,
                              env=env, capture_output=True, text=True, timeout=60)
        return json.loads(proc.stdout) if proc.returncode == 0 else f"exit {proc.returncode}: {proc.stderr[-300:]}"
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"
