"""`python -m workbench ...` is the `workbench` command."""

import sys

from workbench.trace import mark

mark("client: process up")  # WORKBENCH_TRACE only: the first mark of a command
from workbench.launch import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
