"""A Triton launch compiled ahead of time for sm_90, and its ptxas resources (tests only).

The cubin is Triton's own (its ptxas, which takes the PTX version its Triton writes), read with
cuobjdump -res-usage (workbench.ptx.resources); the test is skipped where cuobjdump is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def compile_sm90(launch: Any) -> Any:
    """Triton's compiled kernel of `launch` for sm_90 (stand-in tensors: no GPU needed)."""
    from workbench.ptx.triton_aot import build_source, compile_launch, resolve_target

    compiled, _ = compile_launch(build_source(launch, resolve_target("sm_90")), stand_in=True)
    return compiled


def resources(compiled: Any, folder: Path, name: str) -> Any:
    """The ptxas Resources (registers, spill_bytes, ...) of a compiled kernel's cubin, written to
    folder/name.cubin; skips the test without cuobjdump."""
    from workbench.ptx.resources import cubin_resources
    from workbench.ptx.tools import ToolError

    cubin = folder / f"{name}.cubin"
    cubin.write_bytes(compiled.asm["cubin"])
    try:
        (res,) = cubin_resources(cubin).values()
    except ToolError as exc:
        pytest.skip(str(exc))
    return res
