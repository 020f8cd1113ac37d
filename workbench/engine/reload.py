"""Parent side of an in-place plugin reload: watch mode's warm workers follow an edit.

A WorkerKey names the plugin files' content (protocol.WorkerKey.sources), so after an edit no
idle worker matches, and the next run would pay a fresh worker (a fork from the zygote, the
imports, CUDA's start: seconds on a GPU box) and, before that, a manifest subprocess (a Python
and torch start). Instead, after a save, `reload_idle(pool, wanted)` asks every idle worker of
the pool to re-import its changed plugin files in place (engine/reload_worker.py): each one
that did is filed under its new digest (a run then takes it as any warm worker), one that
failed to import the new text keeps serving its old key, and one that cannot (a plugin file
added or removed, a file saved again meanwhile, no answer within RELOAD_S) is retired, so
the run starts a fresh one as before. The manifests of the edited sources come back with the
answer: `reload_for_watch` hands them to workbench/plugins/manifest.py's `declare`.

The trade-off against a fresh process (docs/PLUGINS.md, "Watch mode"): a reload re-creates
what the plugin registered (ops, implementations, references) from a new module object, and
the worker still resets its state and probes its health after every row (engine/worker_state.py);
what a plugin's import did elsewhere in the process (another module's globals, a backend it
registered, an environment switch: the latter is caught by the probe) stays. `--strict` starts
a fresh process per row and reloads nothing.
"""

from __future__ import annotations

import dataclasses
import pickle
import time
from typing import Any, Callable, Iterable

from workbench.engine.protocol import Reload, Reloaded
from workbench.engine.supervisor import wait_answer
from workbench.engine.pool import STARTS, WorkerPool, WorkerProcess

RELOAD_S = 60.0  # an import that takes longer than this (a plugin compiling at import) is given up


def reload_idle(pool: WorkerPool, wanted: set[str] | frozenset[str] = frozenset(),
                clock: Callable[[], float] = time.monotonic) -> dict[str, dict] | None:
    """Reload every idle worker of `pool` (see the module docstring); returns the manifests of
    the `wanted` source keys from the first worker that gave them all, or None."""
    with pool.lock:
        workers = [w for w in pool.idle.values() if w.alive()]
        for worker in workers:
            del pool.idle[worker.key]
    job = pickle.dumps(Reload(tuple(sorted(wanted))))
    for worker in workers:
        worker.give(job)
    found = None
    deadline = clock() + RELOAD_S
    for worker in workers:
        answer = _answer(worker, deadline, clock)
        if answer is None or not (answer.ok or answer.keep):
            pool.retire(worker)
            continue
        if answer.ok:
            worker.key = dataclasses.replace(worker.key, sources=answer.sources)
            STARTS["reloaded" if answer.reloaded else "reload_unchanged"] += 1
        else:
            STARTS["reload_failed"] += 1
        pool.give_back(worker)
        failed = any(m.get("error") for m in answer.manifests.values())
        if found is None and (failed or set(wanted) <= set(answer.manifests)):
            found = dict(answer.manifests)  # a failed import: its error alone
    return found


def _answer(worker: WorkerProcess, deadline: float, clock: Callable[[], float]) -> Reloaded | None:
    _answered, payload = wait_answer(worker, deadline, clock)
    return payload if isinstance(payload, Reloaded) else None


def reload_for_watch(pool: WorkerPool | None, describe: Iterable[str]
                     ) -> Callable[[list[Any], set[str]], dict[str, dict] | None] | None:
    """After a save: reload the pool's idle workers now (`reload_idle`, describing the source keys
    `describe`); returns a `build` for workbench.plugins.manifest.declare that serves their manifests, or
    None (no pool, no idle worker, no answer: declare's manifest subprocess, as before)."""
    if pool is None or not pool.idle:
        return None
    found = reload_idle(pool, set(describe))
    if found is None:
        return None
    failed = any(m.get("error") for m in found.values())  # the error is the answer
    return lambda _sources, wanted: found if failed or wanted <= set(found) else None
