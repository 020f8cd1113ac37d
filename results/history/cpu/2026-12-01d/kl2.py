import asyncio, sys, time, json
from pathlib import Path
sys.path.insert(0, '/work/main')
from benchmarks.stages.overhead import _session_file
from benchmarks.stages import _overhead_tui as T
from workbench.engine.options import RunOptions

async def k2f(pilot, key, shown, timeout_s=10.0):
    app = pilot.app
    painted = asyncio.Event()
    t0 = time.monotonic()
    app.simulate_key(key)
    while not shown():
        await asyncio.sleep(0.001)
    t1 = time.monotonic()
    app.call_after_refresh(painted.set)
    await painted.wait()
    t2 = time.monotonic()
    PARTS.append(((t1-t0)*1e3, (t2-t1)*1e3))
    return (t2 - t0) * 1e3
PARTS=[]
T.key_to_frame = k2f

async def main():
    folder = Path('/tmp/kl/f'); folder.mkdir(parents=True, exist_ok=True)
    path = _session_file(folder, "streaming", ("pytorch", "manual"), 256, False, rep_ms=30000, streaming=True)
    options = RunOptions(cache_dir=folder / "cache" / "workbench")
    T.KEY_PRESSES = 10
    med, detail = await T._key_latency(path, folder, options)
    print(round(med,1), [(round(a),round(b)) for a,b in PARTS])

if __name__ == "__main__":
    asyncio.run(main())
