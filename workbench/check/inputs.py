"""Seeded check inputs made in place, block by block, in the target dtype (issue 14).

`seeded_normal` fills a tensor BLOCK_ELEMENTS at a time, each block from its own generator
seeded by (seed, stream, block): no float32 staging of the whole tensor, the same values however
the caller slices its work, and refilling the same tensor with a new seed keeps its pointer
(the check's second input set, MEASUREMENT.md rule 6). `fingerprint` hashes a tensor's bits
per block so that the check can tell whether an implementation modified its inputs without a
pristine copy. `periodic_fill_` writes special values (op-declared special input sets).
"""

from __future__ import annotations

import os
from typing import Iterable, Sequence

import torch

from workbench.check.chunks import FINGERPRINT_BLOCK

BLOCK_ELEMENTS = FINGERPRINT_BLOCK  # 8 MiB of float16: small next to any tensor worth chunking
_SEED_MIX = (1_000_003, 1_000_033)
# Integer views of each float dtype (same size), for bitwise fingerprints.
_BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16,
         torch.bfloat16: torch.int16, torch.bool: torch.uint8, torch.float8_e4m3fn: torch.uint8,
         torch.float8_e5m2: torch.uint8}


def block_seed(seed: int, stream: int, block: int) -> int:
    """The generator seed of one block of one input stream (deterministic, < 2^63)."""
    return ((int(seed) * _SEED_MIX[0] + int(stream)) * _SEED_MIX[1] + int(block)) % (2 ** 63)


def seeded_normal(shape: Sequence[int], dtype: torch.dtype, device: str | torch.device, seed: int,
                  stream: int, *, scale: float = 1.0, out: torch.Tensor | None = None) -> torch.Tensor:
    """Standard normal values times `scale`, drawn directly in `dtype`, block by block.

    stream: which input of the op this is (0, 1, ...): each gets its own values for one seed.
    out: fill this tensor in place instead of allocating (its pointer is kept); it must be
    contiguous with the given shape and dtype (ValueError otherwise).
    """
    shape = tuple(int(s) for s in shape)
    if out is None:
        out = torch.empty(shape, dtype=dtype, device=device)
    elif tuple(out.shape) != shape or out.dtype != dtype or not out.is_contiguous():
        raise ValueError(f"seeded_normal: out is {tuple(out.shape)} {out.dtype} "
                         f"(contiguous: {out.is_contiguous()}), expected contiguous {shape} {dtype}")
    flat = out.view(-1)
    if out.device.type == "meta":  # shapes only (the size estimate)
        return out
    for block, start in enumerate(range(0, flat.numel(), BLOCK_ELEMENTS)):
        gen = torch.Generator(device=out.device).manual_seed(block_seed(seed, stream, block))
        piece = flat[start:start + BLOCK_ELEMENTS].normal_(generator=gen)
        if scale != 1.0:
            piece.mul_(scale)
    return out


def periodic_fill_(t: torch.Tensor, values: Iterable[float], period: int) -> torch.Tensor:
    """Write values[j] at every flat position p of `t` with p % period == j (in place, strided
    fills: no temporaries). Raises ValueError when there are more values than the period."""
    values = list(values)
    if len(values) > period:
        raise ValueError(f"periodic_fill_: {len(values)} values do not fit a period of {period}")
    flat = t.view(-1)
    whole = flat.numel() // period * period
    grid = flat[:whole].view(-1, period)
    tail = flat[whole:]
    for j, value in enumerate(values):
        grid[:, j].fill_(value)
        if j < tail.numel():
            tail[j].fill_(value)
    return t


_MIX = (-7046029254386353131, -4658895280553007687, 0x94D049BB133111EB - 2**64)  # splitmix64 odd constants
_LANE_KEYS = (0x243F6A8885A308D3, 0x13198A2E03707344)  # two independent lanes (pi's digits)


