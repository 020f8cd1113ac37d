"""`--cluster ray`: the rows run in Ray actors, one per GPU of the cluster (`num_gpus=1`), or one
CPU actor (`num_gpus=0`) when no row runs on CUDA. Optional: `pip install 'kernel-workbench[ray]'`.

Each actor (engine/ray_actor.py) runs `run_plan` on its share of the rows (engine/placement.py),
on its node, with the same warm workers, supervisor and fault isolation as a local run; plugin
files travel by content (engine/ship.py); events come back through a Ray streaming generator,
the run's Result events among them, so the journal, replay and the TUI see what a local run
sends. Nothing here schedules or transports beyond what Ray gives: Ray places the actors
(`num_gpus`), moves the objects and reports a lost actor.

Joining: `ray.init()` is called without an address when Ray is not initialised yet, so Ray
itself reads RAY_ADDRESS (a running cluster: `ray start --head`, a Slurm allocation, see
docs/engine.md) or starts a local cluster. A caller that already called `ray.init(...)` (a test
with `num_cpus=2`) is used as it is.

A lost actor (killed, its node gone, out of memory): the row it was running fails with one line
naming the loss, rows it had finished are kept, and the rest of its share is re-queued on a
fresh actor. Two actors in a row lost before finishing or starting any row fail the remaining
rows (the loss is not a row's doing).
A record's `device` names its place: "NODE_IP/cuda:N" (N: the GPU's index on its node, as Ray
numbers it) or "NODE_IP/cpu".
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable, Sequence

from workbench.engine.options import RunOptions
from workbench.engine.multi.placement import place_rows, rows_by_place
from workbench.engine.rows import Row
from workbench.engine.multi.ship import mapped_back, pack
from workbench.engine.multi.spread import Part
from workbench.errors import WorkbenchError
from workbench.events import Error, Event, Result, Started
from workbench.results.document import new_document
from workbench.session.model import Session

RAY_MISSING = "--cluster ray needs Ray on this host and every node: pip install 'kernel-workbench[ray]'"
MAX_EMPTY_ATTEMPTS = 2  # actors lost in a row without any row answered: the rest fail
STOP_POLL_S = 0.1


def import_ray() -> Any:
    """The ray module, initialised (module docstring). Raises WorkbenchError when it is missing."""
    try:
        import ray
    except ImportError as exc:
        raise WorkbenchError(RAY_MISSING) from exc
    if not ray.is_initialized():
        init_private(ray)
    return ray


def init_private(ray: Any, environ: Any = None) -> None:
    """ray.init for workbench: a local cluster it starts (no RAY_ADDRESS) listens on 127.0.0.1
    only, and what it writes (the auth token ~/.ray/auth_token, session files) is private to the
    user (umask 077 while it starts; the token chmod 600 after)."""
    import os
    from pathlib import Path

    environ = os.environ if environ is None else environ
    kwargs: dict[str, Any] = {"include_dashboard": False}
    if not environ.get("RAY_ADDRESS"):
        kwargs["_node_ip_address"] = "127.0.0.1"
    old = os.umask(0o077)
    try:
        ray.init(**kwargs)
    finally:
        os.umask(old)
    token = Path(environ.get("RAY_AUTH_TOKEN_PATH") or Path(environ.get("HOME") or Path.home()) / ".ray" / "auth_token")
    try:
        if token.is_file() and not token.is_symlink() and token.stat().st_uid == os.getuid():
            token.chmod(0o600)
    except OSError:
        pass


def ray_parts(session: Session, rows: Sequence[Row], options: RunOptions, plugin_paths: Sequence[str],
              run_part: Callable[..., dict]) -> list[Part]:
    """One Part per actor: one per cluster GPU when any row runs on CUDA, else one CPU actor;
    each actor calls run_part (engine/plan.run_plan) on its node. Raises WorkbenchError when
    CUDA rows meet a cluster without GPUs."""
    ray = import_ray()
    on_cuda = any(r.device.startswith("cuda") for r in rows)
    gpus = int(ray.cluster_resources().get("GPU", 0))
    if on_cuda and gpus < 1:
        raise WorkbenchError("--cluster ray: the session's rows run on CUDA but the Ray cluster has no GPU "
                             "(give settings.device: cpu, or join a cluster with GPUs through RAY_ADDRESS)")
    places = gpus if on_cuda else 1
    shares = rows_by_place(rows, place_rows(rows, places), places)
    bundle = pack(list(plugin_paths))
    return [RayPart(ray, session, share, options, bundle, ab=index == 0, run_part=run_part).part()
            for index, share in enumerate(shares) if share or index == 0]


class RayPart:
    """One place of the cluster: an actor, replaced when lost, running its rows."""

    def __init__(self, ray: Any, session: Session, rows: list[Row], options: RunOptions, bundle, ab: bool,
                 run_part: Callable[..., dict]):
        self.ray, self.session, self.rows, self.options, self.bundle, self.ab = ray, session, rows, options, bundle, ab
        self.run_part = run_part
        self.on_cuda = any(r.device.startswith("cuda") for r in rows)
        self.records: dict = {}
        self.holder = Part(device="ray", rows=rows, run=self.run)

    def part(self) -> Part:
        return self.holder

    def run(self, on_event: Callable[[Event], None], stop: threading.Event) -> dict:
        doc, empty = None, 0
        while self._pending() and not stop.is_set() and empty < MAX_EMPTY_ATTEMPTS:
            before = len(self.records)
            doc = self._attempt(on_event, stop) or doc
            empty = empty + 1 if len(self.records) == before else 0
        for row in self._pending():  # lost twice without progress, or cancelled
            why = "cancelled" if stop.is_set() else f"Ray lost {MAX_EMPTY_ATTEMPTS} actors before this row ran"
            self._fail(row, why, on_event, status="skipped" if stop.is_set() else "failed")
        return self._document(doc)

    def _pending(self) -> list[Row]:
        return [r for r in self.rows if r.key not in self.records]

    def _attempt(self, on_event, stop) -> dict | None:
        """One actor for the pending rows; its document, or None when it was lost."""
        from workbench.engine.multi.ray_actor import place_actor

        pending = self._pending()
        actor = place_actor(self.ray, num_gpus=1 if self.on_cuda else 0)
        label = self.ray.get(actor.where.remote())
        self.holder.device = label
        here = {r.key: ("cuda:0" if r.device.startswith("cuda") else r.device) for r in pending}
        sub = dataclasses.replace(self.options, devices=None, cluster=None, rows_here=here, ab=self.ab,
                                  cache_dir=None, build_dir=None, trace_dir=None, report_dir=None,
                                  done={k: v for k, v in self.options.done.items() if k in here})
        watcher = _StopWatcher(stop, actor)
        in_flight = None
        try:
            for ref in actor.run.remote(self.run_part, self.session, sub, self.bundle):
                kind, payload, extra = self.ray.get(ref)
                if kind == "error":
                    raise WorkbenchError(payload)
                if kind == "doc":
                    return _relabel_document(payload, label, extra)
                event = _relabel_event(payload, label)
                if isinstance(event, Started):
                    in_flight = event.row
                elif isinstance(event, Result):
                    self.records[event.row], in_flight = event.record, None
                on_event(event)
        except self.ray.exceptions.RayError as exc:  # the actor (or its node) is gone
            row = next((r for r in pending if r.key == in_flight), None)
            if row is not None and not stop.is_set():
                self._fail(row, f"Ray actor lost while running this row: {_first_line(exc)}", on_event)
        finally:
            watcher.close()
            self.ray.kill(actor, no_restart=True)
        return None

    def _fail(self, row: Row, message: str, on_event, status: str = "failed") -> None:
        record = row.record()
        record.update(status=status, error=message, device=self.holder.device)
        if status == "failed":
            on_event(Error(row.key, message))
        self.records[row.key] = record
        on_event(Result(row.key, record))

    def _document(self, doc: dict | None) -> dict:
        """The last actor's document with every row this place answered, in its order."""
        if doc is None:
            doc = new_document({"session": self.session.name}, {"device": None})
        doc = dict(doc)
        doc["results"] = [self.records[r.key] for r in self.rows]
        return doc


