"""`workbench --plot RESULTS.json -o FIG` (workbench/plot.py): rendered on CPU from committed
documents (an H200 GeLU replay, an H200 softmax sweep, a CPU smoke replay); without matplotlib one
line names the extra, exit 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from workbench import plot

ROOT = Path(__file__).resolve().parents[1]
GELU = ROOT / "results" / "history" / "h200" / "2026-12-01" / "replay" / "lecture06-gelu.json"
SWEEP = ROOT / "tests" / "fixtures" / "tui_softmax_sweep_h200.json"  # {"doc": ..., ...}
SMOKE = ROOT / "tests" / "fixtures" / "cpu_smoke_replay.json"


def _doc(path):
    data = json.loads(path.read_text())
    return data.get("doc", data)


def test_what_the_figure_shows_is_read_from_the_document():
    doc = _doc(GELU)
    assert set(plot.runs(doc)) == {0} and len(plot.runs(doc)[0]) == 6
    assert plot.run_title(plot.runs(doc)[0]) == "gelu · float32 · M=16384 N=16384"
    points, left_out = plot.roofline_points(doc)
    triton = next(p for p in points if p["label"] == "triton")
    row = next(r for r in doc["results"] if r["label"] == "triton")
    assert triton["intensity"] == pytest.approx(row["traffic"]["flops"] / row["traffic"]["bytes"])
    assert triton["flops_per_s"] == pytest.approx(row["traffic"]["flops"] / (row["timing"]["median_ms"] / 1e3))
    lim = plot.ceilings(doc, "float32")
    assert lim["copy"] == pytest.approx(doc["environment"]["ceilings"]["copy_gbps"] * 1e9)
    assert lim["matmul_peak"] == pytest.approx(67.0e12) and left_out == 0
    sweep = plot.runs(_doc(SWEEP))[0]
    assert plot.run_title(sweep) == "softmax · float32 · M=4096 · sweep over N"
    assert plot.ceilings(_doc(SMOKE), "float32") == dict.fromkeys(("copy", "matmul", "hbm_peak", "matmul_peak"))
    interpreted = {"results": [{**row, "timing": {**row["timing"], "timer": "interpreter"}}],
                   "environment": doc["environment"]}
    assert plot.roofline_points(interpreted) == ([], 1)  # host time: no place on a device roofline


@pytest.mark.parametrize("source, suffix", [(GELU, ".svg"), (SWEEP, ".png"), (SMOKE, ".svg")])
def test_figures_render_on_cpu(tmp_path, source, suffix):
    pytest.importorskip("matplotlib", reason="matplotlib is the optional `plot` extra: pip install 'kernel-workbench[plot]'")
    doc = _doc(source)
    out = plot.render(doc, tmp_path / f"fig{suffix}")
    data = out.read_bytes()
    if suffix == ".svg":
        text = data.decode()
        assert text.lstrip().startswith("<?xml") and "<svg" in text
        assert doc["environment"]["device"] in text and "roofline" in text  # titles kept as text (svg.fonttype)
        assert next(iter(plot.runs(doc)[0]))["op"] in text
    else:
        assert data.startswith(b"\x89PNG") and len(data) > 10_000


def test_nothing_to_plot_is_an_error(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is the optional `plot` extra")
    with pytest.raises(ValueError, match="nothing to plot"):
        plot.render({"results": [{"status": "failed", "timing": None}]}, tmp_path / "x.svg")


def test_cli_without_matplotlib_names_the_extra(tmp_path, monkeypatch, capsys):
    from workbench.cli.main import main

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert main(["--plot", str(SMOKE), "-o", str(tmp_path / "f.svg")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "pip install 'kernel-workbench[plot]'" in err and not (tmp_path / "f.svg").exists()


@pytest.mark.parametrize("argv, says", [
    (["--plot", "r.json"], "-o FIG with extension .svg, .png, .pdf; got no -o"),
    (["--plot", "r.json", "-o", "f.txt"], "got -o f.txt"),
    (["--plot", "r.json", "-o", "f.svg", "--format", "json"], "--format json is for data"),
])
def test_cli_refuses_a_figure_without_a_figure_path(capsys, argv, says):
    from workbench.cli.main import main

    assert main(argv) == 2
    assert says in " ".join(capsys.readouterr().err.split())


def test_cli_refuses_a_session_file(tmp_path, capsys):
    from workbench.cli.main import main

    assert main(["--plot", str(ROOT / "sessions" / "smoke.yaml"), "-o", str(tmp_path / "f.svg")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "a session file; --plot draws a results document" in err and "Expecting value" not in err
    assert f"workbench --replay {ROOT / 'sessions' / 'smoke.yaml'} -o RESULTS.json" in err


def test_plot_does_not_probe_the_device_it_does_not_use(tmp_path, capsys):
    """`--plot R.json -o f.svg --device cuda` failed on a CPU host: `this host has no GPU NVML can see`."""
    from workbench.cli.main import main

    doc = tmp_path / "r.json"
    doc.write_text('{"results": []}')
    main(["--plot", str(doc), "-o", str(tmp_path / "f.svg"), "--device", "cuda"])
    assert "NVML" not in capsys.readouterr().err


def test_cli_draws_a_json_lines_document(tmp_path, capsys):
    """`--plot g.jsonl` (what --format jsonl wrote) said only 'Extra data: line 2 column 1'."""
    pytest.importorskip("matplotlib", reason="matplotlib is the optional `plot` extra")
    from workbench.cli.main import main
    from workbench.results.journal import to_jsonl

    source = tmp_path / "smoke.jsonl"
    source.write_text(to_jsonl(_doc(SMOKE)))
    target = tmp_path / "f.svg"
    assert main(["--plot", str(source), "-o", str(target)]) == 0, capsys.readouterr().err
    assert "<svg" in target.read_text()


def test_cli_given_a_folder_suggests_a_figure_in_it(tmp_path, capsys):
    """`--plot R -o adir.svg` (a folder) suggested adir.svg/results.json, which --plot refuses."""
    from workbench.cli.main import main

    folder = tmp_path / "adir.svg"
    folder.mkdir()
    assert main(["--plot", str(SMOKE), "-o", str(folder)]) == 2
    assert f"is a folder; give a file path (e.g. {folder / 'figure.svg'})" in " ".join(capsys.readouterr().err.split())
