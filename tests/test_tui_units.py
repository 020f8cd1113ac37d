"""The TUI's plain-Python parts: editing runs, folding events, chart data, formatting, results files."""

from __future__ import annotations

import math

import pytest
from textual_plotext.plot import Plot

from tui_helpers import fake_catalog, fake_session
from workbench import events as ev
from workbench.screens import editing, fmt
from workbench.screens.panes import charts
from workbench.screens.model import Row, RunModel
from workbench.screens.panes.ptx_view import PtxView
from workbench.screens.sessions_io import merge_results
from workbench.screens.workspace import Workspace
from workbench.session.model import ImplRef, Sweep

GELU = fake_catalog().op("gelu")


def test_a_new_run_ticks_what_can_run_here():
    """On a CPU machine a new gelu run was `impls: all`: its CUDA implementations, shown unticked,
    ran as `unavailable` rows listed first (a new user's try). Where everything can run: all."""
    cpu = fake_catalog(gpu=False).op("gelu")
    run = editing.default_run(cpu)
    assert [ref.name for ref in run.impls] == ["manual", "pytorch", "compiled", "triton"]
    assert editing.selected(run, cpu) == ["manual", "pytorch", "compiled", "triton"]
    assert editing.default_run(GELU).impls is None  # the H200: every one, as `all`


def test_a_swept_field_is_named_in_the_run_list_not_given_a_value_the_run_never_takes():
    """`add 2x512 f16 ↔N` for a run sweeping N over 7, 64, 128: 512 was the op's default
    (a new user's second try)."""
    from dataclasses import replace

    run = replace(editing.default_run(GELU), shape={"M": 2}, sweep=Sweep(("N",), (7, 64, 128)))
    assert editing.title(run, GELU).startswith("gelu 2xN f32 ↔N")  # it said `gelu 2x16384`
    assert editing.label(run, GELU) == "gelu 2xN float32 sweep N"
    assert editing.title(replace(run, sweep=None, shape={"M": 2, "N": 8}), GELU).startswith("gelu 2x8 f32")


def test_edit_shape_params_sweep_and_impls():
    run = editing.default_run(GELU)
    run = editing.with_shape(run, GELU, {"M": "64", "N": "128"}, "float16")
    assert dict(run.shape) == {"M": 64, "N": 128} and run.dtype == "float16"
    for typed in ("x", "2.5", "1e6", "1,044", "1_000", ""):  # --check's words, the text as typed
        with pytest.raises(ValueError, match=f'^N: must be a positive integer, got "{typed}"$'):
            editing.with_shape(run, GELU, {"M": "64", "N": typed}, "float32")
    with pytest.raises(ValueError, match=r'^M: must be at most 2\^63-1 .*, got "9999'):
        editing.with_shape(run, GELU, {"M": "9" * 5000, "N": "8"}, "float32")  # past int()'s digits
    assert editing.with_shape(run, GELU, {"M": " 64 ", "N": "0128"}, "float32").shape == {"M": 64, "N": 128}
    for bad in ("-3", "0"):  # the words --check uses ("must not be negative" before, for -3 only)
        with pytest.raises(ValueError, match=f"M: must be a positive integer, got {bad}$"):
            editing.with_shape(run, GELU, {"M": bad, "N": "8"}, "float32")
    # 0 is the op's to refuse: the sleep op takes sleep_ms 0 (its spec's NON_NEGATIVE), as --check does
    from workbench.screens.catalog import OpInfo

    sleep = OpInfo("sleep", "host sleep", {"sleep_ms": 1}, ("float32",), "float32", (),
                   validate=lambda shape, dtype: None)
    nap = editing.default_run(sleep)
    assert editing.with_shape(nap, sleep, {"sleep_ms": "0"}, "float32").shape == {"sleep_ms": 0}
    run = editing.with_impls(run, GELU, ["triton", "manual"])
    assert [r.name for r in run.impls] == ["manual", "triton"]  # the op's order
    run = editing.with_params(run, GELU, "triton", {"BLOCK_SIZE": "256", "num_warps": "4"})
    assert run.impls[1] == ImplRef("triton", {"BLOCK_SIZE": 256})  # defaults are not stored
    assert editing.parse_sweep("N", "256, 1024 4096", GELU) == Sweep(("N",), (256, 1024, 4096))
    assert editing.parse_sweep(" ", "1", GELU) is None
    with pytest.raises(ValueError, match=r'sweep.params\[0\]: "K" is neither a shape field of gelu \(M, N\)'):
        editing.parse_sweep("K", "1", GELU)
    assert editing.with_actions(run, ["ptx", "check"]).actions == ("check", "ptx")


