"""The `kernels` GPU stage's logic on CPU: which rows it replays and warms, and the kernels table."""

from __future__ import annotations

from benchmarks import kernels_table
from benchmarks.stages import kernels as stage


def test_the_full_stage_replays_every_row_of_the_session():
    session = stage.load()
    full = stage.select(session, gpu=True, quick=False)
    assert full.runs == session.runs
    dtypes = {(r.op, r.dtype) for r in full.runs}
    for op in ("gelu", "softmax", "add"):
        assert {(op, d) for d in ("float32", "float16", "bfloat16")} <= dtypes
    shapes = {(r.op, tuple(r.shape.values())) for r in full.runs}
    assert ("softmax", (4096, 262144)) in shapes and ("matmul", (8192, 8192, 8192)) in shapes
    assert ("matmul", (4096, 4096, 4096)) in shapes and ("matmul_gelu", (8192, 8192, 8192)) in shapes


def test_quick_keeps_bfloat16_and_drops_the_big_gemms():
    quick = stage.select(stage.load(), gpu=True, quick=True)
    assert quick.runs and all(r.dtype == "bfloat16" for r in quick.runs)
    assert not [r for r in quick.runs if r.op == "matmul" and r.shape["M"] == 8192]
    assert quick.settings.rep_ms < stage.load().settings.rep_ms


def test_without_a_gpu_the_rows_are_cpu_sized():
    cpu = stage.select(stage.load(), gpu=False, quick=False, only=("softmax", "gelu"))
    assert cpu.settings.device == "cpu" and {r.op for r in cpu.runs} == {"softmax", "gelu"}
    assert all(r.shape == stage.CPU_SHAPES[r.op] for r in cpu.runs)
    assert len({(r.op, r.dtype) for r in cpu.runs}) == len(cpu.runs)


def test_rows_that_tune_are_not_warmed_in_parallel():
    warm = stage.warm_session(stage.select(stage.load(), gpu=True, quick=False))
    impls = {(r.op, tuple(r.shape.values()), r.dtype, i.name) for r in warm.runs for i in r.impls}
    assert not [i for i in impls if i[3].startswith("triton")]
    assert ("softmax", (16384, 16384), "float32", "cuda") in impls      # one block: nothing to tune
    assert ("softmax", (4096, 262144), "float32", "cuda") not in impls  # clustered: tunes its shape
    assert ("gelu", (16384, 16384), "bfloat16", "compiled") in impls


def _rec(op, impl, median, status="ok", **extra):
    shape = {"M": 64, "N": 64, "K": 64} if op.startswith("matmul") else {"M": 64, "N": 64}
    return {"op": op, "impl": impl, "label": impl, "shape": shape, "dtype": "bfloat16", "status": status,
            "error": extra.get("error"),
            "timing": {"median_ms": median, "p20_ms": median and median * 0.99, "p80_ms": median and median * 1.01},
            "traffic": {"gbps": 4000.0, "pct_of_copy": 95.0, "tflops": 700.0, "pct_of_cublas": 101.0},
            "tuned": extra.get("tuned")}


def test_the_table_relates_each_row_to_the_best_library_row():
    doc = {"environment": {"device": "NVIDIA H200", "ceilings": {"copy_gbps": 4200.0}},
           "results": [_rec("softmax", "pytorch", 0.5), _rec("softmax", "compiled", 0.4),
                       _rec("softmax", "triton", 0.38, tuned={"config": {"num_warps": 16}, "source": "tuned"}),
                       _rec("softmax", "cuda", None, status="failed", error="check failed: max_abs_err 1\nmore"),
                       _rec("matmul", "pytorch", 1.0), _rec("matmul", "triton", 0.98)]}
    rows = {(r["op"], r["impl"]): r for r in kernels_table.rows(doc)}
    assert rows[("softmax", "triton")]["x_lib"] == round(0.4 / 0.38, 3)
    assert rows[("softmax", "triton")]["tuned"] == "num_warps=16 (tuned)"
    assert rows[("softmax", "pytorch")]["x_lib"] == 0.8 and rows[("softmax", "cuda")]["x_lib"] is None
    assert rows[("matmul", "triton")]["unit"] == "TFLOP/s" and rows[("matmul", "triton")]["pct_of"] == "cuBLAS"
    text = kernels_table.markdown(doc)
    assert "| softmax | 64x64 | bfloat16 | cuda | failed: check failed: max_abs_err 1 |" in text
    assert "1.053x" in text and "95.0% of copy" in text and "101.0% of cuBLAS" in text


