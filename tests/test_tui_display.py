"""Plain-Python parts of issue #17: short kernel names, chart legends and glyphs, the results
table's column order, the workspace's run bookkeeping, and where a session name leads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual_plotext.plot import Plot

from tui_helpers import fake_catalog, fake_session
from workbench.screens.panes import charts, kernel_names
from workbench.screens.model import Row, RunModel
from workbench.screens.workspace import Workspace

H200 = Path(__file__).parent.parent / "results" / "h200"

# (as torch.profiler names them on the H200, results/h200/*.json) -> what the table shows
REAL_NAMES = {
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >(int, "
    "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
    "std::array<char*, 3ul>)": "vectorized_elementwise_kernel<MulFunctor>",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)": "cunn_SoftMaxForward",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MaxOps<float>, "
    "unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::MaxOps<float>, unsigned int, "
    "float, 4, 4>)": "reduce_kernel<MaxOps>",
    "void at::native::vectorized_elementwise_kernel<4, at::native::tanh_kernel_cuda(at::TensorIteratorBase&)"
    "::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, "
    "std::array<char*, 2ul> >(int, at::native::tanh_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}"
    "::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)":
        "vectorized_elementwise_kernel<tanh_kernel_cuda>",
    "void gelu_vec_kernel<float, 4, 2>(float const*, float*, long)": "gelu_vec_kernel",
    "_gelu_kernel": "_gelu_kernel",
    "Memset (Device)": "Memset (Device)",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
}


@pytest.mark.parametrize("name", list(REAL_NAMES), ids=list(REAL_NAMES.values()))
def test_kernel_names_are_shortened_to_what_they_compute(name):
    assert kernel_names.short(name) == REAL_NAMES[name]


def test_every_recorded_h200_kernel_name_shortens_to_a_readable_line():
    names = {row["name"] for path in [*H200.glob("*.json"), *(Path(__file__).parent / "fixtures" / "h200").glob("*.json")] for r in _results(path)
             for row in ((r.get("profile") or {}).get("rows") or ()) if row["kind"] == "kernel"}
    assert len(names) > 20
    for name in names:
        text = kernel_names.short(name)
        assert text and "::" not in text and "(" not in text.replace("(Device)", ""), (name, text)
        assert len(text) <= max(60, len(name) // 2) or len(name) < 130, (name, text)


def test_mangled_names_are_demangled_and_cuts_keep_the_argument():
    import shutil

    if shutil.which("c++filt"):
        assert kernel_names.short("_Z17gelu_naive_kernelIfEvPKT_PS0_i") == "gelu_naive_kernel"
    assert kernel_names.short("_Znot a name(") in ("_Znot a name(",)  # never raises
    assert kernel_names.fit_name("vectorized_elementwise_kernel<MulFunctor>", 24) == "vectorized_…<MulFunctor>"
    assert kernel_names.fit_name("sm90_xmma_gemm_bf16bf16_bf16f32", 20) == "sm90_xmma_gemm_bf16…"


def test_profile_rows_that_shorten_alike_are_told_apart():
    from workbench.screens.panes.profile import display_names

    names = ["void k<at::native::BinaryFunctor<float, at::MulFunctor<float> > >(int)",
             "void k<at::native::AUnaryFunctor<float, at::MulFunctor<float> > >(int)", "aten::mul"]
    items = [{"kind": "kernel"}, {"kind": "kernel"}, {"kind": "operator"}]
    assert display_names(names, items, 40) == ["k<MulFunctor>", "k<MulFunctor> ·2", "aten::mul"]


def _row(label: str, sweep, median: float, intensity: float = 1.0, tflops: float = 1.0) -> Row:
    record = {"timing": {"median_ms": median, "p20_ms": median, "p80_ms": median},
              "traffic": {"intensity": intensity, "tflops": tflops}}
    return Row(label=label, impl=label, sweep_value=sweep, status="ok", record=record)


def test_each_series_has_its_own_glyph_and_the_legend_is_under_the_chart():
    rows = [_row(label, n, n / 1000) for label in ("manual", "pytorch", "triton") for n in (256, 1024, 4096)]
    plt = Plot()
    caption = charts.sweep(plt, rows, "time", "N").plain
    legend = caption.splitlines()[0]
    assert legend.split() == ["◆", "manual", "●", "pytorch", "▲", "triton"]
    plt.plotsize(60, 15)
    assert "manual" not in plt.build()  # no plotext legend over the data
    medians = charts.medians(Plot(), [_row("a", None, 1.0), _row("b", None, 2.0)], "time").plain
    assert "glyph median" in medians


def test_the_roofline_legend_names_each_implementation_once_with_its_sweep_values():
    points = [("manual", 256, 1.0, 1.0), ("manual", 4096, 2.0, 2.0), ("pytorch", 256, 1.0, 3.0),
              ("pytorch", 4096, 2.0, 4.0)]
    legend = charts.roofline(Plot(), points, 4000.0, None, "N").plain.splitlines()[0]
    assert legend.count("manual") == 1 and legend.count("pytorch") == 1
    assert "◆ manual N 256…4096" in legend and "● pytorch N 256…4096" in legend


def test_a_lone_roofline_point_gets_axes_the_right_way_up():
    """One point and no ceiling (the CPU): plotext drew both log axes upside down (0.0005 at the
    top, 0.0787 at the bottom); each now spans 4x either side of the point, rising upwards."""
    import re

    plot = Plot()
    plot.plotsize(60, 15)
    charts.roofline(plot, [("manual", None, 0.25, 0.0062)], None, None)
    lines = re.sub(r"\x1b\[[0-9;]*m", "", plot.build()).splitlines()
    ticks = [float(m.group(1)) for line in lines if (m := re.match(r"\s*([0-9.]+)┤", line))]
    assert len(ticks) >= 3 and ticks == sorted(ticks, reverse=True)  # largest at the top
    assert ticks[0] > 0.0062 > ticks[-1]
    xs = [float(x) for x in lines[-1].split()]
    assert xs == sorted(xs) and xs[0] < 0.25 < xs[-1]


def test_results_columns_come_in_priority_order_and_long_cells_are_cut():
    from workbench.screens.panes.timing import COLUMNS, FIXED_COLUMNS, row_detail, table_cells

    assert COLUMNS[:6] == ("impl", "status", "median", "spread", "GB/s", "% ceil") and COLUMNS[-1] == "notes"
    assert FIXED_COLUMNS == 4
    error = "RuntimeError: CUDA error: an illegal memory access was encountered at line 12"
    row = Row(label="cuda", impl="cuda", status="failed", error=error)
    assert table_cells(row)[1].endswith("…") and len(table_cells(row)[1]) <= 16
    assert error in row_detail(row).plain
    # a cancelled row says so in a word: "skipped: cancel…" pushed the spread out at 80 columns
    assert table_cells(Row(label="triton", impl="triton", status="skipped", error="cancelled"))[1] == "cancelled"


def test_workspace_delete_undo_copy_and_move_keep_results_with_their_runs():
    ws = Workspace()
    ws.catalog = fake_catalog()
    doc = {"results": [{"run_index": 0, "op": "gelu", "impl": "manual"},
                       {"run_index": 1, "op": "softmax", "impl": "manual"}]}
    ws.open(fake_session(), None, doc)
    assert set(ws.models) == {0, 1}
    removed = ws.delete_run(0)
    assert [r.op for r in ws.session.runs] == ["softmax"] and removed.records == (doc["results"][0],)
    assert ws.saved_results["results"] == [{**doc["results"][1], "run_index": 0}] and set(ws.models) == {0}
    ws.undo_delete()
    assert [r.op for r in ws.session.runs] == ["gelu", "softmax"] and ws.index == 0
    assert ws.saved_results["results"] == doc["results"]
    assert ws.duplicate_run(0) == 1 and [r.op for r in ws.session.runs] == ["gelu", "gelu", "softmax"]
    assert set(ws.models) == {0, 2}  # the copy has no results
    assert ws.move_run(2, -5) == 0 and [r.op for r in ws.session.runs] == ["softmax", "gelu", "gelu"]
    assert sorted((r["run_index"], r["op"]) for r in ws.saved_results["results"]) == [(0, "softmax"), (1, "gelu")]
    assert isinstance(ws.models[0], RunModel)
    assert ws.undo_delete() is None  # the one deletion was undone already


def test_a_shipped_name_finds_the_saved_copy_and_shipped_prefix_the_original(tmp_path):
    from workbench.errors import WorkbenchError
    from workbench.session.paths import resolve_session_path, shipped_original, shipped_path

    copy = tmp_path / "sessions" / "lecture06-gelu.yaml"
    assert resolve_session_path("lecture06-gelu", tmp_path) == shipped_path("lecture06-gelu")
    copy.parent.mkdir()
    copy.write_text(shipped_path("lecture06-gelu").read_text())
    assert resolve_session_path("lecture06-gelu", tmp_path) == copy
    assert resolve_session_path("lecture06-gelu.yaml", tmp_path) == copy
    assert resolve_session_path("shipped:lecture06-gelu", tmp_path) == shipped_path("lecture06-gelu")
    assert shipped_original(copy, tmp_path) == shipped_path("lecture06-gelu")
    assert shipped_original(shipped_path("lecture06-gelu"), tmp_path) is None
    with pytest.raises(WorkbenchError, match="shipped:NAME"):
        resolve_session_path("no-such-session", tmp_path)


@pytest.mark.slow
def test_the_session_path_lookup_imports_no_torch():
    import subprocess
    import sys

    code = ("import sys, workbench.session.paths; "
            "bad = [m for m in ('torch', 'workbench.registry') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
def test_check_of_a_shipped_name_uses_the_saved_copy(tmp_path):
    import os
    import subprocess
    import sys

    from workbench.session.paths import shipped_path

    data = tmp_path / "workbench"
    (data / "sessions").mkdir(parents=True)
    copy = data / "sessions" / "smoke-quick.yaml"
    copy.write_text(shipped_path("smoke-quick").read_text())
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "workbench", "--check", "smoke-quick"], env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0 and str(copy) in out.stdout, out
    out = subprocess.run([sys.executable, "-m", "workbench", "--check", "shipped:smoke-quick"], env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0 and str(shipped_path("smoke-quick")) in out.stdout, out


def _results(path: Path) -> list[dict]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return doc.get("results", []) if isinstance(doc, dict) else []


def test_an_empty_profile_pane_says_whether_a_run_is_bringing_profiles():
    """While a run with `profile` ticked was starting, the pane said to tick `profile` and run; before
    any run it told a user whose actions already had `profile` to tick it (a fresh user's try)."""
    from workbench.screens.panes.profile import summary

    assert summary(None) == "no profile yet: press r to run (rows are profiled when `profile` is among the run's actions)"
    assert summary(None, running=True).startswith("no profile yet: each row's appears here when the row finishes")


def test_each_check_line_in_the_log_names_its_input_set():
    """Three `compiled: check pass` lines a row read the same (first, special, timed inputs)."""
    from workbench import events as ev
    from workbench.screens.panes.log import describe

    key = (0, "compiled", None)
    lines = [describe(ev.Checked(key, {"passed": True, "input_set": "first", "sets_checked": sets}))[0]
             for sets in (["first"], ["first", "special"], ["first", "special", "timed"])]
    assert [line.rsplit("(", 1)[1] for line in lines] == ["first inputs)", "special inputs)", "timed inputs)"]
    failed = describe(ev.Checked(key, {"passed": False, "input_set": "special", "max_rel_err": 0.5,
                                       "sets_checked": ["first", "special"]}))
    assert failed[0].endswith("(special inputs)") and failed[1] == "error"


def test_a_legend_says_which_implementation_has_nothing_or_not_all_on_the_chart():
    """The caption counted dropped points; the legend still named an implementation whose
    every point was dropped, as if it were on the chart."""
    points = [("manual", 256, 1.0, 1.0), ("manual", 4096, 2.0, 2.0), ("pytorch", 256, 1.0, 0.0),
              ("pytorch", 4096, float("nan"), 4.0), ("triton", 256, 1.0, 3.0), ("triton", 4096, 2.0, None)]
    caption = charts.roofline(Plot(), points, 4000.0, None, "N").plain
    legend = caption.splitlines()[0]
    assert "◆ manual N 256…4096  " in legend + "  "
    assert "● pytorch N 256…4096 (not placed: zero/NaN)" in legend
    assert "▲ triton N 256…4096 (1 of 2 placed)" in legend
    assert "dropped 3 zero/NaN points" in caption
    rows = [_row("manual", 256, 1.0), _row("manual", 4096, 2.0), _row("pytorch", 256, None)]
    legend = charts.sweep(Plot(), rows, "time", "N").plain.splitlines()[0]
    assert "pytorch (not placed: zero/NaN)" in legend and "manual (" not in legend


def test_a_sweep_row_still_queued_or_running_is_not_a_point_dropped_for_zero_nan():
    """Mid-run the rows not finished have no figure yet: they are not "not placed: zero/NaN"
    (a new user read that for every queued row); a finished row without a figure still is."""
    rows = [_row("manual", 256, 1.0), _row("manual", 1024, 2.0),
            Row(label="manual", impl="manual", sweep_value=4096, status="running"),
            Row(label="pytorch", impl="pytorch", sweep_value=256, status="queued"),
            _row("triton", 256, None)]
    caption = charts.sweep(Plot(), rows, "time", "N").plain
    legend = caption.splitlines()[0]
    assert "manual (" not in legend and "pytorch (" not in legend
    assert "triton (not placed: zero/NaN)" in legend
    assert "dropped 1 zero/NaN point" in caption