def test_sweep_values_and_params_the_kernel_cannot_take_are_refused_while_editing():
    """A first user swept M over '1,x,-2' and BLOCK_SIZE 0: both ran and failed row by row."""
    run = editing.default_run(GELU)
    with pytest.raises(ValueError, match=r'^sweep.values\[1\]: must be a positive integer, got "x"; sweep.values\[2\]: must be a positive '
                                         r'integer, got -2$'):
        editing.parse_sweep("M", "1, x, -2", GELU)
    # as typed, read as the session file would read it: `1e6` is text there (it was 1000000.0 here)
    with pytest.raises(ValueError, match=r'^sweep.values\[0\]: must be a positive integer, got "1e6"$'):
        editing.parse_sweep("M", "1e6", GELU)
    with pytest.raises(ValueError, match=r"^sweep.values\[1\]: must be a power of two \(1, 2, 4, ...\), got 0$"):
        editing.parse_sweep("BLOCK_SIZE", "256, 0", GELU)
    with pytest.raises(ValueError, match="triton BLOCK_SIZE: must be a power of two"):
        editing.with_params(run, GELU, "triton", {"BLOCK_SIZE": "0", "num_warps": "4"})
    with pytest.raises(ValueError, match="at most 32"):
        editing.with_params(run, GELU, "triton", {"BLOCK_SIZE": "256", "num_warps": "64"})


def test_impls_all_stays_all_until_changed():
    run = editing.default_run(GELU)
    assert run.impls is None
    assert editing.with_impls(run, GELU, [i.name for i in GELU.impls]) is run
    assert editing.row_count(editing.with_impls(run, GELU, ["manual"]), GELU) == 1


def test_workspace_drafts_join_the_session_when_run():
    ws = Workspace()
    ws.catalog = fake_catalog()
    ws.open(fake_session(), None, None)
    assert (ws.index, ws.run.op) == (0, "gelu")
    ws.pick_op("gelu")  # a new run of gelu: a draft
    assert ws.index is None and ws.current_id == "op:gelu"
    ws.edit(editing.with_shape(ws.run, GELU, {"M": "8", "N": "8"}, "float32"))
    assert len(ws.session.runs) == 2  # drafts are not in the session yet
    one_run, index = ws.begin_run()
    assert index == 2 and len(ws.session.runs) == 3 and one_run.runs == (ws.session.runs[2],)
    ws.pick_run(0)
    ws.edit(editing.with_actions(ws.run, ["ptx"]))
    assert ws.session.runs[0].actions == ("ptx",)  # a run in the session is edited in place


def test_model_folds_events_in_order():
    model = RunModel()
    row = (0, "triton", None)
    model.apply(ev.Started(row, "gelu", "triton", "8x8 float32", "cpu"))
    model.apply(ev.Samples(row, (1.0, 2.0), "interpreter"))
    model.apply(ev.Samples(row, (3.0,), "interpreter"))
    model.apply(ev.Error(row, "boom"))
    assert model.rows[("triton", None)].samples_ms == [1.0, 2.0, 3.0]
    model.apply(ev.Result(row, {"impl": "triton", "label": "triton", "sweep_value": None,
                                "status": "failed", "error": "boom", "timing": None}))
    assert model.rows[("triton", None)].status == "failed"
    model.finish({"environment": {"device": "cpu"}, "results": []})
    assert model.finished and model.environment == {"device": "cpu"}


