"""Preloaded by the forkserver (engine/workers.py): what every worker needs, imported once.

torch is imported here, in the zygote, without touching CUDA (forking a process that started
CUDA is unsafe: its children inherit a context they cannot use). Kernel modules are not: a
worker decides TRITON_INTERPRET first (engine/entry.py), then imports them.
"""

import torch  # noqa: F401

import workbench.engine.entry  # noqa: F401
