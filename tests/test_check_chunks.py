"""The memory-lean check (issue 14): chunked statistics equal the whole-tensor ones, no boolean-mask
indexing, inputs made and refilled in place block by block, fingerprints that see a changed input,
and RowCheck's input sets (the same pointers, new values)."""

from __future__ import annotations

import pytest
import torch

from workbench.check.chunks import CheckChunks, check_workspace_bytes
from workbench.check.inputs import BLOCK_ELEMENTS, fingerprint, first_changed_block, periodic_fill_, seeded_normal
from workbench.registry import BuildContext, discover
from workbench.check.row import RowCheck, compare_output

REGISTRY = discover()
CTX = BuildContext()
CASES = [("add", {"M": 37, "N": 1000}, "float16"), ("gelu", {"M": 3, "N": 4097}, "bfloat16"),
         ("softmax", {"M": 257, "N": 257}, "float32"), ("matmul", {"M": 100, "N": 130, "K": 300}, "float32"),
         ("cdist", {"M": 30, "N": 26, "D": 100}, "float32"), ("mlp", {"batch": 8, "dim": 64, "layers": 2, "steps": 1},
                                                              "float32")]


def _spoiled(op, spec, inputs):
    """The reference in the output dtype with a few spoiled elements (a wrong output)."""
    impl = next(iter(op.impls.values()))
    from workbench.check.row import reference_output

    out = reference_output(op, impl, inputs).to(op.out_dtype(spec).torch)
    flat = out.view(-1)
    flat[flat.numel() // 3] += 1.0
    flat[-1] *= 1.5
    return impl, out


@pytest.mark.parametrize("name,shape,dtype", CASES, ids=[c[0] for c in CASES])
def test_chunked_statistics_equal_the_whole_tensor_ones(name, shape, dtype):
    op = REGISTRY.op(name)
    spec = op.make_spec(shape, dtype)
    inputs = op.make_inputs(spec, "cpu", 3)
    impl, out = _spoiled(op, spec, inputs)
    whole = compare_output(op, impl, spec, CTX, inputs, out, chunk_elements=2 ** 30)
    chunked = compare_output(op, impl, spec, CTX, inputs, out, chunk_elements=97)
    assert whole.chunks == 1 and (chunked.chunks > 3 or op.check_chunks is None)
    assert not whole.passed and chunked.gate == whole.gate
    assert chunked.first_bad_index == whole.first_bad_index
    for key in ("max_abs_err", "max_rel_err", "rel_l2_err", "ref_rms", "atol"):
        assert getattr(chunked, key) == pytest.approx(getattr(whole, key), rel=1e-12), key


def test_the_comparison_uses_no_boolean_mask_indexing(monkeypatch):
    """Boolean indexing materialises int64 index tensors the size of the chunk (issue 14)."""
    op = REGISTRY.op("gelu")
    spec = op.make_spec({"M": 3, "N": 4097}, "float32")
    inputs = op.make_inputs(spec, "cpu", 0)
    impl, out = _spoiled(op, spec, inputs)
    getitem = torch.Tensor.__getitem__

    def no_masks(self, index):
        parts = index if isinstance(index, tuple) else (index,)
        assert not any(torch.is_tensor(p) and p.dtype == torch.bool for p in parts), "boolean-mask indexing"
        return getitem(self, index)
    monkeypatch.setattr(torch.Tensor, "__getitem__", no_masks)
    monkeypatch.setattr(torch, "nonzero", lambda *a, **k: pytest.fail("torch.nonzero in the check"))
    report = compare_output(op, impl, spec, CTX, inputs, out, chunk_elements=1000)
    assert report.first_bad_index == [1, 0] and report.chunks == 13


def test_seeded_inputs_are_blockwise_deterministic_and_refill_in_place():
    a = seeded_normal((3, BLOCK_ELEMENTS // 2 + 5), torch.bfloat16, "cpu", seed=1, stream=0)
    b = seeded_normal((3, BLOCK_ELEMENTS // 2 + 5), torch.bfloat16, "cpu", seed=1, stream=0)
    assert a.dtype == torch.bfloat16 and torch.equal(a, b)
    other = seeded_normal(a.shape, torch.bfloat16, "cpu", seed=1, stream=1)
    assert not torch.equal(a, other)
    pointer = a.data_ptr()
    again = seeded_normal(a.shape, torch.bfloat16, "cpu", seed=2, stream=0, out=a)
    assert again is a and a.data_ptr() == pointer and not torch.equal(a, b)
    with pytest.raises(ValueError, match="expected contiguous"):
        seeded_normal((2, 2), torch.float32, "cpu", 0, 0, out=torch.empty(2, 3))


def test_fingerprints_see_a_changed_or_swapped_element_and_a_sign_of_zero():
    t = seeded_normal((2 * BLOCK_ELEMENTS + 7,), torch.float32, "cpu", 0, 0)
    before = fingerprint(t)
    assert first_changed_block(before, fingerprint(t)) is None
    t[BLOCK_ELEMENTS + 3] += 1.0
    assert first_changed_block(before, fingerprint(t)) == 1
    u = torch.tensor([0.0, 1.0, 2.0])
    before = fingerprint(u)
    assert first_changed_block(before, fingerprint(u[[0, 2, 1]])) == 0   # a swap
    assert first_changed_block(before, fingerprint(torch.tensor([-0.0, 1.0, 2.0]))) == 0


def test_periodic_fill_writes_every_period():
    t = torch.zeros(2, 9)
    periodic_fill_(t, [1.0, 2.0], 4)
    assert t.view(-1)[:10].tolist() == [1, 2, 0, 0, 1, 2, 0, 0, 1, 2]
    assert t.view(-1)[-2:].tolist() == [1, 2]  # 18 = 4 * 4 + 2: the tail gets its share


def _row_check(name, shape, dtype, seed=5):
    op = REGISTRY.op(name)
    spec = op.make_spec(shape, dtype)
    impl = op.get_impl("pytorch")
    inputs = op.make_inputs(spec, "cpu", seed)
    return op, impl, spec, inputs, RowCheck(op, impl, spec, CTX, inputs, seed)


def test_row_check_passes_a_right_implementation_on_every_set():
    op, impl, spec, inputs, check = _row_check("softmax", {"M": 8, "N": 100}, "float32")
    fn = impl.builder(spec, {}, CTX)
    pointers = [t.data_ptr() for t in inputs]
    report = check.run_all(fn, fn(*inputs))
    assert report.passed and report.sets_checked == ["first", "special", "timed"], report
    assert [t.data_ptr() for t in inputs] == pointers


def test_row_check_fails_an_implementation_that_modifies_its_input():
    op, impl, spec, inputs, check = _row_check("add", {"M": 4, "N": 50}, "float32")

    def in_place(x, y):
        return x.add_(y)
    report = check.run_all(in_place, in_place(*inputs))
    assert not report.passed and report.gate == "inputs" and "modified its input 0" in report.detail


def test_row_check_catches_a_stale_result_only_at_the_timed_set():
    op, impl, spec, inputs, check = _row_check("cdist", {"M": 6, "N": 5, "D": 3}, "float32")  # no special set
    right = impl.builder(spec, {}, CTX)
    first = right(*inputs)
    report = check.run_all(lambda *args: first, first)
    assert not report.passed and report.input_set == "timed" and report.sets_checked == ["first", "timed"]


def test_workspace_is_a_chunk_not_a_float64_copy_of_everything():
    """Issue 14: a float16 add of 2^31 + 2^20 elements was estimated at 204 GiB (34x a tensor)."""
    n = 2 ** 31 + 2 ** 20
    ws = check_workspace_bytes(CheckChunks.flat(0, 1), None, [(1, n), (1, n)], n, 0)
    assert ws < 2 * 2 ** 30
    matmul = check_workspace_bytes(CheckChunks.rows(0), None, [(8192, 8192), (8192, 8192)], 8192 * 8192, 0)
    assert 8 * 8192 * 8192 < matmul < 8 * 8192 * 8192 + 2 * 2 ** 30  # all of B in float64, a chunk of A


def test_needed_factor_of_a_wrong_shape_is_infinite_not_an_error():
    """The check stage asks how far over the tolerance a known-wrong output is; one that returns an
    input of another shape (cdist's (M, D) for (M, N)) passes under no factor, so (inf, inf)."""
    import math

    from workbench.check.compare import needed_factor
    from workbench.check.tolerance import Tolerance

    ref = torch.randn(3, 4097, dtype=torch.float64)
    tol = Tolerance(rtol=1e-6, atol_rms=0.0, atol_floor=1e-6, norm_rtol=1e-6)
    assert needed_factor(torch.randn(3, 5), ref, tol) == (math.inf, math.inf)
    assert needed_factor(ref.float(), ref, tol)[0] < 1.0
