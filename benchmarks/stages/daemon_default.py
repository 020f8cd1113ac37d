"""Stage `daemon_default`: the warm daemon as `--replay`'s default (issue #39 item 1).

    python benchmarks/gpu_evidence.py --stage daemon_default [--quick] [--out DIR]

The five-way GeLU (manual, pytorch, compiled, cuda, triton; float32, check + bench; 16384^2,
--quick 4096^2; on a CPU box a dry run: manual and pytorch at 256^2) replayed as whole
`python -m workbench --replay` processes, in this order:

    no_daemon_cold      --no-daemon, empty caches (what a fresh box pays once)
    no_daemon           --no-daemon, warm caches (the per-process figure of the issue's table)
    default_first       no flag: the default starts this user's daemon (its one line is checked)
    default_second      no flag: the daemon is warm (target <= 3 s on the GPU)
    then ROUNDS pairs   no_daemon / default, interleaved

Reports every replay's wall time, exit and whether a daemon served it, and per implementation
the median of its medians under the default daemon over the median under --no-daemon (all but
the cold run), with the worst |ratio - 1| (the issue: within 1%). The daemon lives in a private
folder of its own and is stopped at the end. Writes daemon-default.json under DIR/daemon_default.

Then, last, two more first runs, with WORKBENCH_ZYGOTE_PRELOAD=0 (the zygote imports torch only)
and =all (on a GPU host also Triton, dynamo and Inductor): `default_first_preload_0`, `_all`;
each starts a daemon of its own (the variable is in the daemon's fingerprint). For every first
run the milestones (MILESTONES: zygote start, torch imported, preloaded, worker warm, first row,
compiled row built, last result, results written) in s since its launch.

Before any replay, the bytecode of what a worker imports is written where it is missing
(benchmarks/bytecode.py; WORKBENCH_STAGE_BYTECODE=0 skips it): a user's pip install wrote it, the
lent boxes' packages under PYTHONDONTWRITEBYTECODE=1 would compile from source on every start.
The first table row says how many modules had none.

Then the timelines of `no_daemon` and `default_first` (TRACED): every replay runs with
WORKBENCH_TRACE at DIR/daemon_default/trace.txt (one file: the daemon's fingerprint includes the
variable, so every replay shares it), and each timeline is the marks (workbench/trace.py) written
while that replay ran, in s since the stage launched it, with the process each came from
(client, daemon, zygote, worker: named by its first mark). The workers' per-row reset marks
("after row: ...") are left out.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.stages._overhead_replays import median_ratios, stop_daemons
from benchmarks.stages.overhead import _session_file

TITLE = "Warm daemon as the default: --no-daemon against the default, five-way GeLU"
ROOT = Path(__file__).resolve().parents[2]
BUDGET_S = 150
FIVE_GPU = ("manual", "pytorch", "compiled", "cuda", "triton")
FIVE_CPU = ("manual", "pytorch")  # a dry run of the logic on a CPU box
ROUNDS = {True: 1, False: 2}
TRACED = ("no_daemon", "default_first")  # the replays whose timelines are shown
WARM_TRACED = ("default_second", "default_3", "default_4")  # timelines kept in the JSON only (warm_timelines)
PRELOAD = "WORKBENCH_ZYGOTE_PRELOAD"  # engine/worker/preload.py
PRELOADS = ("0", "all")  # first runs again (each its own daemon: the variable is in its fingerprint)
# (what, a mark's prefix, its suffix): when a first run reached each step, in s since its launch
MILESTONES = (("zygote start", "zygote: start", ""), ("zygote torch imported", "zygote: torch imported", ""),
              ("zygote preloaded", "zygote: preloaded", ""), ("worker warm", "worker ", ": heap settled"),
              ("first row start", "row ", ": start"), ("compiled row built", "row gelu compiled: built", ""),
              ("last row result", "row ", ": result sent"), ("results written", "client: results written", ""))
ROLES = (("client: ", "client"), ("daemon: ", "daemon"), ("zygote: ", "zygote"), ("worker ", "worker"),
         ("pool: ", "client"), ("plan: ", "client"))  # a process's role, by its first mark


def run(quick: bool, out: Path) -> list[dict]:
    from workbench.machine import probe

    gpu = probe().has_cuda
    folder = out / "daemon_default"
    folder.mkdir(parents=True, exist_ok=True)
    side = (4096 if quick else 16384) if gpu else 256
    session = _session_file(folder, "five-way", FIVE_GPU if gpu else FIVE_CPU, side, gpu)  # overhead's session
    daemon_dir = tempfile.mkdtemp(prefix="wbd-")  # short: a Unix socket's path holds ~100 characters
    trace = folder / "trace.txt"
    trace.unlink(missing_ok=True)
    env = {**os.environ, "XDG_CACHE_HOME": str(folder / "cache"), "XDG_DATA_HOME": str(folder / "data"),
           "WORKBENCH_DAEMON_DIR": daemon_dir, "WORKBENCH_TRACE": str(trace)}
    for name in ("WORKBENCH_DAEMON", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        env.pop(name, None)
    steps = [("no_daemon_cold", False, {}), ("no_daemon", False, {}), ("default_first", True, {}),
             ("default_second", True, {})]
    for index in range(ROUNDS[quick]):
        steps += [(f"no_daemon_{index + 1}", False, {}), (f"default_{index + 3}", True, {})]
    steps += [(f"default_first_preload_{value}", True, {PRELOAD: value}) for value in PRELOADS]
    bytecode = user_bytecode()  # before the clock: a user's pip install wrote it once
    deadline = time.monotonic() + BUDGET_S
    report: dict = {"gpu": gpu, "quick": quick, "side": side, "replays": [], "errors": {}, "bytecode": bytecode}
    medians: dict[str, dict[str, list]] = {}
    try:
        for name, default, extra in steps:
            if time.monotonic() > deadline:
                report["errors"][name] = f"the stage budget of {BUDGET_S} s was spent before it"
                continue
            try:
                wall_s, detail = _replay(session, folder, {**env, **extra}, default)
            except Exception as exc:  # one replay failing never loses the others
                report["errors"][name] = f"{type(exc).__name__}: {exc}"[:400]
                continue
            report["replays"].append({"step": name, "wall_s": round(wall_s, 3), **detail})
            if detail.get("launched") is not None and (name in TRACED or name.startswith("default_first")):
                marks = timeline(str(trace), detail["launched"], detail["launched"] + wall_s)
                report.setdefault("milestones", {})[name] = milestones(marks)
                if name in TRACED:
                    report.setdefault("timelines", {})[name] = marks
            elif detail.get("launched") is not None and name in WARM_TRACED:  # where a warm run's s go
                report.setdefault("warm_timelines", {})[name] = timeline(str(trace), detail["launched"],
                                                                         detail["launched"] + wall_s)
            if name != "no_daemon_cold":
                for label, median in detail["medians_ms"].items():
                    medians.setdefault(label, {"daemon": [], "no_daemon": []})[
                        "daemon" if default else "no_daemon"].append(median)
        worst, ratios = median_ratios(medians, "daemon", "no_daemon")
        report.update(medians_ms=medians, ratios=ratios, worst=worst, within_1pct=worst is not None and worst <= 0.01)
    finally:
        report["daemon_stopped"] = stop_daemons(env, ROOT)
        shutil.rmtree(daemon_dir, ignore_errors=True)
        (folder / "daemon-default.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    rows = [{"replay": f"bytecode written first: {bytecode.get('without_bytecode')} of {bytecode.get('modules')} "
                       f"modules had none", "wall_s": bytecode.get("written_s"), "exit": bytecode.get("ok")}]
    rows += [{"replay": r["step"], "wall_s": r["wall_s"], "exit": r["exit"], "daemon_pid": r["daemon_pid"],
              "started_daemon": r["started_line"], "rows_ok": r["rows_ok"]} for r in report["replays"]]
    rows += [{"replay": f"median {label}: default/no-daemon", "wall_s": None if ratio is None else round(ratio, 4)}
             for label, ratio in sorted(ratios.items())]
    rows.append({"replay": "worst |ratio - 1| (within 1%?)", "wall_s": worst, "exit": report["within_1pct"]})
    rows += [{"replay": f"{name}: {error}"} for name, error in report["errors"].items()]
    for name, found in (report.get("milestones") or {}).items():
        rows += [{"replay": f"{name} milestone", "t_s": t, "phase": what} for what, t in found.items()]
    for name, marks in (report.get("timelines") or {}).items():
        rows += [{"replay": f"{name} timeline", "t_s": t, "process": role, "phase": phase} for t, role, phase in marks]
    return rows


def user_bytecode() -> dict:
    """benchmarks/bytecode.py on what a worker imports (torch, Triton, Inductor's sympy, ...),
    unless WORKBENCH_STAGE_BYTECODE=0: the lent GPU boxes run under PYTHONDONTWRITEBYTECODE=1,
    where a package without its .pyc is compiled from source on every start; a user's pip
    install wrote them."""
    if os.environ.get("WORKBENCH_STAGE_BYTECODE") == "0":
        return {"ok": None, "skipped": "WORKBENCH_STAGE_BYTECODE=0"}
    from benchmarks.bytecode import ENGINE_PACKAGES, write_bytecode

    return write_bytecode(sys.executable, ENGINE_PACKAGES)


def milestones(marks: list[tuple[float, str, str]]) -> dict[str, float | None]:
    """The s of each MILESTONES entry in a timeline (its first mark, the last for "last row
    result"); None where it has none."""
    found: dict[str, float | None] = {}
    for what, prefix, suffix in MILESTONES:
        times = [t for t, _role, phase in marks if phase.startswith(prefix) and phase.endswith(suffix)]
        found[what] = (times[-1] if what == "last row result" else times[0]) if times else None
    return found


def timeline(path: str, start: float, end: float) -> list[tuple[float, str, str]]:
    """The marks of trace `path` written between `start` and `end` (time.monotonic(): one clock
    for every process of the host), as (s since start, process role, phase); roles from each
    pid's first mark in the whole file (ROLES; "?" when none matches)."""
    from workbench import trace as wb_trace

    marks = wb_trace.read(path)
    roles: dict[int, str] = {}
    for _t, pid, phase in marks:
        if pid not in roles:
            roles[pid] = next((role for prefix, role in ROLES if phase.startswith(prefix)), "?")
    return [(round(t - start, 3), f"{roles[pid]} {pid}", phase) for t, pid, phase in marks
            if start <= t <= end and not phase.startswith("after row:")]


def _replay(session: Path, folder: Path, env: dict, default: bool) -> tuple[float, dict]:
    """Wall seconds of one `python -m workbench --replay` process (no flag: the default; else
    --no-daemon), with its rows' medians, whether a daemon served it and whether it started one."""
    target = folder / f"out-{time.monotonic_ns()}.json"
    argv = [sys.executable, "-m", "workbench", "--replay", str(session), "-o", str(target), "--format", "json"]
    launched = time.monotonic()  # the trace's clock (workbench/trace.py)
    t0 = time.perf_counter()
    proc = subprocess.run(argv + ([] if default else ["--no-daemon"]), cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    wall_s = time.perf_counter() - t0
    doc = json.loads(target.read_text()) if target.exists() else {"results": [], "provenance": {}}
    results = doc.get("results") or []
    return wall_s, {"exit": proc.returncode,
                    "daemon_pid": ((doc.get("provenance") or {}).get("daemon") or {}).get("pid"),
                    "started_line": "started a workbench daemon" in proc.stderr,
                    "rows_ok": f"{sum(r.get('status') == 'ok' for r in results)}/{len(results)}",
                    "medians_ms": {r["label"]: (r.get("timing") or {}).get("median_ms") for r in results
                                   if (r.get("timing") or {}).get("median_ms")},
                    "stderr_tail": proc.stderr[-400:], "launched": launched}
