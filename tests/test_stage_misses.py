"""Stage `misses` (benchmarks/stages/misses.py) on CPU: its cases exist in the registry, the figures
of a case, the Nsight Compute CSV parse and the kernels' labels, and the no-GPU path."""

from __future__ import annotations

import json

import pytest

from benchmarks.stages import misses
from benchmarks.stages._misses_core import cases, figures, label_kernels, parse_ncu_csv, selected
from workbench.registry import discover


def test_every_side_of_every_case_is_registered_in_the_case_dtype():
    registry = discover()
    for case in cases():
        labels = [s.label for s in case.sides]
        assert case.ours in labels and set(case.against) <= set(labels)
        for side in case.sides:
            op = registry.op(side.op)
            impl = op.get_impl(side.impl)
            assert case.dtype in [d.value for d in (impl.dtypes or op.dtypes)], (case.name, side)
    names = [c.name for c in cases()]
    assert names == ["matmul 4096^3 bfloat16", "matmul 4096^3 float16", "matmul_gelu 8192^3 bfloat16",
                     "softmax 16384^2 float32", "matmul 8192^3 bfloat16", "matmul 8192^3 float16",
                     "softmax 4096x262144 bfloat16", "softmax 4096x262144 float32"]
    assert [c.name for c in selected(("4096x262144",))] == names[-2:]
    assert [c.name for c in selected(("matmul_gelu", "4096^3 float16"))] == [names[1], names[2]]
    assert selected(None) == selected(()) == cases() and selected(("nothing",)) == []


def test_the_long_rows_are_held_to_90_percent_of_copy_and_1_3x_torch_compile():
    case = next(c for c in cases() if c.name == "softmax 4096x262144 bfloat16")
    rounds = {"cuda": [1.15, 1.14, 1.16], "compiled": [2.08, 2.09, 2.07]}
    got = figures(case, rounds, copy_ms=1.026)
    assert got["ratio"] == pytest.approx(2.08 / 1.15) and got["met"] is True  # >= 1.3x torch.compile
    assert got["pct_of_copy"]["cuda"] == pytest.approx(100 * 1.026 / 1.15)  # 89.2%
    assert got["copy_target_pct"] == 90.0 and got["copy_met"] is False
    assert got["copy_gap_points"] == pytest.approx(90.0 - 100 * 1.026 / 1.15)
    assert figures(case, {**rounds, "cuda": [1.12] * 3}, copy_ms=1.026)["copy_met"] is True
    assert "copy_met" not in figures(case, rounds)  # no copy timed: no % of copy claimed


def test_the_figures_compare_ours_with_the_best_reference_and_say_the_gap():
    case = cases()[3]  # softmax: ours triton, against compiled and pytorch
    rounds = {"triton": [0.512, 0.511, 0.513], "compiled": [0.498, 0.499, 0.497], "pytorch": [0.64] * 3,
              "cuda": [0.515] * 3}
    got = figures(case, rounds, copy_ms=0.502)
    assert got["against"] == "compiled" and got["met"] is False
    assert got["ratio"] == pytest.approx(0.498 / 0.512)
    assert got["gap_pct"] == pytest.approx(100 * (0.512 / 0.498 - 1))
    assert got["pct_of_copy"]["compiled"] == pytest.approx(100 * 0.502 / 0.498)
    assert got["paired_ratio"] == pytest.approx(0.498 / 0.512)
    cuda = got["also"]["cuda"]  # the CUDA kernel held to the same target against the same best
    assert cuda["met"] is False and cuda["ratio"] == pytest.approx(0.498 / 0.515)
    assert cuda["gap_pct"] == pytest.approx(100 * (0.515 / 0.498 - 1))
    assert "also" not in figures(case, {k: v for k, v in rounds.items() if k != "cuda"}, copy_ms=0.502)
    assert figures(case, {**rounds, "cuda": [0.49] * 3})["also"]["cuda"]["met"] is True
    fused = cases()[2]  # the fused GeLU must be 1.05x faster than cuBLAS then GeLU
    got = figures(fused, {"cuBLAS+GeLU": [1.533], "fused triton": [1.46]})
    assert got["met"] is True and got["needed_ms"] == pytest.approx(1.533 / 1.05)
    # ... and than torch.compile, whichever is faster (issue #40: H100, 1.6977 / 1.6032 / 1.5783 ms)
    got = figures(fused, {"cuBLAS+GeLU": [1.6977], "compiled": [1.6032], "fused triton": [1.5783]})
    assert got["against"] == "compiled" and got["met"] is False and got["ratio"] == pytest.approx(1.6032 / 1.5783)


