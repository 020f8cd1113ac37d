"""What every shipped op promises besides correct numbers: clear errors naming the bad value and
the allowed ones, Triton limits as LimitError naming the way out (P7), cost models, the fp32
precision switch (rule 7), and the declarations the engine and the PTX view rely on."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from op_cases import shipped_impls, shipped_ops
from workbench.cost import Cost
from workbench.dtypes import DType
from workbench.errors import LimitError, SpecError, UnknownNameError
from workbench.kernel_source import CudaSource, TritonLaunch, TritonSource
from workbench.machine import probe, unavailable_reason
from workbench.registry import BuildContext, discover

REGISTRY = discover()
OPS = shipped_ops(REGISTRY)
OP_NAMES = [op.name for op in OPS]


# -- bad input: one clear error naming the value and what is allowed ---------------------------
def test_unknown_op_names_it_and_the_ops():
    with pytest.raises(UnknownNameError, match=r"'softmaxx'.*allowed: .*softmax"):
        REGISTRY.op("softmaxx")


@pytest.mark.parametrize("op_name", OP_NAMES)
def test_unknown_impl_names_it_and_the_impls(op_name):
    op = REGISTRY.op(op_name)
    with pytest.raises(UnknownNameError) as err:
        op.get_impl("cuda_fastest")
    assert "'cuda_fastest'" in str(err.value)
    assert all(name in str(err.value) for name in op.impls)


@pytest.mark.parametrize("op_name", OP_NAMES)
def test_unknown_dtype_names_it_and_the_dtypes(op_name):
    op = REGISTRY.op(op_name)
    with pytest.raises(UnknownNameError) as err:
        op.make_spec({}, "float64")
    assert "'float64'" in str(err.value) and "float32" in str(err.value)


@pytest.mark.parametrize("op_name, dtype", [("cdist", "float16"), ("matmul_gelu", "float32")])
def test_dtype_the_op_lacks_names_the_ones_it_has(op_name, dtype):
    op = REGISTRY.op(op_name)
    with pytest.raises(UnknownNameError) as err:
        op.make_spec({}, dtype)
    assert f"'{dtype}'" in str(err.value)
    assert all(d.value in str(err.value) for d in op.dtypes)


def test_impl_that_lacks_a_dtype_says_so():
    impl = REGISTRY.op("matmul").get_impl("cuda_naive")
    reason = unavailable_reason(impl, "check", probe(), DType.float16)
    assert reason == "cuda_naive supports float32 only, not float16"


@pytest.mark.parametrize("op_name", OP_NAMES)
def test_invalid_shapes_name_the_field_and_value(op_name):
    op = REGISTRY.op(op_name)
    field = op.spec.shape_fields()[0]
    low = 0 if field in op.spec.NON_NEGATIVE else 1
    with pytest.raises(SpecError, match=rf"{field}: must be .*, got {low - 1}"):
        op.make_spec({field: low - 1})
    with pytest.raises(SpecError, match=rf"{field}: must be .*, got 'two'"):
        op.make_spec({field: "two"})
    with pytest.raises(UnknownNameError) as err:
        op.make_spec({"Q": 3})
    assert "'Q'" in str(err.value) and field in str(err.value)


def test_sleep_of_zero_ms_is_valid():
    assert REGISTRY.op("sleep").make_spec({"sleep_ms": 0}).label == "0 ms"


@pytest.mark.parametrize("op_name", OP_NAMES)
def test_unknown_param_names_it_and_the_params(op_name):
    for impl in shipped_impls(REGISTRY.op(op_name)):
        with pytest.raises(UnknownNameError) as err:
            impl.resolve_params({"BLOCK": 3})
        assert "'BLOCK'" in str(err.value)
        assert all(name in str(err.value) for name in impl.params)


# -- Triton limits (P7): one line naming the limit, the value and what to use instead -----------
def build(op_name: str, impl_name: str, shape: dict, dtype: str, params=None, **ctx):
    op = REGISTRY.op(op_name)
    impl = op.get_impl(impl_name)
    return impl.builder(op.make_spec(shape, dtype), impl.resolve_params(params), BuildContext(**ctx))


def test_softmax_row_too_long_for_one_block_names_triton_looped():
    with pytest.raises(LimitError) as err:
        build("softmax", "triton", {"M": 2, "N": 20000}, "float32")
    message = str(err.value)
    assert "N=20000" in message and "BLOCK_SIZE=32768" in message
    assert "MAX_BLOCK_SIZE=16384" in message and "triton_looped" in message
    build("softmax", "triton", {"M": 2, "N": 16384}, "float32")  # the limit itself still fits
    build("softmax", "triton_looped", {"M": 2, "N": 20000}, "float32")


@pytest.mark.parametrize("op_name", ["matmul", "matmul_gelu"])
def test_matmul_tile_over_shared_memory_names_it(op_name):
    shape = {"M": 64, "N": 64, "K": 64}
    with pytest.raises(LimitError) as err:
        build(op_name, "triton", shape, "float16", {"num_stages": 6})
    message = str(err.value)
    assert "BLOCK_M=128 BLOCK_N=256 BLOCK_K=64 num_stages=6" in message
    assert "288 KiB" in message and "227 KiB" in message and "BLOCK_K" in message


def test_matmul_float32_tf32_needs_a_smaller_k_tile():
    shape = {"M": 64, "N": 64, "K": 64}
    build("matmul", "triton", shape, "float32", fp32_precision="ieee")  # FMA path: 192 KiB fits
    with pytest.raises(LimitError, match="288 KiB"):
        build("matmul", "triton", shape, "float32", fp32_precision="tf32")
    build("matmul", "triton", shape, "float32", {"BLOCK_K": 32}, fp32_precision="tf32")


@pytest.mark.parametrize("params, bad", [({"BLOCK_K": 48}, "BLOCK_K"), ({"BLOCK_M": 8}, "BLOCK_M"),
                                         ({"GROUP_M": 0}, "GROUP_M")])
def test_matmul_bad_tile_params_name_the_param(params, bad):
    with pytest.raises(LimitError, match=bad):
        build("matmul", "triton", {"M": 64, "N": 64, "K": 64}, "float16", params)


@pytest.mark.parametrize("op_name, impl_name, params", [
    ("add", "triton", {"BLOCK_SIZE": 1000}), ("softmax", "triton_looped", {"BLOCK_SIZE": 1000}),
    ("cdist", "triton", {"BLOCK_M": 48})])
def test_block_sizes_must_be_powers_of_two(op_name, impl_name, params):
    op = REGISTRY.op(op_name)
    shape = op.test_specs[0]
    with pytest.raises(LimitError, match=f"{next(iter(params))} must be a power of two"):
        build(op_name, impl_name, shape, op.dtypes[0].value, params)


# -- fp32 precision (rule 7): the engine owns it, no implementation sets it ---------------------
def test_fp32_precision_is_set_for_the_block_and_restored():
    from workbench.engine.worker.precision import fp32_precision

    backend = torch.backends.cuda.matmul
    before = backend.fp32_precision
    with fp32_precision("tf32"):
        seen = backend.fp32_precision
    assert seen == "tf32" and backend.fp32_precision == before


def test_only_matmul_like_ops_run_at_tf32():
    from workbench.engine.worker.precision import effective_fp32_precision

    assert effective_fp32_precision(REGISTRY.op("matmul"), "tf32") == "tf32"
    assert effective_fp32_precision(REGISTRY.op("cdist"), "tf32") == "ieee"  # torch.cdist's matmul stays IEEE
    assert effective_fp32_precision(REGISTRY.op("matmul"), "ieee") == "ieee"


def test_no_kernel_file_sets_the_precision():
    """The engine sets it once per row, outside the timed call (it cost ~2 us a call)."""
    import workbench.kernels as shipped

    for path in Path(shipped.__file__).parent.glob("*.py"):
        assert "fp32_precision =" not in path.read_text() and "with fp32_precision" not in path.read_text(), path


@pytest.mark.parametrize("op_name", [op.name for op in OPS if op.matmul_like])
def test_matmul_like_torch_impls_leave_the_global_precision_alone(op_name):
    op = REGISTRY.op(op_name)
    spec = op.make_spec(op.test_specs[0], "float32" if DType.float32 in op.dtypes else op.dtypes[0])
    before = torch.backends.cuda.matmul.fp32_precision
    for impl in shipped_impls(op):
        if impl.backend.source_type is None:  # library kinds (pytorch, manual)
            fn = impl.builder(spec, impl.resolve_params({}), BuildContext(fp32_precision="tf32"))
            fn(*op.make_inputs(spec, "cpu", 0))
            assert torch.backends.cuda.matmul.fp32_precision == before, impl.name


def test_triton_matmul_launch_follows_the_precision():
    op = REGISTRY.op("matmul")
    impl = op.get_impl("triton")
    spec = op.make_spec({"M": 64, "N": 64, "K": 64}, "float32")
    params = impl.resolve_params({"BLOCK_K": 32})
    for precision in ("ieee", "tf32"):
        launch = impl.backend.kernel_source(impl, spec, params, BuildContext(fp32_precision=precision))
        assert launch.constexprs["INPUT_PRECISION"] == precision
    assert impl.backend.kernel_source(impl, spec, params).constexprs["INPUT_PRECISION"] == "ieee"


# -- cost models ------------------------------------------------------------------------------
@pytest.mark.parametrize("op_name", OP_NAMES)
def test_cost_models_are_whole_non_negative_numbers(op_name):
    op = REGISTRY.op(op_name)
    for shape in op.test_specs:
        for dtype in op.dtypes:
            spec = op.make_spec(shape, dtype)
            for impl in shipped_impls(op):
                cost = impl.cost(op, spec)
                assert isinstance(cost, Cost)
                for value in (cost.bytes_read, cost.bytes_written, cost.flops, cost.moved):
                    assert isinstance(value, int) and value >= 0, (impl.name, cost)
                assert cost.moved >= cost.bytes, (impl.name, cost)
                assert (cost.bytes == 0) == (op_name == "sleep")


def test_manual_softmax_moves_about_four_times_the_fused_bytes():
    """The lecture's ~8MN against 2MN (section 6.1)."""
    op = REGISTRY.op("softmax")
    spec = op.make_spec({"M": 4096, "N": 4096}, "float32")
    ratio = op.get_impl("manual").cost(op, spec).moved / op.cost(spec).bytes
    assert 4.0 <= ratio < 4.01
    assert op.get_impl("triton").cost(op, spec).moved == op.cost(spec).bytes