def test_log_axes_drop_zero_and_nan_points_and_say_so():
    xs, ys, dropped = charts.keep_points([1, 2, 3, 4], [1.0, 0.0, math.nan, 8.0], False, True)
    assert (xs, ys, dropped) == ([1, 4], [1.0, 8.0], 2)
    assert charts.wants_log([1, 1000]) and not charts.wants_log([1, 2, 0])
    rows = [_row("triton", n, median) for n, median in ((256, 0.01), (4096, 0.0), (65536, 1.0))]
    caption = charts.sweep(Plot(), rows, "time", "N")
    assert "log x and y" in caption and "dropped 1 zero/NaN point" in caption


def test_throughput_metric_rescales_the_engines_figure():
    row = _row("triton", None, 2.0, gbps=100.0)
    assert charts.metric_value(row, 1.0, "gbps") == pytest.approx(200.0)
    assert charts.metric_value(row, 0.0, "gbps") is None


def test_formatting():
    assert fmt.ms(0.0123) == "12.3 µs" and fmt.ms(None) == "-" and fmt.ms(12_345) == "12.3 s"
    assert fmt.spread(0.99, 1.01, 1.0) == "±1%"
    assert fmt.spread(0.703, 35.0, 0.706) == "-0.42/+4858%"  # skewed: the median at the low edge
    assert fmt.spread(0.9, 1.3, 1.0) == "-10/+30%" and fmt.spread(0.999, 1.004, 1.0) == "±0.25%"
    assert fmt.size_bytes(2 * 1024 ** 3) == "2 GiB" and fmt.si(2_415_919_104) == "2.42 G"
    assert fmt.timer("perf_counter") == "perf_counter (CPU)"
    assert fmt.timer("interpreter") == "interpreter (not GPU speed)"
    assert fmt.check({"passed": False, "max_rel_err": 0.03}) == "FAIL (rel 0.03)"


def test_ptx_view_jumps_and_wraps():
    view = PtxView("a\nb\nc\nd", None, {"ld_global": [1, 3], "st_global": [2]})
    assert [view.jump(1) for _ in range(4)] == [1, 2, 3, 1]
    assert view.jump(-1) == 3
    view.kind = "st_global"
    assert view.jump(1) == 2 and view.jump(1) == 2


def test_results_merge_run_by_run():
    old = {"results": [{"run_index": 0, "impl": "a"}, {"run_index": 1, "impl": "b"}]}
    new = {"environment": {"device": "x"}, "results": [{"run_index": 0, "impl": "c"}]}
    merged = merge_results(old, new, 1)
    assert [(r["run_index"], r["impl"]) for r in merged["results"]] == [(0, "a"), (1, "c")]
    assert merged["environment"] == {"device": "x"}


def _row(label, sweep, median, gbps=None) -> Row:
    record = {"timing": {"median_ms": median}, "traffic": {"gbps": gbps}}
    return Row(label=label, impl=label, sweep_value=sweep, status="ok", record=record)


def test_timing_notes_say_when_the_median_did_not_converge():
    from workbench.screens.panes.timing import notes

    flag = "median not converged: estimated error 40% > target 0.5% after 7 samples (rep_ms 100 reached)"
    assert "not converged" in notes({"flush_l2": True}, [flag])
    assert "not converged" not in notes({"flush_l2": True}, [])
    contended = "CPU contended: while timing, the worker's threads waited 0.58 s for a core per second (...)"
    assert notes({"flush_l2": True}, [contended, flag]) == "CPU contended, not converged"  # the TUI hid it


