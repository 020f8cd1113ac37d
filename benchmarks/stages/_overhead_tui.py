"""The TUI parts of stage `overhead`, driven by Textual's Pilot (no terminal needed).

default_session_tui_s: app start -> both runs of the shipped default session finished (r on
each), with every process's phase marks (workbench/trace.py) as `trace`, in s since the app start; tui_rerun_after_edit_s: after the GeLU run finished, the shape is edited and `r` pressed,
until its first Samples event arrives (pytorch and triton, built before in the app's warm
worker); key_latency_midrun_ms: while a long run streams samples, a pane key (2, then 1) until
the pane is on screen, median of KEY_PRESSES.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from workbench import events as ev

RUN_LIMIT_S = 240
ROW_TIMEOUT_S = 100  # the default session's timeout_s here: a hung row fails (naming where) and the part goes on
KEY_PRESSES = 10


class _Saved(dict):
    """The figures, each also handed to `put(name, value, **detail)` as soon as it is measured
    (on the H200 a call's limit cut the part before it returned, and nothing was written)."""

    def __init__(self, put):
        super().__init__()
        self.put = put

    def __setitem__(self, key, pair) -> None:
        super().__setitem__(key, pair)
        if self.put is not None:
            self.put(key, pair[0], **pair[1])


async def drive(folder: Path, side: int, gpu: bool, quick: bool, session_file, put=None) -> dict:
    """The three TUI figures; session_file(folder, name, impls, side, gpu, rep_ms, streaming)
    writes a session (overhead._session_file); put (Figures.put) saves each as it is measured."""
    from workbench.engine.options import RunOptions
    from workbench.screens.app import WorkbenchApp

    import os

    from workbench import trace

    options = RunOptions(cache_dir=folder / "cache" / "workbench")
    figures = _Saved(put)
    session = _default_session(folder, side, gpu)
    trace_path = folder / "trace.txt"  # every process's phase marks (workbench/trace.py)
    os.environ[trace.ENV] = str(trace_path)
    t0 = time.monotonic()
    app = WorkbenchApp(session, options, data_dir=folder / "data")
    async with app.run_test(size=(200, 50)) as pilot:
        timeline = _timeline(app, t0)
        await _until(pilot, lambda: app.ws.run is not None, 120)
        timeline.append((round(time.monotonic() - t0, 3), "session loaded", None))
        statuses = []
        for index in range(len(app.ws.session.runs)):
            await _pick_run(pilot, index)
            timeline.append((round(time.monotonic() - t0, 3), "r pressed", index))
            statuses += await _run(pilot)
        marks = [(round(t - t0, 3), pid, phase) for t, pid, phase in trace.read(str(trace_path))]
        figures["default_session_tui_s"] = (time.monotonic() - t0, {"statuses": statuses, "file": str(session),
                                                                    "timeline": timeline, "trace": marks})
        os.environ.pop(trace.ENV, None)
        await _pick_run(pilot, 0)
        figures["tui_rerun_after_edit_s"] = await _rerun_after_edit(pilot, side)
    path = session_file(folder, "streaming", ("pytorch", "triton"), side, gpu, rep_ms=3000 if quick else 8000,
                        streaming=True)
    figures["key_latency_midrun_ms"] = await _key_latency(path, folder, options)
    return figures


def _default_session(folder: Path, side: int, gpu: bool) -> Path:
    """The shipped default session (default-cpu without a GPU), its shapes set to side x side."""
    import dataclasses

    from workbench.session.api import load_session, save_session, shipped_path

    session = load_session(shipped_path("default" if gpu else "default-cpu"), check_ops=False)
    runs = tuple(dataclasses.replace(r, shape={k: side for k in r.shape}) for r in session.runs)
    settings = dataclasses.replace(session.settings, timeout_s=min(session.settings.timeout_s, ROW_TIMEOUT_S))
    path = folder / "default-session.yaml"
    save_session(dataclasses.replace(session, runs=runs, settings=settings), path)
    return path


async def _pick_run(pilot, index: int) -> None:
    from textual.widgets import OptionList

    options = pilot.app.query_one("#op-list", OptionList)
    options.focus()
    options.highlighted = next(i for i, o in enumerate(options.options) if o.id == f"run:{index}")
    await pilot.press("enter")
    await _until(pilot, lambda: pilot.app.ws.index == index, 10)
    pilot.app.query_one("#results-table").focus()
    await pilot.pause(0.2)


async def _run(pilot) -> list[str]:
    app = pilot.app
    before = app.runs_finished
    await pilot.press("r")
    await _until(pilot, lambda: app.runs_finished > before, RUN_LIMIT_S)
    model = app.ws.models.get(app.ws.index)
    return [f"{r.label}:{(r.record or {}).get('status')}" + (f" ({(r.record or {}).get('error')})"
            if (r.record or {}).get("status") == "failed" else "") for r in model.rows.values()] if model else []


async def _rerun_after_edit(pilot, side: int):
    """Shape edited (M halved), pytorch and triton ticked, r -> the first Samples event."""
    from textual.widgets import Input, SelectionList

    app = pilot.app
    checklist = app.query_one("#impl-list", SelectionList)
    checklist.deselect_all()
    for name in ("pytorch", "triton"):
        checklist.select(name)
    field = sorted(app.query(".shape").results(Input), key=lambda i: i.name)[0]
    field.focus()
    field.value = ""
    await pilot.press(*str(max(side // 2, 1)))
    app.query_one("#results-table").focus()
    await pilot.pause(0.5)
    first = _first_samples(app)
    t0 = time.monotonic()
    before = app.runs_finished
    await pilot.press("r")
    await _until(pilot, lambda: first or app.runs_finished > before, RUN_LIMIT_S)
    seconds = (first[0] - t0) if first else None
    await _until(pilot, lambda: app.runs_finished > before, RUN_LIMIT_S)
    return seconds, {"first_samples_seen": bool(first)}


def _timeline(app, t0: float) -> list[tuple]:
    """(s since t0, event, row[, text]) of each engine event the app is handed but Samples (only
    a row's first; Log and Error with their first 160 characters), and each line the app adds to
    its Log pane (the build-ahead's): where the default session's wall time goes."""
    seen: list[tuple] = []
    sampled: set = set()
    post = app._post_event

    def spy(event) -> None:
        row = getattr(event, "row", None)
        first = not isinstance(event, ev.Samples) or row not in sampled
        if isinstance(event, ev.Samples):
            sampled.add(row)
        if first:
            seen.append((round(time.monotonic() - t0, 3), type(event).__name__,
                         "/".join(str(x) for x in row) if isinstance(row, tuple) else row)
                        + ((str(getattr(event, "text", getattr(event, "message", "")))[:160],)
                           if isinstance(event, (ev.Log, ev.Error)) else ()))
        post(event)
    app._post_event = spy
    pane = app.log_pane
    add = pane.add

    def logged(text: str, level: str = "info") -> None:  # the app's own lines (build-ahead, ...)
        seen.append((round(time.monotonic() - t0, 3), "log pane", None, str(text)[:160]))
        add(text, level)
    pane.add = logged
    return seen


def _first_samples(app) -> list[float]:
    """A list that gets the monotonic time of the first Samples event the engine posts."""
    seen: list[float] = []
    post = app._post_event

    def spy(event) -> None:
        if isinstance(event, ev.Samples) and not seen:
            seen.append(time.monotonic())
        post(event)
    app._post_event = spy
    return seen


class PressProbe:
    """Where a key press's ms go, per press: `gc_ms` (Python's garbage collector, gc.callbacks),
    `layout_ms` (Textual's Screen._refresh_layout: reflow and render of what moved) and
    `compositor_ms` (Screen._compositor_refresh: the frame's render), read around each
    key_to_frame. Installed for one measurement and removed after (benchmark only)."""

    def __init__(self) -> None:
        self.totals = {"gc_ms": 0.0, "layout_ms": 0.0, "compositor_ms": 0.0}
        self.presses: list[dict] = []
        self._gc_start = 0.0

    def _gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self.totals["gc_ms"] += (time.perf_counter() - self._gc_start) * 1e3

    def __enter__(self) -> "PressProbe":
        import gc

        from textual.screen import Screen

        self._saved = {name: getattr(Screen, name) for name in ("_refresh_layout", "_compositor_refresh")}
        for name, key in (("_refresh_layout", "layout_ms"), ("_compositor_refresh", "compositor_ms")):
            setattr(Screen, name, self._timed(self._saved[name], key))
        gc.callbacks.append(self._gc)
        return self

    def _timed(self, method, key: str):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.totals[key] += (time.perf_counter() - start) * 1e3
        return timed

    def __exit__(self, *exc) -> None:
        import gc

        from textual.screen import Screen

        gc.callbacks.remove(self._gc)
        for name, method in self._saved.items():
            setattr(Screen, name, method)

    def mark(self) -> dict:
        return dict(self.totals)

    def since(self, mark: dict) -> None:
        self.presses.append({k: round(v - mark[k], 2) for k, v in self.totals.items()})


async def _key_latency(path: Path, folder: Path, options):
    """Pane keys while a long run streams: key event posted -> the first frame handed to the
    terminal with the new pane laid out in it (key_to_frame's display_ms, method
    "key_to_display"), median of KEY_PRESSES; key_to_frame_ms keeps the earlier figure
    (until a refresh after the pane was seen active: it can count one frame more). Headless, so
    the frame's conversion to escape codes and the terminal are not in it (stage tmux has a real
    terminal). The key goes in as a real Key event
    (App.simulate_key), not through Pilot.press, which also waits for every animation to end:
    the tab underline's glide (~0.3 s, cosmetic: keys are answered during it) made a bare
    Textual app measure ~400 ms a switch on this CPU. pilot_press_ms keeps Pilot's figure;
    per_press: where each measured press's ms went (PressProbe)."""
    from workbench.screens.app import WorkbenchApp

    app = WorkbenchApp(path, options, data_dir=folder / "data-keys")
    latencies, pilot_ms, active_ms, refresh_ms = [], [], [], []
    with PressProbe() as probe:
        async with app.run_test(size=(200, 50)) as pilot:
            streaming = await _presses(app, pilot, probe, latencies, pilot_ms, active_ms, refresh_ms)
    return statistics.median(latencies), {"latencies_ms": latencies, "run_still_streaming": streaming,
                                          "method": "key_to_display", "pilot_press_ms": pilot_ms,
                                          "key_to_pane_active_ms": active_ms, "key_to_frame_ms": refresh_ms,
                                          "key_to_frame_median_ms": statistics.median(refresh_ms),
                                          "per_press": probe.presses}


async def _presses(app, pilot, probe: PressProbe, latencies: list, pilot_ms: list, active_ms: list,
                   refresh_ms: list) -> bool:
    """The pane keys of _key_latency, the first KEY_PRESSES measured key -> frame (each through
    `probe`), the next KEY_PRESSES through Pilot.press; returns whether the run still streamed."""
    from textual.widgets import TabbedContent

    await _until(pilot, lambda: app.ws.run is not None, 120)
    first = _first_samples(app)
    await pilot.press("r")
    await _until(pilot, lambda: bool(first), RUN_LIMIT_S)
    tabs = app.query_one("#panes", TabbedContent)
    for index in range(2 * KEY_PRESSES):
        key, pane = ("2", "profile") if index % 2 == 0 else ("1", "timing")
        if index < KEY_PRESSES:
            mark = probe.mark()
            shows = tabs.query_one(f"TabPane#{pane}")
            refresh_ms.append(await key_to_frame(pilot, key, lambda: tabs.active == pane, active_ms=active_ms,
                                                 pane=shows, display_ms=latencies))
            probe.since(mark)
        else:
            t0 = time.monotonic()
            await pilot.press(key)
            await _until(pilot, lambda: tabs.active == pane, 10, step_s=0.002)
            pilot_ms.append((time.monotonic() - t0) * 1e3)
        await pilot.pause(0.15)
    streaming = app.running
    app.stop_run()
    return streaming


async def key_to_frame(pilot, key: str, shown, timeout_s: float = 10.0, active_ms: list | None = None,
                       pane=None, display_ms: list | None = None) -> float:
    """ms from posting `key` until `shown()` holds and the screen has refreshed after it
    (call_after_refresh); active_ms, when given, gets the ms until `shown()` held (the key
    handled; the rest is the frame: layout and render of the pane). display_ms, with `pane`
    (the widget the key brings on screen), gets the ms until the first frame handed to the
    terminal (App._display) with `pane` laid out in it: what the user sees. The refresh-callback
    figure can be a frame later than that (shown() is polled, and a callback registered after the
    pane's frame waits for the next refresh, which may come only with the footer's update)."""
    import asyncio

    app = pilot.app
    painted = asyncio.Event()
    seen: list[float] = []
    display = app._display

    def watched(screen, renderable) -> None:
        if not seen and shown() and pane in screen._compositor.visible_widgets:
            seen.append(time.monotonic())
        display(screen, renderable)

    if display_ms is not None:
        app._display = watched
    try:
        t0 = time.monotonic()
        app.simulate_key(key)
        deadline = t0 + timeout_s
        while not shown():
            if time.monotonic() > deadline:
                raise TimeoutError(f"key {key!r} not answered in {timeout_s} s")
            await asyncio.sleep(0.001)
        if active_ms is not None:
            active_ms.append((time.monotonic() - t0) * 1e3)
        app.call_after_refresh(painted.set)
        await asyncio.wait_for(painted.wait(), timeout_s)
        done = time.monotonic()
        while display_ms is not None and not seen:
            if time.monotonic() > deadline:
                raise TimeoutError(f"key {key!r}: no frame with the pane in {timeout_s} s")
            await asyncio.sleep(0.001)
    finally:
        if display_ms is not None:
            del app._display  # the class's method again
    if display_ms is not None:
        display_ms.append((seen[0] - t0) * 1e3)
    return (done - t0) * 1e3


async def _until(pilot, condition, timeout_s: float, step_s: float = 0.05) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the TUI did not get there in {timeout_s} s")
        await pilot.pause(step_s)