def _shr(x: torch.Tensor, s: int) -> torch.Tensor:
    """Logical right shift of int64 words (torch's >> is arithmetic)."""
    return (x >> s) & ((1 << (64 - s)) - 1)


def _mix_(x: torch.Tensor) -> torch.Tensor:
    """splitmix64's finaliser in place on int64 words (multiplies wrap): a bijection whose output
    bits each depend on every input bit."""
    x ^= _shr(x, 30)
    x *= _MIX[1]
    x ^= _shr(x, 27)
    x *= _MIX[2]
    x ^= _shr(x, 31)
    return x


def fingerprint(t: torch.Tensor) -> torch.Tensor:
    """(blocks, 2) int64: per BLOCK_ELEMENTS block of t's flattened bits, two hash lanes. Each
    element's bits are keyed by its flat position and the lane, mixed (splitmix64 finaliser:
    every output bit depends on every bit of value and position), and the block sums the mixed
    words (wrapping). A changed element, or any permutation (two elements 65521 apart swapped:
    the old position-weighted sum collided there, issue 38), changes a lane except with
    probability ~2^-64 per lane; computed on the tensor's device, no copy to the host. NaN
    payloads and -0 are seen since bits are hashed."""
    flat = t.detach().reshape(-1)
    bits = flat.view(_BITS[flat.dtype]) if flat.dtype in _BITS else flat
    if _one_pass(bits):  # the same hash in one Triton pass (check/fingerprint_triton.py)
        from workbench.check.fingerprint_triton import fingerprint_bits

        try:
            return fingerprint_bits(bits, BLOCK_ELEMENTS, _MIX, _LANE_KEYS)
        except Exception as exc:  # noqa: BLE001 - Triton cannot build for this GPU: the torch path's hash is the same
            _ONE_PASS_FAILED.append(f"{type(exc).__name__}: {exc}"[:300])
    sums = []
    for start in range(0, bits.numel(), BLOCK_ELEMENTS):
        block = bits[start:start + BLOCK_ELEMENTS].to(torch.int64)
        pos = torch.arange(start, start + block.numel(), device=block.device, dtype=torch.int64)
        lanes = []
        for key in _LANE_KEYS:
            word = _mix_(pos * _MIX[0] + key)   # the position's key, then the value on top
            word += block
            lanes.append(_mix_(word).sum())
        sums.append(torch.stack(lanes))
    return torch.stack(sums) if sums else torch.zeros((0, 2), dtype=torch.int64)


_ONE_PASS_FAILED: list[str] = []  # why the Triton pass failed in this process (then never tried again)


def _one_pass(bits: torch.Tensor) -> bool:
    """Whether `bits` is hashed by the Triton pass: a CUDA tensor of an integer view it reads,
    Triton compiled (not interpreted, not missing), WORKBENCH_FINGERPRINT not `torch`, and the
    pass has not failed in this process (a GPU this Triton cannot build for: the torch path)."""
    if bits.device.type != "cuda" or os.environ.get("WORKBENCH_FINGERPRINT", "") == "torch" or \
            os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") or _ONE_PASS_FAILED:
        return False
    from workbench.triton_support import HAVE_TRITON

    return HAVE_TRITON and bits.dtype in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)


def first_changed_block(before: torch.Tensor, after: torch.Tensor) -> int | None:
    """Index of the first block whose fingerprint differs, or None when they are equal."""
    if before.shape != after.shape:
        return 0
    differs = (before != after).any(dim=1)
    if not bool(differs.any()):
        return None
    return int(torch.argmax(differs.to(torch.uint8)))


def large_and_subnormal(dtype: torch.dtype, fraction: float = 0.75) -> tuple[float, float]:
    """(fraction x the dtype's largest finite value, a quarter of its smallest normal: a
    subnormal), the magnitudes special input sets use (0.75: twice it overflows; 0.25: not)."""
    info = torch.finfo(dtype)
    return fraction * info.max, info.smallest_normal / 4
