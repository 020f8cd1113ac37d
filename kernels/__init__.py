"""The lecture's ops: the first plugin, registered through the `workbench.ops` entry point.

Importing this package registers every op file in it. Installed, it is `workbench.kernels`.
"""

if __name__ == "kernels":
    # This folder is importable as `kernels` only when the checkout's root is on sys.path (python
    # run from the root): a probe for Hugging Face's `kernels` package (transformers'
    # is_kernels_available(), imported by liger_kernel) would then run every op file a second time
    # ("op 'add' is registered twice"). ImportError is the answer such a probe expects.
    raise ImportError("workbench's shipped ops are the package `workbench.kernels`, not `kernels` (this is "
                      f"the checkout's kernels/ folder: {__file__})", name=__name__)

from . import _interpreter_compat  # noqa: E402

_interpreter_compat.install()  # Triton 3.6's interpreter under NumPy >= 2.4 (see the module)

from . import add, cdist, gelu, matmul, matmul_gelu, mlp, quantize, scaled_mm, sleep, softmax  # noqa: E402,F401
