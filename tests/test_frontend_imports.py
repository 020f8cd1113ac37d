"""The front end never imports torch (DESIGN.md "The layers"): --list, --check and the TUI's app
module read declarations from the manifest cache and probe the GPU through NVML; tensors,
kernels and devices live only in the workers. Each check runs in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each check runs in a fresh interpreter

PLUGIN = str(Path(__file__).parent / "plugins" / "my_ops.py")


def _fresh(code: str, tmp_path: Path) -> dict:
    """Run `code` in a fresh interpreter with XDG cache/data in tmp_path; it prints one JSON line."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "PATH": "/usr/bin:/bin:/usr/local/bin"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["--list", "--format", "json"], ["--list", "--kernels", PLUGIN],
                                  ["--check", "default-cpu"]])
def test_list_and_check_never_import_torch(tmp_path, argv):
    code = f"""
        import contextlib, io, json, sys
        from workbench.cli import main
        for attempt in ("cold manifest", "cached manifest"):
            with contextlib.redirect_stdout(io.StringIO()):
                code = main({argv!r})
            assert code == 0, (attempt, code)
        print(json.dumps({{"torch": "torch" in sys.modules, "triton": "triton" in sys.modules}}))
    """
    assert _fresh(code, tmp_path) == {"torch": False, "triton": False}


def test_the_tui_app_and_the_engine_planner_never_import_torch(tmp_path):
    code = """
        import json, sys
        import workbench.screens.app, workbench.screens.catalog, workbench.engine.plan
        from workbench.screens.catalog import load_catalog
        catalog = load_catalog((), "auto")
        assert "gelu" in catalog.ops and catalog.ops["gelu"].impl("triton") is not None
        print(json.dumps({"torch": "torch" in sys.modules}))
    """
    assert _fresh(code, tmp_path) == {"torch": False}


def test_the_tui_app_module_leaves_out_what_its_first_frame_does_not_show(tmp_path):
    """Issue #39: the first frame shows an empty Timing pane and the loading sidebar; the charts
    (plotext), session files (yaml), the diagnosis rules and the PTX tools are imported after it."""
    code = """
        import json, sys
        import workbench.cli.main, workbench.screens.app
        later = ("plotext", "textual_plotext", "yaml", "numpy", "workbench.diagnosis", "workbench.counters",
                 "workbench.ptx", "workbench.plugins.manifest")
        print(json.dumps(sorted(m for m in later if m in sys.modules)))
    """
    assert _fresh(code, tmp_path) == []


def test_the_manifest_is_rebuilt_when_a_plugin_file_changes(tmp_path):
    from workbench.plugins.manifest import declare

    plugin = tmp_path / "ops.py"
    source = Path(PLUGIN).read_text()
    plugin.write_text(source)
    first = declare([plugin], cache_dir=tmp_path)
    assert (tmp_path / "manifest").is_dir() and len(list((tmp_path / "manifest").glob("*.json"))) == 2  # the shipped kernels and the plugin
    plugin.write_text(source.replace("ReLU, elementwise over M x N", "ReLU (edited)"))
    second = declare([plugin], cache_dir=tmp_path)
    assert len(list((tmp_path / "manifest").glob("*.json"))) == 3
    assert first.op("relu").description != second.op("relu").description


def test_parameters_keep_their_declared_order_from_a_built_and_a_read_manifest(tmp_path):
    """A new user's try: `--list` showed matmul triton's params in their declared order right
    after the manifest was built, and sorted (BLOCK_K first) once read back from the cache file."""
    code = """
        import json
        from workbench.cli.doctor import inventory
        orders = []
        for _ in range(2):  # the first builds the manifest, the second reads the file
            data = inventory([], "auto")
            op = next(o for o in data["ops"] if o["name"] == "matmul")
            orders.append(list(next(i for i in op["impls"] if i["name"] == "triton")["params"]))
        print(json.dumps(orders))
    """
    built, read = _fresh(code, tmp_path)
    from workbench.registry import discover

    declared = list(discover().op("matmul").get_impl("triton").params)
    assert built == read == declared and declared != sorted(declared)