def test_the_table_script_names_a_bad_file(tmp_path, capsys):
    assert kernels_table.main([str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert kernels_table.main([]) == 2


# -- the results page of one GPU kind (issue #40) ----------------------------------------------
def test_the_page_session_puts_the_targets_first_and_quick_shrinks_only_memory_bound_rows():
    session = stage.load()
    page = kernels_table.page_session(session, quick=False)
    assert sorted(map(repr, page.runs)) == sorted(map(repr, session.runs))  # every row, reordered
    kinds = [0 if r.op in kernels_table.PRODUCT_OPS else 1 if r.shape.get("N") == 262144 else 2 for r in page.runs]
    assert kinds == sorted(kinds) and kinds[0] == 0
    assert {(r.op, r.dtype) for r in page.runs if r.op == "matmul_gelu"} == {("matmul_gelu", "bfloat16"),
                                                                             ("matmul_gelu", "float16")}
    quick = kernels_table.page_session(session, quick=True)
    assert len(quick.runs) == len(session.runs) and quick.settings.rep_ms < session.settings.rep_ms
    assert not [r for r in quick.runs if r.shape == {"M": 16384, "N": 16384}]
    assert ("matmul", (8192, 8192, 8192)) in {(r.op, tuple(r.shape.values())) for r in quick.runs}
    assert ("softmax", (4096, 262144)) in {(r.op, tuple(r.shape.values())) for r in quick.runs}


def test_the_page_names_each_target_and_whether_it_was_met():
    long_row = {**_rec("softmax", "cuda", 0.5), "shape": {"M": 4096, "N": 262144}}
    long_row["traffic"] = {**long_row["traffic"], "pct_of_copy": 94.2}
    doc = {"environment": {"device": "NVIDIA H100 80GB HBM3", "torch": "2.11", "triton": "3.6.0"},
           "provenance": {"started": "2026-12-06T06:00:00Z", "git_sha": "abc"},
           "results": [_rec("matmul", "pytorch", 1.0), _rec("matmul", "triton", 0.98),
                       _rec("matmul_gelu", "manual", 1.10), _rec("matmul_gelu", "compiled", 1.05),
                       _rec("matmul_gelu", "triton", 1.02), long_row,
                       _rec("softmax", "triton", 0.4)]}
    doc["results"][0]["timing"]["sm_clock_mhz"] = {"min": 1335.0, "max": 1980.0}
    got = {t["target"].split()[0]: t for t in kernels_table.targets(doc)}
    assert got["Triton"]["met"] is True and got["Triton"]["measured"] == f"{1.0 / 0.98:.3f}x"
    assert got["fused"]["met"] is False and got["fused"]["measured"] == f"{1.05 / 1.02:.3f}x"
    assert got["long-row"]["met"] is False and got["long-row"]["measured"] == "94.2%"
    text = kernels_table.page(doc, "python benchmarks/kernels_table.py --run --out results/h100.md")
    assert text.startswith("# Our kernels on NVIDIA H100 80GB HBM3")
    assert "SM clock 1335-1980 MHz" in text and "`python benchmarks/kernels_table.py --run --out results/h100.md`" in text
    assert "| fused GeLU epilogue >= 1.05x min(manual, compiled) | matmul_gelu 64x64x64 bfloat16 triton | 1.029x | **no** |" in text
    assert "## Every implementation" in text and "| softmax | 64x64 | bfloat16 | triton |" in text


def test_the_page_command_refuses_a_page_that_is_not_markdown(capsys):
    assert kernels_table.main(["--run", "--out", "results/h100.txt"]) == 2
    assert "must name a .md page" in capsys.readouterr().err


def test_the_page_command_writes_the_page_and_the_document_beside_it(tmp_path, monkeypatch, capsys):
    """The --run wiring with the engine replaced: the session it measures is page_session's, and
    both files land where --out says."""
    from benchmarks.stages import _op_runs

    seen = {}
    doc = {"environment": {"device": "NVIDIA H100 80GB HBM3"}, "provenance": {},
           "results": [_rec("matmul", "pytorch", 1.0), _rec("matmul", "triton", 0.97)]}

    def fake_run(session, out, budget_s):
        seen["session"], seen["budget"] = session, budget_s
        return doc
    monkeypatch.setattr(_op_runs, "has_gpu", lambda: True)
    monkeypatch.setattr(_op_runs, "run_session", fake_run)
    monkeypatch.setattr(_op_runs, "warm_builds", lambda session, build_dir, budget: ["warm x: cut"])
    page = tmp_path / "results" / "h100.md"
    assert kernels_table.main(["--run", "--quick", "--out", str(page), "--budget-s", "99"]) == 0
    assert seen["budget"] == 99.0 and seen["session"].runs[0].op in kernels_table.PRODUCT_OPS
    assert page.read_text().startswith("# Our kernels on NVIDIA H100 80GB HBM3")
    assert f"--run --quick --out {page} --budget-s 99" in page.read_text()
    assert json_load(page.with_suffix(".json"))["results"][1]["impl"] == "triton"
    assert "Triton matmul >= cuBLAS: matmul 64x64x64 bfloat16 triton: 1.031x (met)" in capsys.readouterr().out


def json_load(path):
    import json

    return json.loads(path.read_text())