def test_without_a_gpu_new_runs_start_cpu_sized():
    """A first user's ctrl+o of a new file offered add at 16384x16384 on a CPU-only machine."""
    import torch

    from workbench.screens.catalog import CPU_SHAPE_CAP, load_catalog

    catalog = load_catalog(device="cpu")
    assert dict(catalog.ops["gelu"].defaults) == {"M": CPU_SHAPE_CAP, "N": CPU_SHAPE_CAP}
    assert dict(catalog.ops["sleep"].defaults) == {"sleep_ms": 50}   # small already: unchanged
    if torch.cuda.is_available():
        assert load_catalog(device="auto").ops["gelu"].defaults["M"] == 16384


def test_a_row_is_queued_until_its_started_event():
    """PTX (built ahead) and log lines reach a row before it starts: it is not 'running' yet."""
    from workbench import events as ev
    from workbench.screens.model import RunModel

    model = RunModel()
    key = (0, "triton", None)
    model.apply(ev.Log(key, "PTX of 1 kernel(s)", "info"))
    assert model.row(key).status == "queued"
    model.apply(ev.Started(key, "gelu", "triton", "64x64 float32", "cpu"))
    assert model.row(key).status == "running"


def test_log_line_of_a_ptx_record_without_kernels_says_why():
    from workbench.screens.panes.log import describe

    key = (0, "triton", None)
    assert describe(ev.Ptx(key, {"kernels": [{"name": "k"}], "notes": ["a note"]}))[0].endswith("PTX of 1 kernel(s)")
    note = "ahead-of-time compile failed at /w/rmsnorm.py:139: CompilationError: NameError('x')"
    text, level = describe(ev.Ptx(key, {"kernels": [], "notes": [note]}))
    assert "no PTX: ahead-of-time compile failed at /w/rmsnorm.py:139" in text and level == "warning"


