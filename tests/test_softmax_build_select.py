"""A cold start builds only what a row launches (issue #39, item 2): the `cuda` softmax row's module
and its PTX view compile the kernels of the configs its tuner compares (kernels/softmax.py
cuda_kernels -> -DWB_SOFTMAX_KERNELS), named by a hash of source and define."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from workbench.kernels import softmax as sm
from workbench.tuning import Tuned
from workbench.registry import discover

REGISTRY = discover()
OP = REGISTRY.op("softmax")
SHAPES = ({"M": 16384, "N": 16384}, {"M": 4096, "N": 262144}, {"M": 64, "N": 1000}, {"M": 64, "N": 1001},
          {"M": 64, "N": 300000})


def spec(shape: dict, dtype: str = "float32"):
    return OP.make_spec(shape, dtype)


def test_the_default_rows_module_holds_its_four_kernels():
    """16384^2 float32 (the default session's row): the plan (512 x 8), its kept twin
    (ROW_SHAPES) and the L2 kernel in both forms; nothing else of softmax.cu's 155."""
    assert sm.cuda_kernels(spec({"M": 16384, "N": 16384})) == (
        "onepass_f32_4_512_8_0_0_0_0", "onepass_f32_4_512_8_0_0_1_0", "l2_f32_1024_0", "l2_f32_1024_1")
    assert sm.cuda_build_flags(spec({"M": 16384, "N": 16384})) == (
        "-DWB_SOFTMAX_KERNELS=onepass_f32_4_512_8_0_0_0_0__onepass_f32_4_512_8_0_0_1_0__l2_f32_1024_0__l2_f32_1024_1",)


@pytest.mark.parametrize("shape, dtype, tokens", [
    ({"M": 64, "N": 1000}, "float32", ("onepass_f32_4_32_8_0_0_0_0",)),     # the plan: 32 threads x 8 packs
    ({"M": 64, "N": 1001}, "float32", ("onepass_f32_1_64_16_0_0_0_0",)),    # odd: scalar packs, 16 a thread
    ({"M": 64, "N": 300000}, "float32", ("twopass_f32_4",)),                # past one pass: the two-pass kernel
    ({"M": 64, "N": 300001}, "float16", ("twopass_f16_1",)),
])
def test_a_row_without_tuning_builds_one_kernel(shape, dtype, tokens):
    assert sm.cuda_kernels(spec(shape, dtype)) == tokens


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES)
def test_every_kernel_a_row_may_launch_is_built_and_nothing_else(shape, dtype, monkeypatch):
    """For each config the tuner may pick, the kernel it launches (CudaSource.launched, the PTX
    view's first) is in the row's build, and every kernel built is one a candidate launches."""
    s = spec(shape, dtype)
    built = sm.cuda_kernels(s)
    launched = set()
    for config in sm.cuda_candidates(s):
        monkeypatch.setattr(sm, "_cuda_config", lambda spec, ctx, run=None, c=config: Tuned(c, "cached", ""))
        token = sm.kernel_token(s, config)
        assert token in built, (shape, dtype, config, built)
        name = OP.get_impl("cuda").source.launched_kernel(s, {})
        kernel, args = sm.cuda_kernel(s, config)
        assert name.startswith(f"{kernel}<{sm.CXX_TYPE[dtype]}, ") and name.count(",") == len(args)
        launched.add(token)
    assert launched == set(built)
    assert len(built) == len(set(built))


def test_a_config_change_builds_a_different_module(tmp_path, monkeypatch):
    """load_module's name hashes the define: another row's kernels, another module; the same
    kernels, the same module (found built); no selection, the whole file's module."""
    import workbench.cuda_build as cb

    names: list[tuple[str, tuple]] = []
    monkeypatch.setattr(cb, "find_nvcc", lambda: "/usr/local/bin/nvcc")  # nothing is compiled: named only
    monkeypatch.setattr(cb, "build_inline", lambda name, *args: names.append((name, tuple(args[-1]))) or name)
    wide, long_rows, wide_half = spec({"M": 16384, "N": 16384}), spec({"M": 4096, "N": 262144}), spec({"M": 8192, "N": 16384})
    for s in (wide, long_rows, wide_half):
        sm.load_module(tmp_path, sm.cuda_kernels(s))
    sm.load_module(tmp_path)
    (a, flags_a), (b, _), (c, _), (whole, flags_whole) = names
    assert a.startswith("wb_softmax_") and a != b and a == c  # 8192 rows of 16384: the same kernels
    assert whole not in (a, b)
    assert any(f.startswith("-DWB_SOFTMAX_KERNELS=onepass_f32_4_512_8_") for f in flags_a)
    assert not any("WB_SOFTMAX_KERNELS" in f for f in flags_whole)


@pytest.mark.parametrize("kernels, message", [
    ((), "at least one kernel token"),
    (("onepass_f64_4_512",), "'onepass_f64_4_512' is not kind_type_n"),
    (("half_f32_1",), "'half_f32_1' is not kind_type_n"),
    (("l2_f32_1024_x",), "'l2_f32_1024_x' is not kind_type_n"),
])
def test_a_bad_kernel_list_is_refused_naming_it(kernels, message):
    with pytest.raises(ValueError, match=message):
        sm.kernels_flag(kernels)


