"""Stage `handoffs`: what workbench hands to Perfetto, Nsight and a slide, on the GPU (issue 41).

    python benchmarks/gpu_evidence.py --stage handoffs [--quick] [--out DIR]

First, each of platformdirs, cxxfilt and liger_kernel this Python cannot import is installed from
its wheel (WHEEL_DIR, else .whl/ here or two folders up; `pip install --no-deps --target` a
temporary folder, put on the children's PYTHONPATH). Every child (a replay, ncu, pip, a plot)
runs in its own process group with a timeout: on timeout the group is killed and the part says
"timed out" (it never hangs the stage). The replays run in process (WORKBENCH_DAEMON=0): a warm
daemon started under `ncu --target-processes all` outlives its replay, and the next replay's rows
run in it, not under the next ncu: the likely cause of the earlier hang of the second ncu run.
One flushed progress line per step.

1. replay: the lecture's GeLU session (sessions/lecture06-gelu.yaml; --quick: manual, pytorch,
   triton only, fewer repetitions) with `--trace-dir OUT/handoffs-traces`, plus a `counters` run
   of its triton row, through the real CLI. Checked: every profiled row's `profile.trace_path` is a
   `<session>-run<i>-<label>.pt.trace.json` whose JSON loads, has `traceEvents`, and holds the
   row's kernels; the counters row's `measured.report_path` is a kept `.ncu-rep` that `ncu
   --import FILE --page details` reads back.
2. sweep: a softmax sweep (pytorch, triton; N = 1024, 4096, 8192, 16384) -> OUT/handoffs-sweep.json.
3. NVTX on/off: gelu pytorch and triton at 8192 x 8192 float32 in ONE replay whose runs alternate
   the setting `nvtx: true` / `nvtx: false` (the order flipped every other round), 3 rounds
   (--quick) or 6: the engine's medians with and without the ranges, the median over rounds of
   each, and their ratio (on / off; the target is within 1%).
4. NVTX selection: `ncu --nvtx --nvtx-include "run0-triton/"` (the row: its build, check and
   timed kernels) and `"run0-triton/timed/"` (its timed window: the Triton kernel only) over a
   tiny replay of pytorch and triton GeLU rows, each with `--launch-count` and `--clock-control
   none`. Logs: OUT/handoffs-ncu-nvtx-*.log.
5. peers: examples/liger.yaml (Liger-Kernel's softmax and RMSNorm against ours; --quick: no
   profile, fewer repetitions) -> its table.
6. figures: `workbench --plot` of the GeLU document and of the sweep document as SVG (and the
   GeLU one as PNG, not --quick): OUT/lecture06-gelu-<device>.svg, OUT/softmax-sweep-<device>.svg.

The parts run in the order 3, 5, 2, 1, 6, 4 (ncu's selection last); each part's rows are printed as
it ends and written to OUT/handoffs.json. Without a GPU the stage says so and returns one
`skipped` row. Budget: ~120 s (--quick) on an H100/H200.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

TITLE = "handoffs: traces for Perfetto, ncu reports, NVTX on/off, peers, figures (issue 41)"
ROOT = Path(__file__).resolve().parents[2]
BUDGET_S = 120
T0 = time.perf_counter()


def step(text: str) -> None:
    """One progress line, flushed at once (the stage's output is read while it runs)."""
    print(f"[handoffs {time.perf_counter() - T0:6.1f} s] {text}", flush=True)


# what every child gets on top of os.environ: in-process replays, and PYTHONPATH with the packages
# `wheels` installed (a GPU box without platformdirs or liger_kernel; run() fills it)
CHILD_ENV: dict[str, str] = {"WORKBENCH_DAEMON": "0"}
# packages the stage's children need, and the wheel that provides each where this Python lacks it
WHEELS = {"platformdirs": "platformdirs-*.whl", "cxxfilt": "cxxfilt-*.whl", "liger_kernel": "liger_kernel-*.whl"}


def child(argv: list[str], timeout_s: float, env: dict | None = None) -> tuple[int | None, str, float]:
    """Run `argv` in its own process group (cwd ROOT, in-process replays): (rc, output, seconds).
    rc None: it ran past `timeout_s` and its whole group was killed (ncu and the workers it started)."""
    full = {**os.environ, **CHILD_ENV, **(env or {})}
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", start_new_session=True)
    try:
        text, _ = proc.communicate(timeout=timeout_s)
        return proc.returncode, text, time.perf_counter() - t0
    except subprocess.TimeoutExpired:
        with_group(proc.pid, signal.SIGKILL)
        text, _ = proc.communicate()
        return None, text + f"\n(timed out after {timeout_s:.0f} s: process group killed)", time.perf_counter() - t0


def with_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def status_of(rc: int | None) -> str:
    return "timed out" if rc is None else ("ok" if rc == 0 else "failed")


def replay(session: dict, name: str, out: Path, timeout_s: float, extra: tuple[str, ...] = (),
           env: dict | None = None) -> tuple[dict | None, dict]:
    """`python -m workbench --replay OUT/NAME.yaml -o OUT/NAME.json [extra]`: (document, part row)."""
    path, doc_path = out / f"{name}.yaml", out / f"{name}.json"
    path.write_text(yaml.safe_dump(session, sort_keys=False))
    doc_path.unlink(missing_ok=True)
    step(f"{name}: replay ({len(session['runs'])} runs, timeout {timeout_s:.0f} s)")
    rc, text, took = child([sys.executable, "-m", "workbench", "--replay", str(path), "-o", str(doc_path), *extra],
                           timeout_s, env)
    (out / f"{name}.log").write_text(text)
    doc = json.loads(doc_path.read_text()) if rc is not None and doc_path.is_file() else None
    row: dict[str, Any] = {"part": name, "status": status_of(rc) if doc is not None or rc is None else "failed",
                           "s": round(took, 1)}
    if doc is None:
        row["why"] = text[-300:]
    else:
        row.update(rows=len(doc["results"]), statuses=",".join(sorted({r["status"] for r in doc["results"]})))
    step(f"{name}: {row['status']} in {took:.1f} s")
    return doc, row


def run(quick: bool, out: Path) -> list[dict]:
    import torch

    if not torch.cuda.is_available():
        print("handoffs stage: no CUDA GPU here: nothing to hand off (skipped)")
        return [{"part": "all", "status": "skipped", "why": "no CUDA GPU"}]
    out.mkdir(parents=True, exist_ok=True)
    device = device_tag(torch.cuda.get_device_name(0))
    rows: list[dict] = wheels()
    # what no earlier GPU run has shown goes first (on/off medians, peers, the sweep), ncu's selection last
    parts = [lambda: nvtx_timing(quick, out), lambda: peers(quick, out), lambda: sweep(quick, out),
             lambda: gelu_traces(quick, out), lambda: figures(out, device, quick), lambda: nvtx_selection(out)]
    for part in parts:
        got = part()
        for row in got:
            step("row " + json.dumps({k: v for k, v in row.items() if v is not None and k != "why"}, default=str))
        rows += got
        (out / "handoffs.json").write_text(json.dumps(rows, indent=2, default=str))
    step(f"done: {len(rows)} rows, {sum(r.get('status') not in ('ok', 'skipped') for r in rows)} not ok")
    return rows


def device_tag(name: str) -> str:
    """"NVIDIA H100 80GB HBM3" -> "h100": the figures' file names."""
    for word in name.lower().replace("-", " ").split():
        if any(c.isdigit() for c in word) and word[0].isalpha() and word not in ("nvidia",) and "gb" not in word:
            return word
    return "gpu"


# -- 1. the lecture's GeLU with --trace-dir and counters ------------------------------------
def gelu_session(quick: bool) -> dict:
    data = yaml.safe_load((ROOT / "sessions" / "lecture06-gelu.yaml").read_text())
    run_ = data["runs"][0]
    run_["actions"] = ["check", "bench", "profile"]
    if quick:
        run_["impls"] = ["manual", "pytorch", "triton"]
        data["settings"].update(rep_ms=50, warmup_ms=10)
    data["runs"].append({"op": "gelu", "impls": ["triton"], "shape": dict(run_["shape"]), "dtype": "float32",
                         "actions": ["check", "bench", "counters"]})
    return data


def gelu_traces(quick: bool, out: Path) -> list[dict]:
    traces = out / "handoffs-traces"
    shutil.rmtree(traces, ignore_errors=True)
    doc, row = replay(gelu_session(quick), "handoffs-gelu", out, 150, ("--trace-dir", str(traces)))
    rows = [row]
    for record in (doc or {}).get("results", ()):
        if record.get("profile"):
            rows.append(trace_row(record))
        if record.get("measured"):
            step(f"ncu --import of run{record['run_index']}-{record['label']}'s report")
            rows.append(report_row(record))
    return rows


# -- 1. (checks) ------------------------------------------------------------------------------
def trace_row(record: dict) -> dict:
    """The row's kept trace: loads, has traceEvents, and holds the kernels of its profile table."""
    path = record["profile"].get("trace_path")
    row: dict[str, Any] = {"part": "trace", "row": f"run{record['run_index']}-{record['label']}",
                           "file": Path(path).name if path else None}
    if not path or not Path(path).is_file():
        return {**row, "status": "failed", "why": "no trace file"}
    try:
        trace = json.loads(Path(path).read_text())
    except ValueError as exc:
        return {**row, "status": "failed", "why": f"not JSON: {exc}"}
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    kernels = {e.get("name") for e in events or () if e.get("cat") == "kernel"}
    profiled = {r["name"] for r in record["profile"]["rows"] if r["kind"] == "kernel"}
    ok = bool(events) and bool(profiled) and profiled <= kernels and path.endswith(".pt.trace.json")
    return {**row, "status": "ok" if ok else "failed", "events": len(events or ()),
            "kernel_events": sum(1 for e in events or () if e.get("cat") == "kernel"),
            "row_kernels_in_trace": f"{len(profiled & kernels)}/{len(profiled)}",
            "kernel": sorted(profiled)[0][:60] if profiled else None}


def report_row(record: dict) -> dict:
    """The kept .ncu-rep: present, and `ncu --import FILE --page details` reads it."""
    measured = record["measured"]
    path = measured.get("report_path")
    row = {"part": "ncu-rep", "row": f"run{record['run_index']}-{record['label']}",
           "file": Path(path).name if path else None, "reason": measured.get("reason"),
           "dram_bytes": measured.get("dram_bytes")}
    if not path or not Path(path).is_file():
        return {**row, "status": "failed", "why": measured.get("reason") or "no report kept"}
    from workbench.counters import find_ncu

    rc, text, _ = child([find_ncu() or "ncu", "--import", path, "--page", "details"], 60)
    status = "ok" if rc == 0 and "gelu" in text.lower() else status_of(rc) if rc != 0 else "failed"
    return {**row, "status": status, "bytes": Path(path).stat().st_size, "import_rc": rc}


# -- 2. a sweep ------------------------------------------------------------------------------
def sweep(quick: bool, out: Path) -> list[dict]:
    data = {"schema_version": 1, "name": "softmax-sweep",
            "settings": {"device": "cuda", "warmup_ms": 10, "rep_ms": 30 if quick else 100},
            "runs": [{"op": "softmax", "impls": ["pytorch", "triton"], "shape": {"M": 4096, "N": 1024},
                      "dtype": "float32", "sweep": {"params": ["N"], "values": [1024, 4096, 8192, 16384]}}]}
    return [replay(data, "handoffs-sweep", out, 120)[1]]


# -- 3. NVTX ranges on and off: the engine's medians ----------------------------------------
def nvtx_session(rounds: int, rep_ms: float) -> tuple[dict, list[bool]]:
    """Runs alternating `nvtx: true` / `nvtx: false` (the pair's order flipped every other round):
    the session and each run's setting."""
    sides: list[bool] = []
    for i in range(rounds):
        sides += [True, False] if i % 2 == 0 else [False, True]
    runs = [{"op": "gelu", "impls": ["pytorch", "triton"], "shape": {"M": 8192, "N": 8192}, "dtype": "float32",
             "actions": ["bench"], "settings": {"nvtx": side}} for side in sides]
    return {"schema_version": 1, "name": "handoffs-nvtx-onoff",
            "settings": {"device": "cuda", "warmup_ms": 10, "rep_ms": rep_ms}, "runs": runs}, sides


def nvtx_ratios(doc: dict, sides: list[bool]) -> list[dict]:
    """Per label: the median over rounds of the row medians with the ranges and without, their ratio."""
    by: dict[str, dict[bool, list[float]]] = {}
    for record in doc["results"]:
        median = (record.get("timing") or {}).get("median_ms")
        if record["status"] == "ok" and median:
            by.setdefault(record["label"], {True: [], False: []})[sides[record["run_index"]]].append(median)
    rows = []
    for label, got in sorted(by.items()):
        if not got[True] or not got[False]:
            rows.append({"part": "nvtx-on/off", "impl": label, "status": "failed", "why": "a side has no median"})
            continue
        on, off = statistics.median(got[True]), statistics.median(got[False])
        rows.append({"part": "nvtx-on/off", "impl": label, "rounds": len(got[True]), "on_ms": on, "off_ms": off,
                     "ratio": on / off, "on_rounds": " ".join(f"{m:.4g}" for m in got[True]),
                     "off_rounds": " ".join(f"{m:.4g}" for m in got[False]),
                     "status": "ok" if abs(on / off - 1) <= 0.01 else "moved"})
    return rows


def nvtx_timing(quick: bool, out: Path) -> list[dict]:
    session, sides = nvtx_session(3 if quick else 6, 60 if quick else 150)
    doc, row = replay(session, "handoffs-nvtx-onoff", out, 120)
    if doc is None:
        return [row]
    rows = [row, *nvtx_ratios(doc, sides)]
    for r in rows[1:]:
        step(f"nvtx on/off {r['impl']}: ratio {r.get('ratio', float('nan')):.4f}")
    return rows


# -- 4. ncu selects one row by its NVTX range ------------------------------------------------
def nvtx_selection(out: Path) -> list[dict]:
    from workbench.counters import find_ncu

    ncu = find_ncu()
    if ncu is None:
        return [{"part": "nvtx-ncu", "status": "skipped", "why": "no ncu"}]
    tiny = {"schema_version": 1, "name": "handoffs-nvtx",
            "settings": {"device": "cuda", "warmup_ms": 1, "rep_ms": 2, "min_samples": 3, "flush_l2": False},
            "runs": [{"op": "gelu", "impls": ["pytorch", "triton"], "shape": {"M": 1024, "N": 1024},
                      "dtype": "float32", "actions": ["check", "bench"]}]}
    path = out / "handoffs-nvtx.yaml"
    path.write_text(yaml.safe_dump(tiny, sort_keys=False))
    # ncu's push/pop filter: "A/" the range A, "A/B/" the range B directly inside A
    return [_ncu_select(ncu, include, count, path, out) for include, count in (("run0-triton/", 20),
                                                                                ("run0-triton/timed/", 4))]


def _ncu_select(ncu: str, include: str, count: int, path: Path, out: Path) -> dict:
    log = out / f"handoffs-ncu-nvtx-{include.strip('/').replace('/', '-')}.log"
    log.unlink(missing_ok=True)
    argv = [ncu, "--nvtx", "--nvtx-include", include, "--clock-control", "none", "--target-processes", "all",
            "--launch-count", str(count), "--metrics", "gpu__time_duration.sum", "--log-file", str(log),
            sys.executable, "-m", "workbench", "--replay", str(path), "-o", str(out / "handoffs-nvtx.json")]
    step(f"ncu --nvtx-include {include} -c {count}")
    rc, output, took = child(argv, 60)
    text = log.read_text(errors="replace") if log.exists() else output
    if not log.exists():
        log.write_text(output)
    kernels = [line.split("(")[0].strip() for line in text.splitlines()
               if line.startswith("  ") and "Context" in line and "Stream" in line]
    triton = [k for k in kernels if "gelu" in k.lower() and "elementwise" not in k]
    timed = "timed" in include
    ok = bool(triton) and (not timed or len(triton) == len(kernels))  # the timed window: only the row's kernel
    step(f"ncu --nvtx-include {include}: rc {rc}, {len(kernels)} kernels in {took:.1f} s")
    return {"part": "nvtx-ncu", "include": include, "rc": rc, "s": round(took, 1), "kernels": len(kernels),
            "row_kernel": len(triton), "names": ",".join(sorted(set(kernels)))[:100], "log": log.name,
            "status": ("ok" if ok else "failed") if rc is not None else "timed out"}


# -- the packages the children need ----------------------------------------------------------
def find_wheel(pattern: str) -> Path | None:
    """The newest wheel matching `pattern` in WHEEL_DIR, else .whl/ here or two folders up (the
    checkout's root where this tree is a copy under .gpu/NAME)."""
    folders = [Path(os.environ["WHEEL_DIR"])] if os.environ.get("WHEEL_DIR") else []
    for folder in (*folders, ROOT / ".whl", ROOT.parent.parent / ".whl"):
        found = sorted(folder.glob(pattern)) if folder.is_dir() else []
        if found:
            return found[-1]
    return None


def wheels() -> list[dict]:
    """Each of WHEELS this Python cannot import, installed from its wheel (`pip install --no-deps
    --target`) into one folder that CHILD_ENV puts on the children's PYTHONPATH: a row per install."""
    import importlib.util

    missing = {name: find_wheel(pattern) for name, pattern in WHEELS.items() if importlib.util.find_spec(name) is None}
    if not missing:
        return []
    target = Path(tempfile.mkdtemp(prefix="handoffs-site-"))
    rows = []
    for name, wheel in missing.items():
        if wheel is None:
            rows.append({"part": "wheel", "impl": name, "status": "skipped",
                         "why": f"{name} is not importable and no {WHEELS[name]} (WHEEL_DIR, .whl/)"})
            continue
        step(f"pip install --no-deps --target {target} {wheel.name}")
        rc, text, took = child([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
                                "--target", str(target), str(wheel)], 90)
        rows.append({"part": "wheel", "impl": name, "file": wheel.name, "s": round(took, 1), "status": status_of(rc),
                     "why": None if rc == 0 else text[-300:]})
    CHILD_ENV["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), os.environ.get("PYTHONPATH")) if p)
    return rows


def importable(name: str) -> bool:
    """`name` importable by the children (this Python, or the folder `wheels` installed into)."""
    import importlib.util

    extra = CHILD_ENV.get("PYTHONPATH", "").split(os.pathsep)[0]
    return importlib.util.find_spec(name) is not None or bool(extra and (Path(extra) / name).is_dir())


# -- 5. peers: Liger-Kernel against ours ----------------------------------------------------
def peers(quick: bool, out: Path) -> list[dict]:
    if not importable("liger_kernel"):
        return [{"part": "peers", "status": "skipped", "why": "liger_kernel not installed and no wheel (WHEEL_DIR)"}]
    data = yaml.safe_load((ROOT / "examples" / "liger.yaml").read_text())
    data["plugins"] = [str(ROOT / "examples" / p) for p in data["plugins"]]
    if quick:
        data["settings"].update(rep_ms=40, warmup_ms=10)
        for run_ in data["runs"]:
            run_["actions"] = ["check", "bench"]
    doc, row = replay(data, "handoffs-peers", out, 150)
    rows = [row]
    for record in (doc or {}).get("results", ()):
        timing = record.get("timing") or {}
        rows.append({"part": "peers", "op": record["op"], "impl": record["label"], "dtype": record.get("dtype"),
                     "shape": "x".join(str(v) for v in (record.get("shape") or {}).values()),
                     "status": record["status"],
                     "median_ms": timing.get("median_ms"), "p20_ms": timing.get("p20_ms"),
                     "p80_ms": timing.get("p80_ms"), "gbps": (record.get("traffic") or {}).get("gbps"),
                     "why": (record.get("error") or "")[:80] or None})
    return rows


# -- 6. figures -------------------------------------------------------------------------------
def figures(out: Path, device: str, quick: bool) -> list[dict]:
    rows = []
    gelu = (f"lecture06-gelu-{device}.svg",) + (() if quick else (f"lecture06-gelu-{device}.png",))
    for doc_name, fig_names in (("handoffs-gelu", gelu),
                                ("handoffs-sweep", (f"softmax-sweep-{device}.svg",))):
        doc_path = out / f"{doc_name}.json"
        for name in fig_names:
            fig = out / name
            if not doc_path.is_file():
                rows.append({"part": "figure", "file": name, "status": "skipped", "why": f"no {doc_path.name}"})
                continue
            step(f"workbench --plot {doc_path.name} -o {name}")
            rc, text, _ = child([sys.executable, "-m", "workbench", "--plot", str(doc_path), "-o", str(fig)], 90)
            ok = rc == 0 and fig.is_file() and fig.stat().st_size > 1000
            rows.append({"part": "figure", "file": name, "status": "ok" if ok else status_of(rc) if rc else "failed",
                         "bytes": fig.stat().st_size if fig.is_file() else None, "why": None if ok else text[-300:]})
    return rows
