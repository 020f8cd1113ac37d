"""The `workbench` command line (CONTRACTS.md, "Command line"); `main` is the entry point.

    main.py     argument parsing, dispatch, the TUI door
    flags.py    every option declared once (OPTIONS): the parser, the mode checks, docs/options.md
    common.py   exit codes, Env, where data goes (-o or stdout), RunOptions from the arguments
    check.py    --check FILE
    replay.py   --replay FILE
    doctor.py   --list and --doctor
"""

from workbench.cli.main import main

__all__ = ["main"]