def test_build_ahead_compiles_each_candidate_set_once():
    """build_ahead.compile_key holds the row's flags: two softmax rows of one candidate set share
    a compile, rows of different sets do not (each is built, neither twice)."""
    from types import SimpleNamespace

    from workbench.engine.worker.build_ahead import compile_key

    def row(M: int, N: int, dtype: str = "float32"):
        return SimpleNamespace(op="softmax", impl="cuda", shape={"M": M, "N": N}, dtype=dtype, params={})

    for part in ("build", "ptx"):
        assert compile_key(REGISTRY, row(16384, 16384), part) == compile_key(REGISTRY, row(8192, 16384), part)
        assert compile_key(REGISTRY, row(16384, 16384), part) != compile_key(REGISTRY, row(4096, 262144), part)
        assert compile_key(REGISTRY, row(16384, 16384), part) != compile_key(REGISTRY, row(16384, 16384, "bfloat16"), part)


def test_a_source_without_build_flags_compiles_with_its_static_flags():
    source = OP.get_impl("cuda").source
    plain = dataclasses.replace(source, build_flags=None, extra_nvcc_flags=("-DX=1",))
    assert plain.nvcc_flags(spec({"M": 64, "N": 1000}), {}) == ("-DX=1",)
    assert source.nvcc_flags(None, {}) == ()
    assert source.nvcc_flags(spec({"M": 64, "N": 1000}), {}) == ("-DWB_SOFTMAX_KERNELS=onepass_f32_4_32_8_0_0_0_0",)


# -- nvcc: the PTX view compiles exactly the row's kernels ---------------------------------------
@pytest.mark.slow  # nvcc subprocesses (a few seconds each)
@pytest.mark.parametrize("shape, dtype", [({"M": 16384, "N": 16384}, "float32"), ({"M": 4096, "N": 262144}, "bfloat16"),
                                          ({"M": 64, "N": 1001}, "float16"), ({"M": 64, "N": 300000}, "float32")])
def test_the_ptx_view_compiles_exactly_the_rows_kernels(shape, dtype, tmp_path, monkeypatch):
    """compile_cu with the row's flags (as ptx/extractors.cuda_record passes them): the PTX holds
    one entry per token, each the instantiation the token names, and the launched kernel is
    found exactly (launched_first sets `launched`)."""
    from workbench.machine import find_nvcc
    from workbench.ptx.counts import split_kernels
    from workbench.ptx.extractors import launched_first, plain_kernel_name
    from workbench.ptx.nvcc import compile_cu, match_kernels

    if find_nvcc() is None:
        pytest.skip("nvcc not found (CUDA toolkit not installed)")
    s = spec(shape, dtype)
    source = OP.get_impl("cuda").source
    out = compile_cu(Path(source.path), "sm_90", source.nvcc_flags(s, {}), cache_dir=tmp_path,
                     kernels=source.kernels, dtype=dtype)
    found, _ = match_kernels(out.ptx, source.kernels, dtype)  # notes: the kernel kinds not built
    assert len(split_kernels(out.ptx)) == len(found) == len(sm.cuda_kernels(s))
    names = set()
    for config in sm.cuda_candidates(s):
        monkeypatch.setattr(sm, "_cuda_config", lambda spec, ctx, run=None, c=config: Tuned(c, "cached", ""))
        names.add(plain_kernel_name(source.launched_kernel(s, {})))
        record = launched_first({"kernels": [{"name": k.display} for k in found], "notes": []},
                                source.launched_kernel(s, {}))
        assert "launched" in record, (config, [k.display for k in found])
    assert {plain_kernel_name(k.display) for k in found} == names


@pytest.mark.slow  # nvcc, ptxas and nvdisasm subprocesses
def test_the_rows_ptx_record_lists_its_kernels_the_launched_first(tmp_path):
    """ptx_record of the default softmax `cuda` row (as its PTX stage and the build-ahead worker
    make it): the four kernels of its build, mapped to softmax.cu's lines, the untuned choice
    first and named `launched`, one note saying the build is the row's and none that a kernel
    kind of the .cu was not found."""
    from workbench.machine import find_nvcc
    from workbench.ptx.extract import ptx_record

    if find_nvcc() is None:
        pytest.skip("nvcc not found (CUDA toolkit not installed)")
    s = spec({"M": 16384, "N": 16384})
    record, texts = ptx_record(OP, "cuda", s, target="sm_90", cache_dir=tmp_path)
    names = [k["name"] for k in record["kernels"]]
    assert len(names) == 4 and record.get("launched") == names[0], (names, record["notes"])
    assert "softmax_onepass_kernel<float, 4, 512, 8, false, 0, false, false>" in names[0].replace("(int)", "")
    notes = " | ".join(record["notes"])
    assert "built for this row (-DWB_SOFTMAX_KERNELS=onepass_f32_4_512_8_0_0_0_0__" in notes
    assert "not found in the PTX" not in notes and not record.get("error")
    assert set(texts) == set(names)
    assert all(k["source_file"].endswith("softmax.cu") and k["source_map"] for k in record["kernels"])  # lines mapped
