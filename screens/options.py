"""The TUI's run options, built by the CLI without importing the engine (and so torch).

The engine's `RunOptions` is made from them in the run worker, after the first frame.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class AppOptions:
    """The fields of `workbench.engine.plan.RunOptions` that the command line sets."""

    device: str | None = None
    kernels: tuple[str, ...] = ()
    force: bool = False
    argv: tuple[str, ...] = ()
    session_sha256: str | None = None
    cache_dir: Path | None = None
    build_dir: Path | None = None

    def run_options(self, *, force: bool | None = None):
        """The engine's RunOptions (imports the engine: call from a worker)."""
        from workbench.engine.plan import RunOptions

        fields = asdict(self)
        if force is not None:
            fields["force"] = force
        return RunOptions(**fields)
