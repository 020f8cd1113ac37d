"""Triton where it exists: op files use `jit` and `tl` from here so they import without Triton.

Where Triton is missing (macOS, a CPU wheel without it), `jit` returns a stand-in that raises
UnavailableError when launched, and the registry marks Triton implementations unavailable.
Whether kernels run interpreted is decided by TRITON_INTERPRET when the op file is imported
(Triton reads it at decoration time); the execution child sets it before importing kernels.
"""

from __future__ import annotations

from workbench.errors import UnavailableError

try:
    import triton
    import triton.language as tl
    jit = triton.jit
    HAVE_TRITON = True
except ImportError:  # pragma: no cover - exercised only where Triton is absent
    triton = None
    tl = None
    HAVE_TRITON = False

    def jit(fn=None, **_kwargs):
        def stand_in(f):
            class _Missing:
                fn = f

                def __getitem__(self, grid):
                    raise UnavailableError("Triton is not installed")
            return _Missing()
        return stand_in(fn) if fn is not None else stand_in


def next_power_of_2(n: int) -> int:
    """Smallest power of two >= n (Triton block sizes must be powers of two: P7)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()
