"""The arithmetic of softmax.cu's KEEP path, emulated in torch on CPU, passes the engine's check.

KEEP (kernels/_onepass.py KEPT_SHAPES) keeps e = exp(x - m_thread) * 2^15 over the input as
float16 in 16-bit rows (float32 in float32 rows) and writes e * exp(m_thread - max) / sum / 2^15.
The kernel itself runs only on the GPU (tune19 checks it there); this checks the number scheme,
thread by thread as the kernel strides its packs, on the first and special input sets.
"""

from __future__ import annotations

import pytest
import torch

from workbench.registry import BuildContext, discover
from workbench.check.row import compare_output

LOG2E = 1.4426950408889634


def _keep_softmax(x: torch.Tensor, threads: int, packs: int, vec: int, store: torch.dtype) -> torch.Tensor:
    """Row softmax as KEEP computes it: rows split into slices of threads * packs * vec columns,
    pack i of a slice owned by thread i % threads; e stored in `store` (shifted by 2^15 in 16 bits)."""
    m_rows, n = x.shape
    slice_cols = threads * packs * vec
    shift = 15.0 if store == torch.float16 else 0.0
    xf = x.float().reshape(m_rows, n // slice_cols, packs, threads, vec)
    # fmaxf (and __hmax2) ignore NaN: the max over the thread's non-NaN values.
    m_t = torch.where(torch.isnan(xf), torch.full_like(xf, -torch.inf), xf).amax(dim=(2, 4), keepdim=True)
    m0 = torch.where(m_t == -torch.inf, torch.zeros_like(m_t), m_t)
    e = torch.exp2((xf - m0) * LOG2E + shift)
    s_t = e.sum(dim=(2, 4), keepdim=True) * 2.0 ** -shift
    kept = e.to(store).float()
    row_max = m_t.amax(dim=(1, 3), keepdim=True)
    scale = torch.where(m_t == -torch.inf, torch.zeros_like(m_t), torch.exp2((m_t - row_max) * LOG2E))
    row_sum = (s_t * scale).sum(dim=(1, 3), keepdim=True)
    inv_sum = 1.0 / row_sum
    c = torch.where(m_t == -torch.inf, 0.0 * inv_sum, scale * inv_sum * 2.0 ** -shift)
    return (kept * c).reshape(m_rows, n).to(x.dtype)


@pytest.mark.parametrize("dtype, threads, packs, store", [
    ("bfloat16", 1024, 16, torch.float16), ("float16", 512, 8, torch.float16), ("float32", 1024, 16, torch.float32)])
def test_the_keep_scheme_passes_the_check_on_both_input_sets(dtype, threads, packs, store):
    op = discover().op("softmax")
    impl = op.get_impl("cuda")
    spec = op.make_spec({"M": 3, "N": 262144}, dtype)
    ctx = BuildContext(device="cpu", interpret=True)
    vec = 16 // spec.dtype.itemsize
    inputs = op.make_inputs(spec, "cpu", 0)
    report = compare_output(op, impl, spec, ctx, inputs, _keep_softmax(inputs[0], threads, packs, vec, store))
    assert report.passed, report.detail
    special = op.fill_special(spec, inputs, 1)
    if special is not None:
        out = _keep_softmax(special[0], threads, packs, vec, store)
        report = compare_output(op, impl, spec, ctx, special, out, input_set="special")
        assert report.passed, report.detail


def test_keeping_the_exponentials_in_bfloat16_instead_would_double_the_worst_error():
    """Why float16 (scaled): a bfloat16 e is a second rounding as coarse as the output's, so the
    worst relative error nears the elementwise rtol (2 u = 2^-7); float16's stays near 1 u. Outputs
    below 2^-20 are left out: there float16's subnormals round absolutely (far under atol)."""
    op = discover().op("softmax")
    spec = op.make_spec({"M": 3, "N": 262144}, "bfloat16")
    x = op.make_inputs(spec, "cpu", 0)[0]
    ref = torch.softmax(x.double(), dim=-1)
    big = ref > 2.0 ** -20
    worst = {store: ((_keep_softmax(x, 1024, 16, 8, store).double() - ref).abs() / ref)[big].max().item()
             for store in (torch.float16, torch.bfloat16)}
    assert worst[torch.float16] < 1.2 * 2.0 ** -8 < 1.6 * 2.0 ** -8 < worst[torch.bfloat16], worst
