"""Row variants of an implementation name: `<impl>+graph` times `<impl>` as a CUDA graph replay.

The suffix is not part of the registered name (CONTRACTS.md "Implementations"): a session lists
`pytorch+graph` beside `pytorch`, the row runs the `pytorch` implementation with the run's
`timing_mode` set to "graph" (engine/graph_mode.py), and its label keeps the suffix.
Torch-free: the session loader and the front end use it.
"""

from __future__ import annotations

GRAPH_SUFFIX = "+graph"
TIMING_MODES = ("eager", "graph")


def split_variant(name: str) -> tuple[str, str | None]:
    """(registered implementation name, timing mode the suffix asks for or None):
    "pytorch+graph" -> ("pytorch", "graph"), "triton" -> ("triton", None)."""
    if name.endswith(GRAPH_SUFFIX) and len(name) > len(GRAPH_SUFFIX):
        return name[: -len(GRAPH_SUFFIX)], "graph"
    return name, None


def base_name(name: str) -> str:
    """The registered implementation a (possibly suffixed) name runs."""
    return split_variant(name)[0]
