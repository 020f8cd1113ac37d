"""Launch geometry arithmetic on hand-checked numbers (sm_90 limits; no compiler, no GPU)."""

from __future__ import annotations

import pytest

from workbench.ptx.launch import SM90, blocks_per_sm, geometry_record, waves


@pytest.mark.parametrize("threads, regs, smem, expected, limiter", [
    # 4 warps: 64/4 = 16 by warps; 28 regs -> 896 -> 1024 per warp, 16384/1024 = 16 warps per
    # sub-partition x 4 = 64 warps = 16 blocks
    (128, 28, 0, 16, "warps, registers"),
    # 8 warps: 8 by warps; 40 regs -> 1280 per warp, 16384 // 1280 = 12 x 4 = 48 warps = 6 blocks
    (256, 40, 0, 6, "registers"),
    # 255 regs -> 8160 -> 8192 per warp: 2 x 4 = 8 warps = 2 blocks of 4 warps
    (128, 255, 0, 2, "registers"),
    # 100 KB + 1 KB reserved = 103424 B (a multiple of 128): 233472 // 103424 = 2
    (128, 32, 100 * 1024, 2, "shared"),
    # 1024 threads = 32 warps: 2 blocks by warps; 20 regs -> 768 per warp, 21 x 4 = 84 warps -> 2
    (1024, 20, 0, 2, "warps, registers"),
    # tiny blocks: the 32-blocks-per-SM limit
    (32, 16, 0, 32, "blocks"),
])
def test_blocks_per_sm(threads, regs, smem, expected, limiter):
    resident, limits, which = blocks_per_sm(threads, regs, smem)
    assert resident == expected and which == limiter, limits


def test_over_the_limits_fits_nothing():
    assert blocks_per_sm(128, 32, 228 * 1024)[0] == 0      # over 227 KB per block
    assert blocks_per_sm(2048, 32, 0)[0] == 0              # over 1024 threads per block
    assert blocks_per_sm(128, None, None)[1].get("registers") is None  # unknown registers: not a limit


def test_waves_and_the_rule_of_thumb():
    rec = geometry_record((262144,), 128, sm_count=132, registers=28, shared_bytes=0)
    assert rec["grid"] == [262144, 1, 1] and rec["num_warps"] == 4 and rec["block_threads"] == 128
    assert rec["blocks_per_sm"] == 16 and rec["occupancy"] == 1.0
    assert rec["waves"] == pytest.approx(262144 / (132 * 16), abs=1e-3)  # 124.121
    assert rec["notes"][0].startswith("262144 blocks >= 4 x 132 SMs = 528")
    few = geometry_record((100,), 128, sm_count=132, registers=28)
    assert few["notes"][0].startswith("only 100 blocks < 4 x 132 SMs = 528")
    assert any("less than one wave" in n for n in few["notes"])


def test_tail_effect_note():
    per_wave = 132 * 16
    rec = geometry_record((2 * per_wave + 200,), 128, sm_count=132, registers=28)
    assert rec["waves"] == pytest.approx(2 + 200 / per_wave, abs=1e-3)
    assert any("tail effect" in n and "9% full" in n for n in rec["notes"])


def test_waves_none_when_nothing_fits():
    assert waves(1000, 132, 0) is None
    assert SM90.max_threads_per_sm == 2048 and SM90.shared_per_sm == 228 * 1024
