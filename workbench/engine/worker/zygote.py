"""Preloaded by the forkserver (engine/workers.py): what every worker needs, imported once.

torch is imported here, in the zygote, without touching CUDA (forking a process that started
CUDA is unsafe: its children inherit a context they cannot use), then what every worker imports
anyway (engine/worker/preload.py: the row runner; WORKBENCH_ZYGOTE_PRELOAD=all on a GPU host:
Triton, dynamo and Inductor too).
Kernel modules are not: a worker decides TRITON_INTERPRET first (engine/entry.py), then imports
them.

Its stdout and stderr go to the file named by WORKBENCH_ZYGOTE_LOG (engine/workers.py sets it
before the zygote starts): the zygote inherits the front end's terminal, and a forked child that
fails before its own redirect (engine/entry.py) printed its traceback over the TUI's screen
(seen on an H200 box: a spare's unpickling error across the Runs pane).
"""

import os

_LOG = os.environ.get("WORKBENCH_ZYGOTE_LOG")
if _LOG:
    try:  # in the starting process's private temp folder (engine/workers.py); never a planted link
        _fd = os.open(_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    except OSError:
        _fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(_fd, 1)
    os.dup2(_fd, 2)
    os.close(_fd)

import gc  # noqa: E402

# No collection while it imports: torch's import graph is millions of objects, and the
# collections it set off (gen 2 ones among them) took ~20% of torch's and the row runner's
# import on the 2-core CPU box (1.80 s against 1.42 s, medians of 4 alternating starts; dynamo
# and Inductor 2.9 against 2.2 s, means of 2). On again, after one collection and a freeze, before any fork.
gc.disable()
from workbench.trace import mark  # noqa: E402

mark("zygote: start")
import torch  # noqa: F401,E402

import workbench.engine.worker.entry  # noqa: F401,E402

mark("zygote: torch imported")
from workbench.engine.worker.preload import modules, preload  # noqa: E402

try:
    preload(os.environ)  # what every worker imports anyway, once, before any fork (engine/worker/preload.py)
finally:
    if not modules(os.environ):  # preload off; when it ran it collected and froze (one pass: torch's heap is large)
        gc.collect()
        gc.freeze()
    gc.enable()