def _relabel_event(event: Event, label: str) -> Event:
    if isinstance(event, Started):
        return dataclasses.replace(event, device=_place(event.device, label))
    if isinstance(event, Result):  # a new record: the event's own dict is left as it came
        return dataclasses.replace(event, record={**event.record, "device": _place(event.record.get("device"), label)})
    return event


def _relabel_document(doc: dict, label: str, mapping: dict) -> dict:
    for record in doc["results"]:
        if "/" not in str(record.get("device")):
            record["device"] = _place(record.get("device"), label)
    for plugin in doc["provenance"].get("plugins") or []:
        plugin["path"] = mapped_back([plugin.get("path")], mapping)[0]
    return doc


def _place(device: Any, label: str) -> str:
    """The record's device as its place: the actor's label for its GPU, NODE_IP/cpu for the CPU."""
    node = label.split("/", 1)[0]
    return label if str(device).startswith("cuda") else f"{node}/{device}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class _StopWatcher:
    """Tells the actor to cancel when the run's stop flag is set (its run_plan stops in 3 s)."""

    def __init__(self, stop: threading.Event, actor: Any):
        self.stop, self.actor, self.done = stop, actor, threading.Event()
        self.thread = threading.Thread(target=self._watch, name="workbench-ray-stop", daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.done.wait(STOP_POLL_S):
            if self.stop.is_set():
                try:
                    self.actor.cancel.remote()
                except Exception:  # noqa: BLE001 - the actor is gone already
                    pass
                return

    def close(self) -> None:
        self.done.set()
