"""A run spread over several places: one warm worker per local GPU (`--devices`), or Ray actors
(`--cluster ray`, engine/ray_cluster.py). Rows are placed by engine/placement.py; each place
runs `run_plan` on its own rows (the same engine: warm workers, supervisor, fault isolation,
calibration of its own device); the documents are merged by engine/merge.py.

Events: every place's events reach `on_event` from the calling thread, as run_plan promises,
through one queue; each row still gets exactly one Result. Cancel: the stop flag is shared, so
every place cancels within run_plan's 3 s. A place that raises (a plugin that fails to load)
stops the others and its error is raised once all have returned.

Pools: the caller's pool (the TUI's, warm) serves the first place; each other place gets a
private pool, closed when it returns (a pool keeps one spare, which places would fight over).
"""

from __future__ import annotations

import dataclasses
import queue
import threading
from typing import Callable, Sequence

from workbench.engine.multi.merge import merge_documents
from workbench.engine.options import RunOptions
from workbench.engine.multi.placement import parse_devices, place_rows, resolve_devices, rows_by_place
from workbench.engine.rows import Row
from workbench.events import Event
from workbench.session.model import Session

POLL_S = 0.05


@dataclasses.dataclass
class Part:
    """One place's share: device: its device string (the key of environment.devices); rows:
    its rows in session order; run(on_event, stop) -> its document (called in a thread;
    on_event may be called from any thread)."""

    device: str
    rows: list[Row]
    run: Callable[[Callable[[Event], None], threading.Event], dict]


def requested_devices(session: Session, options: RunOptions) -> tuple[str, ...] | None:
    """--devices (RunOptions.devices), else the session's `settings.devices`, parsed; None:
    neither (one device, as always)."""
    if options.devices:
        return tuple(options.devices)
    if session.settings.devices:
        return parse_devices(session.settings.devices, "settings.devices")
    return None


def local_parts(session: Session, rows: Sequence[Row], devices: Sequence[str], options: RunOptions,
                run_part: Callable[..., dict], workers) -> list[Part]:
    """One Part per device that has rows (the first always: it runs the A/B rows), each
    calling run_part (engine/plan.run_plan) with RunOptions.rows_here naming its rows."""
    placement = place_rows(rows, len(devices))
    shares = rows_by_place(rows, placement, len(devices))
    parts = []
    for index, (device, share) in enumerate(zip(devices, shares)):
        if not share and index > 0:
            continue
        here = {r.key: (device if r.device.startswith("cuda") else r.device) for r in share}
        sub = dataclasses.replace(options, devices=None, cluster=None, rows_here=here, ab=index == 0)
        pool = workers if index == 0 else None
        parts.append(Part(device, [dataclasses.replace(r, device=here[r.key]) for r in share],
                          _runner(run_part, session, sub, pool)))
    return parts


def _runner(run_part, session, sub: RunOptions, pool):
    def run(on_event, stop) -> dict:
        return run_part(session, on_event=on_event, stop=stop, options=sub, workers=pool)
    return run


def resolve_local(session: Session, options: RunOptions, gpu_count: int) -> list[str] | None:
    """The local devices the run uses (None: no --devices / settings.devices)."""
    requested = requested_devices(session, options)
    if requested is None:
        return None
    what = "--devices" if options.devices else "settings.devices"
    return resolve_devices(requested, gpu_count, what)


def run_parts(parts: Sequence[Part], order: Sequence, on_event: Callable[[Event], None],
              stop: threading.Event) -> dict:
    """Run every part at once, relay their events from this thread, merge their documents."""
    if len(parts) == 1:  # one place: no thread, exactly the one-device run
        doc = parts[0].run(on_event, stop)  # first: a Ray place learns its device string as it starts
        return merge_documents([(parts[0].device, doc)], order)
    events: queue.Queue = queue.Queue()
    docs: dict[int, dict] = {}
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_part_thread, args=(i, part, events, stop, docs, errors),
                                name=f"workbench-place-{part.device}", daemon=True) for i, part in enumerate(parts)]
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads) or not events.empty():
        try:
            on_event(events.get(timeout=POLL_S))
        except queue.Empty:
            continue
    if errors:
        raise errors[0]
    return merge_documents([(part.device, docs[i]) for i, part in enumerate(parts)], order)


def _part_thread(index: int, part: Part, events: queue.Queue, stop: threading.Event, docs: dict,
                 errors: list) -> None:
    try:
        docs[index] = part.run(events.put, stop)
    except BaseException as exc:  # noqa: BLE001 - raised again in the calling thread
        errors.append(exc)
        stop.set()  # the other places stop: the run cannot be completed
