"""tmux key latency with per-press t0 and app-internal timestamps (launcher /tmp/tk/launch.py)."""
import os, sys, time, subprocess, tempfile, statistics, json
from pathlib import Path
sys.path.insert(0, os.getcwd())
import benchmarks.tui_tmux_latency as T

def main():
    python = "/work/wt/tuikey/.venv/bin/python"
    logp = Path(tempfile.mkdtemp()) / "tk.log"
    os.environ["TK_LOG"] = str(logp)
    T.ENTRY = "/tmp/tk/launch.py"
    target = f"tk{os.getpid()}"
    data = Path(tempfile.mkdtemp(prefix="wb-tmux-"))
    presses = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    poll = float(sys.argv[2]) if len(sys.argv) > 2 else T.POLL_S / 5
    try:
        T.first_frame(target, python, "default-cpu", (200, 50), data)
        time.sleep(2.0)
        subprocess.run(["tmux", "send-keys", "-t", target, "r"], check=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if any(m in T._capture(target) for m in T.STREAMING_TEXT):
                break
            time.sleep(0.1)
        time.sleep(1.0)
        res = []
        for index in range(presses):
            key = "2" if index % 2 == 0 else "1"
            t0 = time.monotonic()
            subprocess.run(["tmux", "send-keys", "-t", target, key], check=True)
            t1 = time.monotonic()
            while True:
                screen = T._capture(target)
                if T._shows(screen, key):
                    break
                time.sleep(poll)
            res.append((key, t0, t1, time.monotonic()))
            time.sleep(0.3)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", target], capture_output=True)
    events = [l.split() for l in logp.read_text().splitlines()]
    out = []
    for key, t0, t1, seen in res:
        ev = [(float(t), k, *rest) for t, k, *rest in events if t0 <= float(t) <= seen]
        kp = next((t for t, k, *r in ev if k == "keypost"), None)
        ap = next((t for t, k, *r in ev if k == "action_pane"), None)
        disps = [(t, float(r[0]), float(r[1])) for t, k, *r in ev if k == "display" and ap and t >= ap]
        ke = next(((t, float(r[1])) for t, k, *r in ev if k == "keyevent"), None)
        fd = disps[0] if disps else None
        out.append({"key": key, "total": round((seen - t0) * 1e3, 1), "sendkeys": round((t1 - t0) * 1e3, 1),
                    "to_post": round((kp - t0) * 1e3, 1) if kp else None,
                    "post_to_action": round((ap - kp) * 1e3, 1) if kp and ap else None,
                    "action_to_display": round((fd[0] - ap) * 1e3, 1) if fd else None,
                    "display_ms": round(fd[1] * 1e3, 1) if fd else None,
                    "display_to_seen": round((seen - fd[0] - fd[1]) * 1e3, 1) if fd else None,
                    "n_displays": len(disps),
                    "cpu_key_to_display": round((fd[2] - ke[1]) * 1e3, 1) if fd and ke else None,
                    "wall_key_to_display": round((fd[0] + fd[1] - ke[0]) * 1e3, 1) if fd and ke else None})
    for o in out: print(o)
    for k in ("total", "to_post", "post_to_action", "action_to_display", "display_ms", "display_to_seen", "cpu_key_to_display", "wall_key_to_display"):
        vals = [o[k] for o in out if o[k] is not None]
        print(k, "median", round(statistics.median(vals), 1) if vals else None)

if __name__ == "__main__":
    main()
