"""Stage `tuitmux`: the TUI's first frame and a pane key answered mid-run, in a real terminal
(tmux), as issue 39 item 3 measures them (benchmarks/tui_tmux_latency.py).

    python benchmarks/gpu_evidence.py --stage tuitmux [--quick] [--out DIR]

Rows: first frame at 200x50 of the default command, served by the warm TUI process
(workbench/cli/tui_server.py) that an earlier start left (median of 5 starts, 3 with --quick;
target <= 0.5 s); the same starts in their own process (WORKBENCH_DAEMON=0); that earlier
start's (no warm process yet); and the pane keys 2/1 pressed while the session's first run
streams (12 presses; targets median <= 30 ms, max <= 50 ms), each from `tmux send-keys` until the
captured screen shows the pane, on the default command's TUI (forked by the warm process)
and again on one in its own process. Then the pane keys once more (16 presses) on an app in its
own process started through benchmarks/tui_key_split.py (`--split`): each press split into
send-keys -> the app, the app's wall and CPU ms to its frame, the frame -> the screen, with the
main thread's event-loop slices around it; the rows give the medians and the slowest press with
its longest slices (what the main thread ran, wall/CPU ms), the JSON all of them (split/). The
session is the shipped `default` with a GPU (`default-cpu` without), whose first run (GeLU
16384^2, six ways, with profile and ptx) streams long enough. Needs tmux and textual (with
textual-plotext) in this Python: a row says plainly which is missing instead of a figure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

TITLE = "TUI in tmux: first frame and mid-run pane key"
ROOT = Path(__file__).resolve().parents[2]
BUDGET_S = 240


def run(quick: bool, out: Path) -> list[dict]:
    missing = _missing()
    if missing:
        return [{"figure": "tui tmux", "status": "not measured", "why": missing}]
    gpu = _has_gpu()
    folder = out / "tuitmux"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "tui_tmux_latency.py"), "--runs", "3" if quick else "5",
           "--presses", "12", "--session", "default" if gpu else "default-cpu", "--keys-no-daemon", "--out", str(folder)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=BUDGET_S)
    if proc.returncode != 0:
        return [{"figure": "tui tmux", "status": f"failed ({proc.returncode})",
                 "why": (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]}]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = [{"figure": "first frame s (200x50)", "median": result["first_frame_median_s"],
             "runs": result["first_frame_s"], "target": "<= 0.5", "device": "gpu" if gpu else "cpu",
             "warm TUI process up": result.get("warm_tui_up")}]
    if "first_frame_no_daemon_median_s" in result:
        rows.append({"figure": "first frame s, own process (WORKBENCH_DAEMON=0)",
                     "median": result["first_frame_no_daemon_median_s"], "runs": result["first_frame_no_daemon_s"]})
    if "earlier_start_first_frame_s" in result:
        rows.append({"figure": "first frame s, first start (no warm process yet)",
                     "median": result["earlier_start_first_frame_s"]})
    for suffix, what in (("", "pane key mid-run ms"), ("no_daemon_", "pane key mid-run ms, own process")):
        if f"key_{suffix}median_ms" in result:
            rows.append({"figure": what, "median": result[f"key_{suffix}median_ms"], "max": result[f"key_{suffix}max_ms"],
                         "runs": result[f"key_{suffix}ms"], "target": "<= 30 median, <= 50 max",
                         **({"run still streaming": result["run_still_streaming"]} if not suffix else {})})
    split = [sys.executable, str(ROOT / "benchmarks" / "tui_tmux_latency.py"), "--runs", "1", "--runs-no-daemon", "0",
             "--no-earlier", "--presses", "16", "--split", "--session", "default" if gpu else "default-cpu",
             "--out", str(folder / "split")]
    proc = subprocess.run(split, cwd=ROOT, capture_output=True, text=True, timeout=BUDGET_S)
    if proc.returncode != 0:
        rows.append({"figure": "pane key split", "status": f"failed ({proc.returncode})",
                     "why": (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]})
    else:
        rows += split_rows(json.loads(proc.stdout.strip().splitlines()[-1]))
    return rows


def split_rows(result: dict) -> list[dict]:
    """The --split run's rows: the presses and the medians of their parts, then the slowest
    press split, with its three longest slices of the main thread (what ran, wall/CPU ms)."""
    presses = [(ms, part) for ms, part in zip(result.get("key_ms", []), result.get("key_split", [])) if part]
    if not presses:
        return [{"figure": "pane key split", "status": "no press was split (the app's log had none)"}]
    rows = [{"figure": "pane key mid-run ms, split (own process)", "median": result["key_median_ms"],
             "max": result["key_max_ms"], "runs": result["key_ms"],
             "parts": " / ".join(f"{name} {result.get(f'key_{name}_median_ms', '-')}"
                                 for name in ("to_app", "app_wall", "app_cpu", "to_screen"))}]
    ms, part = max(presses, key=lambda press: press[0])
    longest = sorted(part.get("slices", []), key=lambda piece: -piece[1])[:3]
    rows.append({"figure": "slowest split press ms", "median": ms,
                 "parts": f"to_app {part['to_app_ms']} / app_wall {part['app_wall_ms']} (cpu {part['app_cpu_ms']})"
                          f" / to_screen {part['to_screen_ms']}",
                 "slices": "; ".join(f"@{start:+.0f} {wall}/{cpu} ms {what[:80]}" for start, wall, cpu, what in longest)})
    return rows


def _missing() -> str | None:
    """What the measurement lacks here, in words; None when it can run."""
    if shutil.which("tmux") is None:
        return "tmux is not installed (apt-get install tmux)"
    probe = subprocess.run([sys.executable, "-c", "import textual, textual_plotext"], capture_output=True, text=True)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return f"textual is missing in {sys.executable}: {last} (carry the textual wheels)"
    return None


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()
