"""Whose code a session runs before anything is run (issue #36): a session's `plugins:` are
Python files that --check and the TUI import to learn their ops (in manifest_build, as the
user). They are loaded only when the user trusts the session: `--trust-plugins` (headless
commands), a yes in the TUI's question, or a session that came with workbench (the shipped
folder, the checkout's examples/). `--replay` runs the session's code by definition and needs
no flag. Torch- and textual-free.
"""

from __future__ import annotations

from pathlib import Path


def declared_plugins(path: str | Path) -> list[str]:
    """The `plugins:` entries of the session file at `path`, read as YAML with the session
    loader's limits (workbench/session/yaml_io.read_yaml: size, depth, aliases, integer digits;
    nothing is imported); [] when it has none or cannot be read (the session's own checks say
    why). A plain yaml.safe_load raised ValueError on an integer of over 4300 digits: --check
    crashed before the session's own check said so."""
    from workbench.session.yaml_io import read_yaml

    try:
        data, _marks, problems = read_yaml(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeError, ValueError):
        return []
    if problems:
        return []
    plugins = data.get("plugins") if isinstance(data, dict) else None
    if isinstance(plugins, str):
        plugins = [plugins]
    return [str(p) for p in plugins] if isinstance(plugins, list) else []


def shipped_with_workbench(path: str | Path) -> bool:
    """Whether the session at `path` came with workbench itself: a shipped session
    (workbench/sessions) or one of the checkout's examples/ (beside the workbench package)."""
    import workbench
    from workbench.session.paths import is_shipped

    examples = Path(workbench.__file__).resolve().parents[1] / "examples"
    return is_shipped(path) or Path(path).resolve().parent == examples


def untrusted_plugins(path: str | Path, trusted: bool) -> list[str]:
    """The plugins of the session at `path` that need the user's word before they are imported:
    none when `trusted` or the session came with workbench (shipped_with_workbench)."""
    if trusted or shipped_with_workbench(path):
        return []
    return declared_plugins(path)


def refusal(path: str | Path, plugins: list[str]) -> str:
    """The one line --check prints for a session whose plugins were not loaded."""
    return (f"{path}: not checked: its plugins: {', '.join(plugins)} are Python code that checking would import "
            "and run as you; pass --trust-plugins if you trust this session")
