"""The Ray actor of `--cluster ray` (engine/ray_cluster.py drives it): it runs `run_plan` on its
node, in a thread, and yields each event as it comes (a Ray streaming generator), then the
document. Everything it sends is a `(kind, payload, extra)` tuple: ("event", Event, None),
("doc", document, {sender's plugin path: this node's}), or ("error", one line, None) for a
WorkbenchError (a plugin that fails to load), which the driver raises again.

The actor is threaded (max_concurrency=2) so `cancel()` reaches it while `run` streams.
"""

from __future__ import annotations

import dataclasses
import queue
import shutil
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any, Iterator


ACTOR_PREFIX = "workbench-place-"


class PlaceActor:
    """One place of a Ray run (module docstring); made a Ray actor by `place_actor`."""

    def __init__(self) -> None:
        self.stop = threading.Event()

    def where(self) -> str:
        """This actor's place: "NODE_IP/cuda:N" (its GPU as Ray numbers it) or "NODE_IP/cpu"."""
        import ray

        node = ray.util.get_node_ip_address()
        gpus = ray.get_gpu_ids()
        return f"{node}/cuda:{int(gpus[0])}" if gpus else f"{node}/cpu"

    def cancel(self) -> None:
        self.stop.set()

    def run(self, run_plan: Any, session: Any, options: Any, bundle: Any) -> Iterator[tuple]:
        """run_plan: engine/plan.run_plan (pickled by reference: the node imports its own)."""
        from workbench.engine.multi.ship import unpack
        from workbench.errors import WorkbenchError

        folder = Path(tempfile.mkdtemp(prefix=PLUGINS_PREFIX)) if bundle.paths else None  # no plugins: no folder
        mapping = unpack(bundle, folder) if folder is not None else {}
        session = dataclasses.replace(session, plugins=tuple(mapping.get(str(p), str(p)) for p in session.plugins))
        options = dataclasses.replace(options, kernels=tuple(mapping.get(k, k) for k in options.kernels))
        events: queue.Queue = queue.Queue()
        box: dict = {}

        def target() -> None:
            try:
                box["doc"] = run_plan(session, on_event=lambda e: events.put(("event", e, None)), stop=self.stop,
                                      options=options)
            except WorkbenchError as exc:
                box["error"] = str(exc)
            finally:
                events.put(None)

        worker = threading.Thread(target=target, name="workbench-ray-place", daemon=True)
        worker.start()
        try:
            while (item := events.get()) is not None:
                yield item
            yield ("error", box["error"], None) if "error" in box else ("doc", box["doc"], mapping)
        finally:  # the plugin copies go with the run (a run cut short: once its thread has ended)
            if folder is not None:
                remove_when_done(worker, folder)


PLUGINS_PREFIX = "workbench-ray-plugins-"  # the node's copies of the sender's plugin files, one folder a run


def remove_when_done(thread: threading.Thread, folder: Path) -> None:
    """Remove `folder` once `thread` has ended: now if it has, else from a daemon thread that
    waits for it (a run's rows may still import the plugin files it holds)."""
    def remove() -> None:
        thread.join()
        shutil.rmtree(folder, ignore_errors=True)
    if thread.is_alive():
        threading.Thread(target=remove, name="workbench-ray-cleanup", daemon=True).start()
    else:
        remove()


def place_actor(ray: Any, num_gpus: int) -> Any:
    """A fresh actor handle: num_gpus (1, or 0 for the CPU), one CPU, threaded for cancel(),
    named "workbench-place-<hex>" (`ray list actors` shows whose it is; a test finds it to kill).
    `run` is a generator method, which Ray (2.9 and later) streams by default."""
    name = f"{ACTOR_PREFIX}{uuid.uuid4().hex[:12]}"
    return ray.remote(PlaceActor).options(num_gpus=num_gpus, num_cpus=1, max_concurrency=2, name=name).remote()
