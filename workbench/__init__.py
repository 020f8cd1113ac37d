"""workbench: a keyboard-driven terminal workbench for GPU kernel engineering.

The core (this package) is plain Python over torch; it never imports Textual. Ops reach the
registry through one discovery door (`workbench.registry.discover`): the `workbench.ops`
entry-point group and paths given with `--kernels`.
"""

__version__ = "0.2.0"  # the one place the version is written (pyproject reads it)
