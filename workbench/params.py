"""Implementation parameters: what a value must be to replace a default (plain Python, no torch).

Types follow the default (an int replaces an int, ...). Integer tile parameters follow Triton's
rules: block sizes (names starting BLOCK) and num_warps are powers of two (tl.arange needs a
power-of-two extent; a CTA has 1-32 warps), a block at most 2^20 elements (MAX_BLOCK), GROUP_M
and num_stages are at least 1. Other
integer parameters (a plugin's own) are only type-checked.
"""

from __future__ import annotations

from typing import Any


# triton.language.core.TRITON_MAX_TENSOR_NUMEL: a block (tl.arange extent, a tile's elements)
# larger than this fails to compile ("numel (N) exceeds triton maximum tensor numel (1048576)"),
# on a GPU and under the interpreter; the rule knew only powers of two, so the editor and --check
# took BLOCK_SIZE 16777216 and the row failed when run (a new user's try).
MAX_BLOCK = 1 << 20


def param_problem(name: str | None, value: Any, default: Any) -> str | None:
    """Why `value` cannot replace parameter `name` whose default is `default`, or None."""
    if isinstance(default, bool):
        ok, want = isinstance(value, bool), "true or false"
    elif isinstance(default, int):
        ok, want = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(default, float):
        ok, want = isinstance(value, (int, float)) and not isinstance(value, bool), "a number"
    elif isinstance(default, str):
        ok, want = isinstance(value, str), "text"
    else:
        return None
    if not ok:
        return f"must be {want} (like its default {show(default)}), got {show(value)}"
    if isinstance(default, int) and not isinstance(default, bool) and name:
        if name.startswith("BLOCK") or name == "num_warps":
            if value < 1 or value & (value - 1):
                return f"must be a power of two (1, 2, 4, ...), got {value}"
            if name.startswith("BLOCK") and value > MAX_BLOCK:
                return (f"must be at most {MAX_BLOCK} (2^20, the most elements a Triton block holds: "
                        f"TRITON_MAX_TENSOR_NUMEL), got {value}")
            if name == "num_warps" and value > 32:
                return f"must be at most 32 (warps in a CTA), got {value}"
        elif name in ("GROUP_M", "num_stages") and value < 1:
            return f"must be at least 1, got {value}"
    return None


def show(value: object) -> str:
    """session.yaml_io.show, imported when a message needs it: yaml stays out of the TUI's first
    frame (screens/editing imports this module; issue #39)."""
    from workbench.session.yaml_io import show as show_value

    return show_value(value)
