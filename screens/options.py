"""The TUI's run options are the engine's own `RunOptions` (workbench/engine/options.py: plain
data, no torch), built by the CLI; this module adds what the app changes per run (force) and the
pool of warm workers the app keeps for its whole life (started when a session opens, so the first
`r` finds a worker warming up or warm; closed when the app exits)."""

from __future__ import annotations

import dataclasses
from typing import Any

from workbench.engine.options import RunOptions


def for_run(options: RunOptions | None, force: bool = False) -> RunOptions:
    """The options of one run: the app's, with force set for a "Run anyway"."""
    options = options if options is not None else RunOptions()
    return dataclasses.replace(options, force=True) if force else options


def new_pool(options: RunOptions | None) -> Any:
    """The app's worker pool (engine/workers.py), spares as the engine decides for this machine."""
    from workbench.engine.plan import new_pool as engine_pool

    return engine_pool(options if options is not None else RunOptions())


def prestart(pool: Any, options: RunOptions | None, session: Any) -> None:
    """Start the worker the session's first run will use (engine/plan.py picks the same key).
    Raises what planning raises (a plugin that fails to load): the caller logs it."""
    from workbench.engine.plan import first_key

    key = first_key(session, options if options is not None else RunOptions())
    if key is not None:
        pool.prestart(key)
