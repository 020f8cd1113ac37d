"""The `workbench` command's entry point (the console script and `python -m workbench`).

A TUI start on a terminal goes to this user's warm TUI process first (tui_client.py), before
anything but the standard library is imported; every other command line, and a TUI start that
process cannot serve, runs `cli.main` here.
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    """Run the command line of sys.argv; returns the exit code."""
    from workbench import tui_client

    code = tui_client.attach(sys.argv[1:], os.environ)
    if code is not None:
        return code
    from workbench.cli.main import main as run

    return run()
