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
