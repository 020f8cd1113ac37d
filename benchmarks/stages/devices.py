"""Stage `devices`: `--devices all` (and `--cluster ray` where Ray is installed) against the plain
run of the same session, on this host (issue #20).

    python benchmarks/gpu_evidence.py --stage devices [--quick] [--out DIR]

Each variant is a CLI replay in a fresh interpreter, as a user runs it:
`python -m workbench --replay SESSION --format json -o OUT/devices/VARIANT.json [--devices all |
--cluster ray]` (stderr to VARIANT.log). Order: plain, devices, ray, then plain again, so a
drift of the machine between the first and the later runs shows as plain-vs-plain. The table:
one summary row per variant (exit code, wall time, rows by status, whether labels, statuses and
check verdicts equal the plain run's, the largest |median ratio - 1| over rows ok on both, and
how many rows are within 2% and within their own p20-p80 spread), then one row per
implementation (plain and devices medians, ratio). On a one-GPU host `--devices all` must give
the plain run's rows with medians within noise; Ray's target is 2%.

The session: --quick writes OUT/devices/devices-quick.yaml (GeLU manual/pytorch/triton at
4096 x 4096 and 4096 x 2048 float32, a sweep of two points; rep_ms 30), ~15-25 s a replay on an
H200, under 2 minutes in all; the full stage replays the shipped lecture06-gelu (16384^2, six
implementations). Without a GPU it replays `smoke-quick` (CPU), so the stage can be tried here.
Ray is skipped with a note where `import ray` fails (the GPU box has no registry to install it
from). Results are written after every replay to OUT/devices/summary.json.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

TITLE = "devices: --devices all and --cluster ray against the plain run"
ROOT = Path(__file__).resolve().parents[2]
BUDGET_S = 110             # --quick; the full stage gets 4x
REPLAY_LIMIT_S = 240
QUICK_SESSION = """schema_version: 1
name: devices-quick
settings: {device: auto, warmup_ms: 10, rep_ms: 30, min_samples: 5, target_rel_error: 0.005, timeout_s: 120}
runs:
  - op: gelu
    impls: [manual, pytorch, triton]
    shape: {M: 4096, N: 4096}
    dtype: float32
    sweep: {params: [N], values: [2048, 4096]}
"""
VARIANTS = {"plain": [], "devices": ["--devices", "all"], "ray": ["--cluster", "ray"], "plain-again": []}


def run(quick: bool, out: Path) -> list[dict]:
    folder = Path(out) / "devices"
    folder.mkdir(parents=True, exist_ok=True)
    session = _session(quick, folder)
    budget = BUDGET_S if quick else 4 * BUDGET_S
    start, docs, rows = time.monotonic(), {}, []
    for name, flags in VARIANTS.items():
        left = budget - (time.monotonic() - start)
        if name == "ray" and importlib.util.find_spec("ray") is None:
            rows.append({"variant": name, "status": "skipped: ray is not importable here (pip install "
                                                    "'kernel-workbench[ray]'); no Ray evidence from this host"})
        elif left < 10:
            rows.append({"variant": name, "status": f"not started: stage budget {budget} s spent"})
        else:
            summary, docs[name] = _replay(session, name, flags, folder, min(REPLAY_LIMIT_S, left))
            rows.append(summary)
        _compare_all(rows, docs)
        (folder / "summary.json").write_text(json.dumps({"session": session, "variants": rows}, indent=1))
    return rows + _detail(docs)


def _session(quick: bool, folder: Path) -> str:
    if not _has_gpu():
        return "smoke-quick"
    if not quick:
        return "lecture06-gelu"
    path = folder / "devices-quick.yaml"
    path.write_text(QUICK_SESSION)
    return str(path)


def _has_gpu() -> bool:
    from workbench.machine import nvml_gpus

    return bool(nvml_gpus())


def _replay(session: str, name: str, flags: list[str], folder: Path, limit_s: float) -> tuple[dict, dict | None]:
    result, log = folder / f"{name}.json", folder / f"{name}.log"
    cmd = [sys.executable, "-m", "workbench", "--replay", session, "--format", "json", "-o", str(result), *flags]
    t0 = time.monotonic()
    with open(log, "w") as log_file:
        try:
            code = subprocess.run(cmd, stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT, timeout=limit_s).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    doc = json.loads(result.read_text()) if result.exists() else None
    statuses = [r["status"] for r in (doc or {}).get("results", [])]
    summary = {"variant": name, "exit": code, "wall_s": round(time.monotonic() - t0, 1), "rows": len(statuses),
               "ok": statuses.count("ok"), "failed": statuses.count("failed"),
               "devices": ",".join((doc or {}).get("environment", {}).get("devices") or []) or None}
    return summary, doc


def rows_of(doc: dict) -> list[tuple]:
    """What must be equal between variants: (label, sweep value, status, check passed) in order."""
    return [(r["label"], r["sweep_value"], r["status"], (r.get("check") or {}).get("passed")) for r in doc["results"]]


def compare(doc: dict, plain: dict) -> dict:
    """Same rows as plain; median ratios over rows ok on both (ratio: this / plain)."""
    ratios, within_2pct, within_spread = [], 0, 0
    for mine, base in zip(doc["results"], plain["results"]):
        a, b = mine.get("timing") or {}, base.get("timing") or {}
        if mine["status"] != "ok" or base["status"] != "ok" or not a.get("median_ms") or not b.get("median_ms"):
            continue
        ratio = a["median_ms"] / b["median_ms"]
        ratios.append(ratio)
        within_2pct += abs(ratio - 1) <= 0.02
        spread = max((a["p80_ms"] - a["p20_ms"]) / a["median_ms"], (b["p80_ms"] - b["p20_ms"]) / b["median_ms"])
        within_spread += abs(ratio - 1) <= max(spread, 1e-9)
    return {"same_rows": rows_of(doc) == rows_of(plain), "timed": len(ratios),
            "max_abs_ratio_minus_1": round(max((abs(r - 1) for r in ratios), default=0.0), 4),
            "within_2pct": within_2pct, "within_spread": within_spread}


def _compare_all(rows: list[dict], docs: dict) -> None:
    plain = docs.get("plain")
    for row in rows:
        doc = docs.get(row["variant"])
        if plain is not None and doc is not None and row["variant"] != "plain":
            row.update(compare(doc, plain))


def _detail(docs: dict) -> list[dict]:
    plain, other = docs.get("plain"), docs.get("devices")
    if plain is None or other is None:
        return []
    out = []
    for mine, base in zip(other["results"], plain["results"]):
        a, b = (mine.get("timing") or {}).get("median_ms"), (base.get("timing") or {}).get("median_ms")
        out.append({"variant": f"row {mine['label']} @ {mine['sweep_value']}", "device": mine["device"],
                    "plain_ms": b, "devices_ms": a, "ratio": a / b if a and b else None})
    return out