def test_thin_keeps_every_occupied_cell_and_the_outliers():
    import random

    rng = random.Random(7)
    ys = [1.0 + rng.gauss(0, 0.01) for _ in range(60_000)]
    ys[12_345], ys[50_000] = 5.0, 0.2  # a slow and a fast outlier
    xs, kept = charts.thin(ys, cells=(100, 40))
    assert len(xs) == len(kept) and len(xs) <= 100 * 40 and xs == sorted(xs)
    assert all(ys[x - 1] == y for x, y in zip(xs, kept))  # real samples at their own x
    assert {12_346, 50_001} <= set(xs)

    def cells(points):
        lo, hi = min(ys), max(ys)
        return {((x - 1) * 100 // len(ys), int((y - lo) / (hi - lo) * 39)) for x, y in points}
    assert cells(zip(xs, kept)) == cells(zip(range(1, len(ys) + 1), ys))


def test_thin_leaves_short_and_flat_series_whole():
    assert charts.thin([3.0, 1.0, 2.0]) == ([1, 2, 3], [3.0, 1.0, 2.0])
    xs, ys = charts.thin([2.0] * 10_000, cells=(50, 10))
    assert len(xs) == 50 and set(ys) == {2.0}


def test_a_cancelled_run_keeps_earlier_records_of_the_rows_it_left_unmeasured():
    from workbench.screens.sessions_io import KEPT_FLAG

    def rec(impl, status="ok", error=None, median=1.0, shape=None, flags=()):
        return {"run_index": 1, "op": "gelu", "impl": impl, "label": impl, "params": {}, "shape": shape or {"M": 8},
                "dtype": "float32", "sweep_value": None, "status": status, "error": error,
                "timing": {"median_ms": median} if status == "ok" else None, "flags": list(flags)}

    old = {"results": [{"run_index": 0, "impl": "x"}, rec("a", median=1.0), rec("b", median=2.0),
                       rec("c", median=3.0, shape={"M": 16})]}
    cancelled = {"cancelled": True, "results": [rec("a", median=1.5), rec("b", "skipped", "cancelled"),
                                                rec("c", "skipped", "cancelled"), rec("d", "skipped", "cancelled")]}
    merged = merge_results(old, cancelled, 1)["results"]
    by = {r["impl"]: r for r in merged if r["run_index"] == 1}
    assert by["a"]["timing"]["median_ms"] == 1.5 and KEPT_FLAG not in by["a"]["flags"]  # measured now
    assert by["b"]["timing"]["median_ms"] == 2.0 and by["b"]["flags"] == [KEPT_FLAG]     # kept
    assert by["c"]["status"] == "skipped"  # another shape: not the same row, nothing kept for it
    assert by["d"]["status"] == "skipped" and merged[0] == {"run_index": 0, "impl": "x"}
    again = merge_results({"results": merged}, cancelled, 1)["results"]  # a second cancel
    assert [r for r in again if r["impl"] == "b"][0]["flags"] == [KEPT_FLAG]
    finished = merge_results({"results": merged}, {**cancelled, "cancelled": False}, 1)["results"]
    assert [r for r in finished if r["impl"] == "b"][0]["status"] == "skipped"  # not a cancel: replaced


def test_the_run_summary_and_the_untimed_message_say_what_happened():
    from workbench.screens.panes import charts
    from workbench.screens.runner import summary

    doc = {"results": [{"status": "ok"}, {"status": "skipped", "error": "cancelled"},
                       {"status": "skipped", "error": "cancelled"}]}
    assert summary(doc, True) == "cancelled: 1 ok, 2 not run"
    assert summary(doc, True, kept=2) == "cancelled: 1 ok, 2 not run (2 kept)"
    assert summary({"results": [{"status": "ok"}, {"status": "failed"}]}, False) == "done: 1 ok, 1 failed"
    rows = [Row(label="a", impl="a", sweep_value=None, status="skipped", error="cancelled"),
            Row(label="b", impl="b", sweep_value=None, status="skipped", error="cancelled"),
            Row(label="c", impl="c", sweep_value=None, status="failed")]
    assert charts.untimed_reasons(rows) == "2 cancelled, 1 failed"
    assert charts.untimed_reasons([Row(label="a", impl="a", sweep_value=None, status="ok")]) == "1 not benchmarked"


def test_the_split_views_status_says_when_a_line_has_no_instruction_of_the_stage():
    """'line 11: 0 SASS lines' beside '3 PTX lines' read as a missing map (a new user's try)."""
    from workbench.screens.panes.ptx_view import SplitState

    state = SplitState(source="a\nb\nc\n", stage="ptx", stage_texts={"ptx": "x\ny\nz\n", "sass": "s\n"},
                       source_map=[{"source_line": 2, "ptx_lines": [1, 2, 3], "sass_lines": []},
                                   {"source_line": 3, "ptx_lines": [3], "sass_lines": [1]}])
    assert state.status(2) == "line 2: 3 PTX lines" and state.status(3) == "line 3: 1 PTX line"
    state.stage = "sass"
    assert state.status(2) == "line 2: no SASS instruction (the compiler folded it into other lines)"
    assert state.status(3) == "line 3: 1 SASS line" and state.status(1) == "line 1: no SASS instruction"


def test_the_profile_summary_writes_numbers_as_its_table_does():
    from workbench.screens.panes.profile import summary

    cpu_only = {"rows": [{"self_cpu_us": 186881.6, "self_device_us": None}], "device_events": False}
    assert summary(cpu_only) == "no device rows here (CPU-only profile) · CPU 186,882 µs"
    gpu = {"rows": [{"self_cpu_us": 12.25, "self_device_us": 3767.0}], "device_events": True, "kernel_count": 9}
    assert summary(gpu) == "kernels per call 9 · device 3,767 µs · CPU 12.25 µs"
    from workbench.screens.panes.profile import _cell

    assert [_cell(v) for v in (2317.4, 13800.0, 12.25, None)] == ["2,317", "13,800", "12.25", "-"]  # one column, one style
    assert [_cell(v) for v in (2550, 22517, 6)] == ["2,550", "22,517", "6"]  # calls


def test_short_folder_names_the_home_as_tilde(monkeypatch, tmp_path):
    from workbench.screens.fmt import short_folder

    monkeypatch.setenv("HOME", str(tmp_path))
    assert short_folder(tmp_path / "data" / "sessions") == "~/data/sessions/"
    assert short_folder("/srv/x") == "/srv/x/"


def test_profile_shares_at_one_decimal_and_sorted_as_numbers():
    from workbench.screens.panes.profile import _pct_cell, _sort_key

    cells = [_pct_cell(v) for v in (99.8712, 0.1234, 1.2e-05, 0.0, None)]
    assert cells == ["99.9", "0.1", "<0.1", "0.0", "-"]
    assert sorted(cells[:4], key=_sort_key) == ["0.0", "<0.1", "0.1", "99.9"]


def test_the_ptx_panes_empty_reason_fits_a_narrow_pane_in_whole_words():
    """At 80x24 the code view broke "n|ot" (it does not wrap at words) and said "run ptx again"
    without the key."""
    import types

    from workbench.screens.panes.ptx import _empty_reason

    row = types.SimpleNamespace(ptx={"kernels": [{"name": "k"}]}, error=None)
    text = _empty_reason(row)
    assert all(len(line) <= 45 for line in text.splitlines()) and "Press r" in text


def test_the_stale_note_of_a_sweep_names_the_swept_field():
    """A sweep's results read "results are for 4 float32" (the swept N left out); at 80x24 the
    note and the legend also left the sweep's plot no rows (its y axis upside down)."""
    import types

    from workbench.screens.panes.timing import stale_note

    row = types.SimpleNamespace(record={"shape": {"M": 4, "N": 8}, "dtype": "float32"})
    note = stale_note([row], ({"M": 8, "N": 64}, "float32", ("N",)))
    assert note == "⚠ results are for 4xN float32; the spec is now 8xN float32 (r runs it)"
    assert stale_note([row], ({"M": 4, "N": 64}, "float32", ("N",))) is None  # only N differs: it is swept


def test_every_bad_shape_field_is_named_and_a_two_param_sweep_names_its_param():
    run = editing.default_run(GELU)
    with pytest.raises(ValueError, match=r'^M: must be a positive integer, got "0x"; N: must be a positive integer, '
                                         r'got "abc"$'):
        editing.with_shape(run, GELU, {"M": "0x", "N": "abc"}, "float32")
    with pytest.raises(ValueError, match=r"^sweep.values\[0\]: M: must be a positive integer, got 0; sweep.values\[0\]: N: "):
        editing.parse_sweep("M, N", "0", GELU)
    # 0 is the op's rule (not the field's): it was said only once N was fixed
    with pytest.raises(ValueError, match=r'^M: must be a positive integer, got 0; N: must be a positive integer, '
                                         r'got "abc"$'):
        editing.with_shape(run, GELU, {"M": "0", "N": "abc"}, "float32")
    # every bad sweep value, as --check lists them (the editor said the first)
    with pytest.raises(ValueError, match=r'^sweep.values\[1\]: must be a positive integer, got 0; sweep.values\[2\]: '
                                         r'must be a positive integer, got -3; sweep.values\[3\]: must be a positive '
                                         r'integer, got 2.5$'):
        editing.parse_sweep("N", "7, 0, -3, 2.5", GELU)


def test_profile_trace_text_names_the_kept_trace_or_how_to_keep_one():
    from workbench.screens.panes.profile import trace_text

    assert "--trace-dir DIR" in trace_text({"trace_path": None}) and "--trace-dir DIR" in trace_text(None)
    text = trace_text({"trace_path": "/t/s-run0-triton.pt.trace.json"})
    assert text.startswith("/t/s-run0-triton.pt.trace.json") and "ui.perfetto.dev" in text


def test_diagnosis_names_the_kept_ncu_report_and_how_to_open_it():
    from workbench.screens.panes.diagnosis import report_text

    assert report_text({"measured": None}) == "" and report_text({"measured": {"report_path": None}}) == ""
    text = report_text({"measured": {"report_path": "/r/g-run0-triton.ncu-rep"}})
    assert text.startswith("Nsight Compute report: /r/g-run0-triton.ncu-rep")
    assert "ncu-ui /r/g-run0-triton.ncu-rep" in text and "ncu --import /r/g-run0-triton.ncu-rep --page details" in text


def test_a_finished_run_shows_its_rows_in_the_documents_order():
    # a watch cycle's re-run rows arrived after the kept ones and stayed at the bottom of the table
    model = RunModel()
    for label in ("manual", "compiled"):  # the re-run rows' events come first
        model.apply(ev.Result((0, label, None), {"label": label, "impl": label, "status": "ok",
                                                 "timing": {"median_ms": 1.0}}))
    doc = {"results": [{"run_index": 0, "label": label, "impl": label, "status": "ok", "timing": {"median_ms": 1.0}}
                       for label in ("pytorch", "manual", "triton", "compiled")]}
    model.finish(doc)
    assert list(model.labels) == ["pytorch", "manual", "triton", "compiled"]


def test_a_save_that_fails_says_why_in_words(tmp_path):
    """ctrl+s where a file stands in place of a folder of the path showed Python's
    "[Errno 17] File exists: '/tmp/x/dir'" (a new user's try)."""
    import os

    from workbench.screens.session_actions import save_error_text

    (tmp_path / "dir").write_text("a file")
    target = tmp_path / "dir" / "sub" / "x.yaml"
    with pytest.raises(OSError) as err:
        os.makedirs(target.parent)
    assert save_error_text(err.value, target) == f"{tmp_path / 'dir'} is a file, so x.yaml cannot be written in a " \
                                                 "folder of that name"
    assert save_error_text(PermissionError(13, "Permission denied", "/x.yaml"), None) == "/x.yaml: Permission denied"


def test_a_sweeps_titles_are_cut_so_the_fixed_columns_fit():
    """At 80x24 a sweep's titles ('pytorch_erf @ 1024') pushed the spread, which the table keeps
    in view, off the pane ('-0.39/+6.' for -0.39/+6.5%; a new user's try): the titles are cut
    before their sweep value instead, and only where the fixed columns would not fit."""
    from workbench.screens.panes.timing import fit_fixed_columns

    rows = [Row(label=label, impl=label, sweep_value=n) for label in ("pytorch", "pytorch_erf") for n in (256, 1024)]
    cells = [(fmt.row_title(r.label, r.sweep_value), "ok", "112 µs", "-0.39/+6.5%", "1.2") for r in rows]
    fitted = fit_fixed_columns(cells, rows, 48)
    assert [c[0] for c in fitted] == ["pytorch @ 256", "pytorch @ 1024", "pytorch_erf @ 256", "pytorch_e… @ 1024"]
    assert sum(max(len(c[i]) for c in fitted) + 2 for i in range(4)) <= 48  # impl, status, median, spread
    assert [c[1:] for c in fitted] == [c[1:] for c in cells]
    assert fit_fixed_columns(cells, rows, 80) == cells and fit_fixed_columns(cells, rows, 0) == cells
    assert fmt.fit_title("triton", None, 4) == "tri…" and fmt.fit_title("triton", 8, 20) == "triton @ 8"


def test_a_redraw_after_the_panes_went_does_nothing_instead_of_failing():
    """The redraw timer can fire while the app closes, its panes unmounted (found in a run of
    benchmarks/key_latency_cpu.py: AttributeError on None.sweep_param); show_results and
    mark_stale then find no pane and draw nothing."""
    from types import SimpleNamespace

    from workbench.screens.editor import EditorMixin

    class _Closing(EditorMixin):
        ws = SimpleNamespace(model=lambda: None, run=SimpleNamespace(sweep=None), op=None)

        def _result_pane(self, cls):
            return None

    closing = _Closing()
    closing.show_results()
    closing.mark_stale()
    closing.mark_stale(redraw=False)
    assert closing._behind  # every pane waits for the next redraw that finds it
