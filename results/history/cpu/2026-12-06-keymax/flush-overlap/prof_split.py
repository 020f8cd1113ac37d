"""Diagnostic launcher: like benchmarks/tui_key_split.py, plus per press a cProfile of the main
thread from Key to frame, per-thread on-CPU ns (schedstat) in that window, and flush_results spans."""
import cProfile, io, os, pstats, sys, threading, time, json
from pathlib import Path
ROOT = Path(os.environ["WB_ROOT"])
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import tui_key_split
LOG = os.environ["WB_KEY_SPLIT_LOG"]
tui_key_split.install(LOG)
out = open(LOG + ".prof", "a", buffering=1)

def tasks():
    res = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            res[int(tid)] = int(open(f"/proc/self/task/{tid}/schedstat").read().split()[0])
        except OSError:
            pass
    return res

def names():
    return {t.native_id: t.name for t in threading.enumerate()}

from textual import events
from textual.app import App
state = {}
on_event, display = App.on_event, App._display
async def ev(self, event):
    if isinstance(event, events.Key) and event.key in "12":
        out.write(f"KEY {time.monotonic():.4f}\n")
        state.update(t=time.monotonic(), tasks=tasks(), key=event.key)
    return await on_event(self, event)
def disp(self, screen, renderable):
    r = display(self, screen, renderable)
    if renderable is not None and "t" in state:
        after = tasks(); nm = names(); before = state["tasks"]
        per = {f"{tid}:{nm.get(tid, '?')}": round((after[tid] - before.get(tid, 0)) / 1e6, 1) for tid in after if after[tid] - before.get(tid, 0) > 5e5}
        out.write(json.dumps({"t": state["t"], "wall_ms": round((time.monotonic() - state["t"]) * 1e3, 1), "threads_cpu_ms": per, "main": threading.main_thread().native_id}) + "\n"); state.pop("t")

    return r
App.on_event, App._display = ev, disp
from workbench.screens import runner
orig = runner.RunnerMixin.flush_results
def flush(self):
    t0 = time.monotonic(); c0 = time.thread_time()
    orig(self)
    t1 = time.monotonic()
    if t1 - t0 > 0.0003:
        out.write(f"FLUSH {t0:.4f} {(t1-t0)*1e3:.1f}ms cpu {(time.thread_time()-c0)*1e3:.1f}\n")
runner.RunnerMixin.flush_results = flush
def span(cls, name):
    f = getattr(cls, name)
    if asyncio.iscoroutinefunction(f):
        async def w(self, *a, **k):
            t0 = time.monotonic(); c0 = time.thread_time()
            r = await f(self, *a, **k)
            out.write(f"SPAN {name} {t0:.4f} {(time.monotonic()-t0)*1e3:.1f} cpu {(time.thread_time()-c0)*1e3:.1f}\n")
            return r
    else:
        def w(self, message=None):
            t0 = time.monotonic(); c0 = time.thread_time()
            r = f(self) if message is None else f(self, message)
            out.write(f"SPAN {name} {t0:.4f} {(time.monotonic()-t0)*1e3:.1f} cpu {(time.thread_time()-c0)*1e3:.1f}\n")
            return r
    setattr(cls, name, w)
import asyncio
from textual.screen import Screen
span(Screen, "_on_timer_update")
span(runner.RunnerMixin, "on_engine_events")
span(runner.RunnerMixin, "flush_results")

from workbench.cli.main import main
sys.exit(main())
