"""Stage `stop`: a replay stopped by SIGTERM on the GPU keeps every finished row, and --resume
completes it (issue #14 part 1; before, SIGTERM lost all 33 finished rows of an H200 replay).

    python benchmarks/gpu_evidence.py --stage stop [--quick] [--out DIR]

1. `python -m workbench --replay OUT/stop/stop.yaml -o OUT/stop/stop.json` in its own process
   group (as under `timeout`); once the GeLU rows have finished, SIGTERM goes to the whole group
   (children included) while a long host-sleep row runs. Expected: exit 143, the GeLU rows `ok`
   with their timings, the sleep row `skipped` / "cancelled", `cancel_signal` "SIGTERM", no
   journal left.
2. `--resume OUT/stop/stop.json`: only the sleep row runs; the GeLU rows are kept as they were.
Without a GPU the same session runs on the CPU (smaller shape), so the stage can be tried anywhere.
Time: about 1 minute (--quick and full are the same; a cold CUDA child dominates).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

TITLE = "SIGTERM mid-replay keeps the finished rows; --resume completes the run"
ROOT = Path(__file__).resolve().parents[2]
START_S = 300       # the first rows, a cold child included, must finish within this
STOPPED_S = 60      # after SIGTERM the CLI must have written and exited within this
IMPLS = ("manual", "pytorch", "triton", "cuda")
SESSION = """schema_version: 1
name: stop-stage
settings: {{device: auto, rep_ms: 30, warmup_ms: 10, min_samples: 5}}
runs:
  - op: gelu
    impls: [{impls}]
    shape: {{M: {n}, N: {n}}}
    dtype: float32
  - op: sleep
    impls: [manual]
    shape: {{sleep_ms: 2000}}
"""


def run(quick: bool, out: Path) -> list[dict]:
    folder = out / "stop"
    folder.mkdir(parents=True, exist_ok=True)
    gpu = _has_gpu()
    impls = IMPLS if gpu else ("manual", "pytorch")
    session = folder / "stop.yaml"
    session.write_text(SESSION.format(impls=", ".join(impls), n=8192 if gpu else 256))
    target = folder / "stop.json"
    for stale in (target, folder / "stop.json.journal.jsonl"):
        stale.unlink(missing_ok=True)
    rows = [_stopped(session, target, len(impls), folder)]
    if rows[0].get("exit") == 143:
        rows.append(_resumed(session, target, folder))
    (folder / "summary.json").write_text(json.dumps(rows, indent=2))
    return rows


def _stopped(session: Path, target: Path, finished: int, folder: Path) -> dict:
    t0 = time.monotonic()
    with open(folder / "stopped.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "workbench", "--replay", str(session), "-o", str(target)],
                                stdout=log, stderr=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True)
        if not _wait_for(proc, f"[{finished}/{finished + 1}]", log):
            proc.kill()
            return {"phase": "stopped", "status": f"no [{finished}/..] line within {START_S} s; see stopped.log"}
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOPPED_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            return {"phase": "stopped", "status": f"still running {STOPPED_S} s after SIGTERM"}
    return {"phase": "stopped", "exit": proc.returncode, "wall_s": round(time.monotonic() - t0, 1),
            **_summary(target)}


def _resumed(session: Path, target: Path, folder: Path) -> dict:
    before = json.loads(target.read_text())
    t0 = time.monotonic()
    with open(folder / "resumed.log", "w") as log:
        proc = subprocess.run([sys.executable, "-m", "workbench", "--replay", str(session), "--resume", str(target)],
                              stdout=log, stderr=subprocess.STDOUT, text=True, cwd=ROOT, timeout=START_S)
    row = {"phase": "resumed", "exit": proc.returncode, "wall_s": round(time.monotonic() - t0, 1), **_summary(target)}
    after = json.loads(target.read_text())
    kept = [b for b in before["results"] if b["status"] != "skipped"]
    row["kept_identical"] = all(a == b for a, b in zip(after["results"], kept))
    return row


def _summary(target: Path) -> dict:
    if not target.exists():
        return {"status": "no document written"}
    doc = json.loads(target.read_text())
    statuses = [r["status"] for r in doc["results"]]
    return {"device": doc["environment"]["device"], "cancelled": doc["cancelled"],
            "cancel_signal": doc.get("cancel_signal"), **{s: statuses.count(s) for s in ("ok", "failed", "skipped")},
            "journal_left": Path(f"{target}.journal.jsonl").exists(),
            "gelu_median_ms": ";".join(f"{r['label']}={(r.get('timing') or {}).get('median_ms')}"
                                       for r in doc["results"] if r["op"] == "gelu")}


def _wait_for(proc: subprocess.Popen, text: str, log) -> bool:
    """True once a stderr line contains `text`; False when the process ended or START_S passed
    first. A thread copies every stderr line to `log` (to the end), so a silent process cannot
    block the stage."""
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in iter(proc.stderr.readline, ""):
            log.write(line)
            log.flush()
            lines.put(line)
    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        try:
            if text in lines.get(timeout=1.0):
                return True
        except queue.Empty:
            if proc.poll() is not None:
                return False
    return False


def _has_gpu() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


if __name__ == "__main__":  # python benchmarks/stages/stop.py [--quick] OUT
    args = [a for a in sys.argv[1:] if a != "--quick"]
    print(json.dumps(run("--quick" in sys.argv, Path(args[0] if args else "evidence-out")), indent=2))
