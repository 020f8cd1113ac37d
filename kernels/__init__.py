"""The lecture's ops: the first plugin, registered through the `workbench.ops` entry point.

Importing this package registers every op file in it. Installed, it is `workbench.kernels`.
"""

from . import gelu  # noqa: F401