NCU_CSV = '''==PROF== Connected to process 1234
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1234","python3","127.0.0.1","nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNN","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","GPU Speed Of Light Throughput","Duration","usecond","178.53"
"0","1234","python3","127.0.0.1","nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNN","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","GPU Speed Of Light Throughput","Compute (SM) Throughput","%","91.2"
"0","1234","python3","127.0.0.1","nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNN","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","GPU Speed Of Light Throughput","SM Frequency","Ghz","1.75"
"0","1234","python3","127.0.0.1","nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNN","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","Launch Statistics","Waves Per SM","","1"
"0","1234","python3","127.0.0.1","nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNN","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler metrics","sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active","%","88.5"
"1","1234","python3","127.0.0.1","_tma_matmul_kernel","1","7","(256, 1, 1)","(132, 1, 1)","0","9.0","GPU Speed Of Light Throughput","Duration","msecond","0.18421"
"1","1234","python3","127.0.0.1","_tma_matmul_kernel","1","7","(256, 1, 1)","(132, 1, 1)","0","9.0","Launch Statistics","Registers Per Thread","register/thread","168"
"1","1234","python3","127.0.0.1","_tma_matmul_kernel","1","7","(256, 1, 1)","(132, 1, 1)","0","9.0","GPU Speed Of Light Throughput","DRAM Throughput","%","12,5"
"2","1234","python3","127.0.0.1","softmax_onepass_kernel","1","7","(1024, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active","%","41.5"
"2","1234","python3","127.0.0.1","softmax_onepass_kernel","1","7","(1024, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","Gbyte","2.15"
"2","1234","python3","127.0.0.1","softmax_onepass_kernel","1","7","(1024, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","Mbyte","2,147.48"
"2","1234","python3","127.0.0.1","softmax_onepass_kernel","1","7","(1024, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","ratio","3.1"
"2","1234","python3","127.0.0.1","softmax_onepass_kernel","1","7","(1024, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","ratio","5.2"
"2","1234","python3","127.0.0.1","softmax_onepass_kernel","1","7","(1024, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio","ratio","0.4"
"2","1234","python3","127.0.0.1","softmax_onepass_kernel","1","7","(1024, 1, 1)","(8192, 1, 1)","0","9.0","Warp State Statistics","Warp Cycles Per Issued Instruction","cycle","9.87"
"2","1234","python3","127.0.0.1","softmax_onepass_kernel","1","7","(1024, 1, 1)","(8192, 1, 1)","0","9.0","Launch Statistics","Cluster Size","","2"
'''


def test_the_ncu_csv_gives_each_kernel_its_figures_in_base_units_and_its_side():
    kernels = parse_ncu_csv(NCU_CSV)
    assert [k["id"] for k in kernels] == [0, 1, 2]
    cublas, triton, onepass = kernels
    assert onepass["xu_pipe_pct"] == 41.5 and onepass["warp_cycles_per_issue"] == 9.87 and onepass["cluster_size"] == 2
    assert onepass["dram_read_bytes"] == pytest.approx(2.15e9) and onepass["dram_write_bytes"] == pytest.approx(2.14748e9)
    assert list(onepass["stalls"]) == ["barrier", "long_scoreboard", "math_pipe_throttle"]  # largest first
    assert cublas["stalls"] is None and cublas.get("xu_pipe_pct") is None
    kernels = kernels[:2]
    assert cublas["duration_us"] == pytest.approx(178.53) and cublas["sm_throughput_pct"] == 91.2
    assert cublas["sm_clock_hz"] == pytest.approx(1.75e9) and cublas["waves_per_sm"] == 1.0
    assert cublas["tensor_pipe_pct"] == 88.5 and cublas["grid"] == "(132, 1, 1)"
    assert triton["duration_us"] == pytest.approx(184.21) and triton["registers"] == 168
    assert triton["tensor_pipe_pct"] is None
    cublas, triton = kernels
    labelled = label_kernels(kernels, [("cuBLAS", 1), ("triton", 1)])
    assert [k["side"] for k in labelled] == ["cuBLAS", "triton"]
    assert parse_ncu_csv("==ERROR== no kernels were profiled\n") == []


def test_without_a_gpu_nothing_is_timed_and_it_says_so(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the stage would time for real")
    assert misses.run(True, tmp_path) == [{"item": "misses", "status": "skipped", "note": "no CUDA GPU"}]
    assert json.loads((tmp_path / "misses.json").read_text())["cases"] == []


def test_each_round_orders_the_sides_at_random_the_same_way_run_to_run():
    from benchmarks.stages._misses_core import round_orders

    labels = ["triton", "cuBLAS", "copy"]
    orders = round_orders("matmul 4096^3 bfloat16", labels, 12)
    assert len(orders) == 12 and all(sorted(o) == sorted(labels) for o in orders)
    assert len({tuple(o) for o in orders}) > 3  # not a 3-round rotation
    assert round_orders("matmul 4096^3 bfloat16", labels, 12) == orders