def test_matmul_flops_and_fused_gelu_saving():
    matmul, fused = REGISTRY.op("matmul"), REGISTRY.op("matmul_gelu")
    shape = {"M": 512, "N": 256, "K": 128}
    assert matmul.cost(matmul.make_spec(shape, "bfloat16")).flops == 2 * 512 * 256 * 128
    spec = fused.make_spec(shape, "bfloat16")
    saved = fused.get_impl("manual").cost(fused, spec).moved - fused.get_impl("triton").cost(fused, spec).moved
    assert saved == 2 * 512 * 256 * 2  # the product written and read back once, in bfloat16


# -- declarations the engine and the PTX view rely on -----------------------------------------
@pytest.mark.parametrize("op_name", OP_NAMES)
def test_impls_declare_what_they_need(op_name):
    op = REGISTRY.op(op_name)
    assert op.test_specs and op.description
    assert op.matmul_like == (op.reduction_length is not None and op_name != "cdist")
    for impl in shipped_impls(op):
        assert impl.description, impl.name
        assert impl.backend.needs <= impl.needs, impl.name
        source_type = impl.backend.source_type
        if source_type in (TritonSource, CudaSource):  # their kernels are declared, for the PTX view
            assert isinstance(impl.source, source_type), impl.name
        spec = op.make_spec(op.test_specs[0], next(d for d in op.dtypes if impl.supports(d)))
        source = impl.backend.kernel_source(impl, spec, impl.resolve_params({}))
        if isinstance(source, TritonLaunch):
            assert len(source.grid) == 3 and list(source.signature) == list(source.kernel.arg_names), impl.name
        if isinstance(source, CudaSource):
            assert source.path.exists(), impl.name
            text = source.path.read_text()
            assert all(f"{kernel}(" in text or f"{kernel}<" in text for kernel in source.kernels)


