"""The lecture's ops: the first plugin, registered through the `workbench.ops` entry point.

Importing this package registers every op file in it. Installed, it is `workbench.kernels`.
"""

from . import _interpreter_compat

_interpreter_compat.install()  # Triton 3.6's interpreter under NumPy >= 2.4 (see the module)

from . import add, cdist, gelu, matmul, matmul_gelu, mlp, quantize, scaled_mm, sleep, softmax  # noqa: E402,F401
