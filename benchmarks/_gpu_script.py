"""What the stand-alone GPU check scripts (benchmarks/even_check.py, binding_errors.py) share:
the torch module when it can drive a CUDA GPU, else one line on stderr saying why."""

from __future__ import annotations

import sys
from typing import Any


def cuda_torch(script: str) -> Any | None:
    """torch when it is importable and sees a CUDA GPU; None after one line on stderr naming
    `script` and what is missing (the caller exits 2)."""
    try:
        import torch
    except ImportError:
        print(f"{script}: needs torch (python from the project's .venv, or one with torch)", file=sys.stderr)
        return None
    if not torch.cuda.is_available():
        print(f"{script}: no CUDA GPU here", file=sys.stderr)
        return None
    return torch
