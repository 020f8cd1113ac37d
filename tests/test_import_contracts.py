"""The layers' import contracts, read statically from every import statement (module level and
inside functions) of workbench/, kernels/ and screens/ (installed as workbench.kernels and
workbench.screens):

- the core (workbench.*, less the front end and the shipped plugins) never imports textual or
  workbench.screens;
- the core never imports workbench.kernels (ops reach it through the registry's entry points);
- the front end (workbench.cli, workbench.screens) never imports torch or triton;
- the shipped kernels never import the TUI.

The subprocess tests (test_frontend_imports.py, test_tui.py) check what is loaded at run time;
this one fails on the import line itself, naming the module and the target."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"workbench": "workbench", "kernels": "workbench.kernels", "screens": "workbench.screens"}
FRONT_END = ("workbench.cli", "workbench.screens")
PLUGINS = ("workbench.kernels",)


def _under(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def import_graph() -> dict[str, set[str]]:
    """module -> every name it imports (for `from a import b`: a and a.b), relative imports resolved."""
    edges: dict[str, set[str]] = {}
    for folder, pkg in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = list(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
            module = ".".join([pkg, *parts])
            targets = edges.setdefault(module, set())
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    targets.update(a.name for a in node.names)
                elif isinstance(node, ast.ImportFrom):
                    if node.level:
                        base = module.split(".") if rel.name == "__init__" else module.split(".")[:-1]
                        base = base[:len(base) - (node.level - 1)]
                        name = ".".join(base + ([node.module] if node.module else []))
                    else:
                        name = node.module or ""
                    targets.add(name)
                    targets.update(f"{name}.{a.name}" for a in node.names)
    return edges


def violations(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, targets in sorted(edges.items()):
        core = not _under(module, *FRONT_END, *PLUGINS)
        for t in sorted(targets):
            if core and _under(t, "textual", "workbench.screens"):
                bad.append(f"core module {module} imports {t} (the core never imports the TUI)")
            if core and _under(t, "workbench.kernels"):
                bad.append(f"core module {module} imports {t} (ops reach the core through the registry)")
            if _under(module, *FRONT_END) and _under(t, "torch", "triton"):
                bad.append(f"front-end module {module} imports {t} (the front end never imports torch)")
            if _under(module, *PLUGINS) and _under(t, "textual", "workbench.screens"):
                bad.append(f"shipped op module {module} imports {t}")
    return bad


def test_the_layers_keep_their_import_contracts():
    edges = import_graph()
    assert len(edges) > 100 and "workbench.screens.app" in edges and "workbench.kernels.gelu" in edges
    assert violations(edges) == []


def test_a_broken_contract_is_named():
    edges = {"workbench.engine.plan": {"textual.app"}, "workbench.cli.main": {"torch"},
             "workbench.registry": {"workbench.kernels.gelu"}, "workbench.screens.app": {"textual.app"}}
    found = violations(edges)
    assert found == ["front-end module workbench.cli.main imports torch (the front end never imports torch)",
                     "core module workbench.engine.plan imports textual.app (the core never imports the TUI)",
                     "core module workbench.registry imports workbench.kernels.gelu (ops reach the core "
                     "through the registry)"]


def test_relative_imports_are_resolved():
    edges = import_graph()
    # screens/app.py imports its siblings relatively or absolutely; either way they resolve in-package
    assert any(t.startswith("workbench.screens.") for t in edges["workbench.screens.app"])
