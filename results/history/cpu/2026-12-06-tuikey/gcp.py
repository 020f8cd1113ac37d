import asyncio, sys, tempfile, time, gc
from pathlib import Path
sys.path.insert(0, str(Path.cwd()))
P = []; S = [0.0]
def cb(phase, info):
    if phase == "start": S[0] = time.perf_counter()
    else: P.append((info["generation"], round((time.perf_counter() - S[0]) * 1e3, 1), info["collected"]))
async def main(folder):
    from benchmarks.stages import _overhead_tui as tui
    from benchmarks.stages.overhead import _session_file
    from workbench.engine.options import RunOptions
    from workbench.screens.app import WorkbenchApp
    path = _session_file(folder, "streaming", ("pytorch", "manual"), 256, False, rep_ms=30000, streaming=True)
    app = WorkbenchApp(path, RunOptions(cache_dir=folder / "cache" / "workbench"), data_dir=folder / "data-keys")
    async with app.run_test(size=(200, 50)) as pilot:
        await tui._until(pilot, lambda: app.ws.run is not None, 120)
        first = tui._first_samples(app)
        await pilot.press("r")
        await tui._until(pilot, lambda: bool(first), 240)
        gc.callbacks.append(cb)
        for i in range(20):
            await pilot.press("2" if i % 2 == 0 else "1")
            await pilot.pause(0.3)
        gc.callbacks.remove(cb)
        app.stop_run()
    young = sorted(p[1] for p in P if p[0] < 2)
    print("n", len(P), "young ms sorted", young, "full", [p for p in P if p[0] == 2])
if __name__ == "__main__":
    asyncio.run(main(Path(tempfile.mkdtemp(prefix="tkgc-"))))