def test_sleep_sleeps_and_returns_its_sentinel():
    import time

    op = REGISTRY.op("sleep")
    spec = op.make_spec({"sleep_ms": 20})
    fn = op.get_impl("manual").builder(spec, {}, BuildContext())
    (sentinel,) = op.make_inputs(spec, "cpu", 0)
    start = time.perf_counter()
    assert fn(sentinel) is sentinel
    assert time.perf_counter() - start >= 0.020
    assert op.cost(spec).bytes == 0 and op.cost(spec).flops == 0


def test_interpreter_numpy_shim_is_idempotent():
    """kernels/__init__ installed it already (where NumPy needs it); a second install is a no-op."""
    from workbench.kernels import _interpreter_compat

    assert _interpreter_compat.install() is False


def test_a_tile_param_the_kernel_cannot_take_is_refused_before_the_build():
    """BLOCK_SIZE 0 reached the builder and failed as ZeroDivisionError."""
    from workbench.errors import WorkbenchError
    from workbench.registry import discover

    triton = discover().op("gelu").get_impl("triton")
    with pytest.raises(WorkbenchError, match="gelu/triton: parameter BLOCK_SIZE must be a power of two"):
        triton.resolve_params({"BLOCK_SIZE": 0})
    assert triton.resolve_params({"BLOCK_SIZE": 256})["BLOCK_SIZE"] == 256
