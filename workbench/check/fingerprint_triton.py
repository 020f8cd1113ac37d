"""`fingerprint` (workbench/check/inputs.py) of a CUDA tensor in one Triton pass: the same hash,
bit for bit, as the torch path, which launches ~55 elementwise kernels per 2^22-element block.

Why: the check takes the fingerprints of a row's inputs before and after every checked call
(about nine per row); on an H100 the torch path costs ~75 ms per GiB of input each time
(64 blocks x ~55 kernels over int64 temporaries), most of a 16384^2 float32 row's check. One
pass reads the bits once and keeps the mixing in registers.

Same hash: every element's word is computed as in inputs.fingerprint (splitmix64's finaliser on
the position's key, the value's bits sign-extended to 64 added, the finaliser again), in uint64
so that shifts are logical and products wrap as torch's int64 products do; each program sums
its TILE words per lane (wrapping), and the tiles of one 2^22-element block are summed on the
host side in int64 (wrapping): a sum modulo 2^64 does not depend on its order.
tests/test_fingerprint_triton.py compares the two paths under TRITON_INTERPRET=1.

    fingerprint_bits(bits, block_elements, mix, lane_keys)  # bits: contiguous 1-D int8/uint8/int16/int32/int64
"""

from __future__ import annotations

import torch

from workbench.triton_support import jit, tl, triton

TILE = 4096
# the integer views the kernel reads (what inputs.fingerprint's torch path turns to int64)
BIT_DTYPES = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)


@jit
def _finalise(x, m1, m2):
    """splitmix64's finaliser on uint64 words (inputs._mix_)."""
    x = x ^ (x >> 30)
    x = x * m1
    x = x ^ (x >> 27)
    x = x * m2
    x = x ^ (x >> 31)
    return x


@jit
def _fingerprint_tiles(bits_ptr, out_ptr, n, m0, m1, m2, k0, k1, TILE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    start = pid * TILE
    lane = tl.arange(0, TILE)  # int32 offsets from a 64-bit base: the loads stay vectorised
    mask = lane < n - start
    value = tl.load(bits_ptr + start + lane, mask=mask, other=0).to(tl.int64).to(tl.uint64, bitcast=True)
    pos = (start + lane.to(tl.int64)).to(tl.uint64, bitcast=True)
    m0 = m0.to(tl.uint64, bitcast=True)
    m1 = m1.to(tl.uint64, bitcast=True)
    m2 = m2.to(tl.uint64, bitcast=True)
    word = _finalise(_finalise(pos * m0 + k0.to(tl.uint64, bitcast=True), m1, m2) + value, m1, m2)
    lane0 = tl.sum(tl.where(mask, word, tl.zeros_like(word)), axis=0)
    word = _finalise(_finalise(pos * m0 + k1.to(tl.uint64, bitcast=True), m1, m2) + value, m1, m2)
    lane1 = tl.sum(tl.where(mask, word, tl.zeros_like(word)), axis=0)
    tl.store(out_ptr + pid * 2, lane0.to(tl.int64, bitcast=True))
    tl.store(out_ptr + pid * 2 + 1, lane1.to(tl.int64, bitcast=True))


def fingerprint_bits(bits: torch.Tensor, block_elements: int, mix: tuple[int, int, int],
                     lane_keys: tuple[int, int]) -> torch.Tensor:
    """(blocks, 2) int64, as inputs.fingerprint: per `block_elements` block of `bits` (contiguous,
    1-D, a dtype in BIT_DTYPES), two hash lanes. mix: the three splitmix64 constants (the
    position's multiplier, the finaliser's two), lane_keys: the two lanes' keys, as int64 values
    (inputs._MIX, inputs._LANE_KEYS). block_elements must be a multiple of TILE. Raises
    ValueError otherwise."""
    if bits.dtype not in BIT_DTYPES or bits.dim() != 1 or not bits.is_contiguous():
        raise ValueError(f"fingerprint_bits: a contiguous 1-D integer tensor, got {bits.dtype} "
                         f"{tuple(bits.shape)} (contiguous: {bits.is_contiguous()})")
    if block_elements % TILE:
        raise ValueError(f"fingerprint_bits: block_elements {block_elements} is not a multiple of {TILE}")
    n = bits.numel()
    if n == 0:
        return torch.zeros((0, 2), dtype=torch.int64, device=bits.device)
    tiles = triton.cdiv(n, TILE)
    partial = torch.empty((tiles, 2), dtype=torch.int64, device=bits.device)
    _fingerprint_tiles[(tiles,)](bits, partial, n, *mix, *lane_keys, TILE=TILE)
    per_block = block_elements // TILE
    blocks = triton.cdiv(n, block_elements)
    missing = blocks * per_block - tiles
    if missing:
        partial = torch.cat([partial, partial.new_zeros((missing, 2))])
    return partial.view(blocks, per_block, 2).sum(dim=1)
