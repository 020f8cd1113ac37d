"""Keep Triton's CPU interpreter working with NumPy >= 2.4 (triton-lang/triton#9171).

The Triton 3.6 interpreter holds scalars as one-element arrays and turns them into Python ints
with `int(array)`, which NumPy 2.4 refuses ("only 0-dimensional arrays can be converted to
Python scalars"). Every kernel with a loop over a runtime bound (`for k in range(0, K, ...)`:
matmul, the looped softmax, cdist) then fails under TRITON_INTERPRET. Upstream fixed it after 3.6
(triton-lang/triton#9172); until then `install()` re-patches `__index__` the same way. It only
touches what the interpreter uses, does nothing when NumPy still converts, and is idempotent.
"""

from __future__ import annotations


def needed() -> bool:
    """Whether this NumPy refuses int() of a one-element 1-D array."""
    import numpy as np

    try:
        int(np.array([1]))
    except TypeError:
        return True
    return False


def install() -> bool:
    """Patch the interpreter's tensor `__index__` where needed; return whether it patched."""
    if not needed():
        return False
    try:
        from triton.runtime import interpreter
    except ImportError:  # no Triton: nothing to patch
        return False
    original = interpreter._patch_lang_tensor
    if getattr(original, "workbench_numpy_compat", False):
        return False

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        # Restored by the same scope, in reverse order, after the launch.
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patch_lang_tensor.workbench_numpy_compat = True
    interpreter._patch_lang_tensor = patch_lang_tensor
    return True
