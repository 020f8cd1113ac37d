"""Build manifests of plugin sources (run by workbench/plugins/manifest.py in a fresh interpreter).

stdin: a JSON list of {"key", "load", "entry_point", "describe"} in load order; stdout: one JSON
line, source key -> {"version", "ops": [...], "error": null | "one line"} for the sources to
describe (the others are loaded first because later ones may extend their ops). Importing the sources
imports torch; nothing here runs a kernel. Each source's manifest holds what it added to the
registry (new ops, and implementations added to an op an earlier source declared).
"""

from __future__ import annotations

import json
import sys

from workbench.plugins.manifest import MANIFEST_VERSION, describe_registry
from workbench.registry import REGISTRY, discover, op_entry_points


def _load(source: dict) -> None:
    if source["entry_point"]:
        (ep,) = [e for e in op_entry_points() if e.name == source["load"]]
        # the registry's own loader, so loaded_sources and errors read as discover's
        from workbench.registry import _load_once

        _load_once(REGISTRY, source["key"], ep.load)
    else:
        discover([source["load"]], entry_points=False)


def main() -> int:
    out = {}
    for source in json.loads(sys.stdin.read()):
        before = {name: set(op.impls) for name, op in REGISTRY.ops.items()}
        try:
            _load(source)
            if not source["describe"]:
                continue
            out[source["key"]] = {"version": MANIFEST_VERSION, "ops": describe_registry(REGISTRY, before),
                                  "error": None}
        except Exception as exc:  # WorkbenchError names the plugin; anything else is a bug of ours
            out[source["key"]] = {"version": MANIFEST_VERSION, "ops": [], "error": str(exc).splitlines()[0]}
        except SystemExit as exc:  # a plugin that exits while imported: this child would end with no word of which
            out[source["key"]] = {"version": MANIFEST_VERSION, "ops": [],
                                  "error": f"{source['key']}: called sys.exit({exc.code!r}) while being imported "
                                           "(a plugin module must not exit)"}
    sys.stdout.write("\n" + json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
