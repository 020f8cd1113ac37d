"""The Hopper Triton GEMM behind `matmul` and `matmul_gelu`'s `triton` in 16-bit dtypes.

    C = act(A @ B)        A: (M, K), B: (K, N) -> C: (M, N); act: none or GeLU (tanh form)

Tiles come in through the tensor memory accelerator (TMA: host `TensorDescriptor`s, so every load
is a `cp.async.bulk.tensor` into shared memory and no thread computes an address), feed `wgmma`,
and C leaves through TMA too. The grid is persistent: NUM_PROGRAMS programs (one per SM) walk the
tiles NUM_PROGRAMS apart in GROUP_M-grouped order, and the flattened tile loop lets the loads of a
program's next tile start while its epilogue (GeLU, store) runs. SUBTILE stores C in two
BLOCK_N / 2 halves, which frees shared memory for the pipeline. Addresses are the TMA unit's
(int32 coordinates per dimension, 64-bit base): tensors past 2^31 elements need no other care.

Config space and choice: one candidate list per device (candidate_lists: the H200's CANDIDATES, the
H100's H100_CANDIDATES, their union for any other device, tuned there on first use), timed on the
device by workbench/tuning.py, the choice cached per device and Triton version. On one
H200 (exploration run, results/h200/exploration-kernels; cuBLAS measured in the same run) the best of them reached:
8192^3 bfloat16 1.003x cuBLAS (128x256x64, 8 warps, 3 stages, SUBTILE, GROUP_M 16), float16 1.015x
(the same with GROUP_M 8); 4096^3 0.97x (bfloat16) and 0.93x (float16, where the tutorial's
pointer kernel was best), within the 9% spread of cuBLAS's own repeat at 4096^3. TMA needs 16-byte
aligned rows (K and N multiples of 8 in 16-bit dtypes); other shapes use kernels/matmul.py's
pointer kernel.
"""

from __future__ import annotations

from typing import Any, Mapping

from workbench.kernel_source import TRITON_DTYPE, TritonLaunch

from workbench.tuning import CandidateLists
from workbench.triton_support import jit, tl

SM90_SMS = 132  # H200 multiprocessors: the persistent grid where no device can be asked
TMA_VERSION = "tma7"  # the autotune cache key's version: bump when the kernel or a candidate list changes

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, SUBTILE, GROUP_M); the first is the default.
# Shared memory (Triton 3.6, sm_90 AOT): 128x256x64 s3 sub1 176 KiB, s4 sub1 224 KiB, sub0 s3 208 KiB
# (sub0 s4 would need 272 KiB: over sm_90's 227). Pruned (issue #19's tuning) to the 128x256x64
# family, from tune19 --quick at 4096^3 bfloat16 (results/history/h200/2026-12-01b/tune19/tune19.json,
# cuBLAS 0.1738 ms in the same run, spreads ~0.5%): s4 sub1 G8 0.993x, s3 sub0 G8 0.993x, s3 sub1
# G16 0.988x (the 8192^3 bfloat16 winner, 1.003x, in the exploration), s3 sub1 G8 0.988x (the
# default: 8192^3 float16's 1.015x). Dropped: 128x128x64 w8 s4/s5, 128x128x128 and 256x128 (0.85-0.89x);
# kept of the 128x128 tiles only the 4-warp s4 (0.92x), the neighbour for problems too small to
# fill 132 SMs with 128x256 tiles. Added: s4 sub1 GROUP_M 4 (the winner's stages with a narrower
# group: 4096^3 has 32 x 16 tiles, so GROUP_M 8 walks 8 tile rows = 1 MiB of A per column step
# and 4 halves it; not in that sweep). Not added: warp_specialize=True, which in Triton
# 3.6 for sm_90 compiles to the same loop unflattened (no setmaxnreg, no producer warps); nor a
# Gluon producer/consumer ping-pong kernel on 128 x 128 tiles (cdbe704: 0.93-0.96x cuBLAS at
# 4096^3, 0.96-0.99x at 8192^3 on the H200, behind these configs; results/history/h200/2026-12-03d,
# results/history/kernels-h200.md).
# STREAMK (last field, 1): _tma_streamk_kernel, the hybrid stream-K form of the same tile, for
# the two configs the H200 picked most (4096^3 and 8192^3, bfloat16 and float16). Why: 128 x 256
# tiles leave a partial last wave at both sizes (4096^3: 512 tiles = 3.88 waves of 132, run as 4;
# 8192^3: 2048 = 15.5 as 16), ~3% of the SMs' time idle; cuBLAS's 256 x 128 tiles have the same
# 3.88 waves, so the Triton kernel was at 0.988-1.019x cuBLAS (H200, misses stage).
# Tried and dropped: two programs an SM (a persistent grid of 2 x 132), each one warp group on a
# 128 x 128 x 64 tile, 3 stages (112 KiB of shared memory, two fit an SM), so that one program's
# epilogue runs while the other's wgmma keep the tensor cores busy (cuBLAS's "ping-pong"). The
# tuner's timings on the H200 (results/history/h200/2026-12-03c) put it behind the 128 x 256 default:
# 4096^3 bfloat16 0.1964 against 0.1896 ms, float16 0.2109 against 0.1980, the fused GeLU at
# 8192^3 1.6382 against 1.5279. Also tried and dropped for the fused kernel: the GeLU epilogue's
# reciprocal by two Newton steps on the FMA pipe instead of the SFU's (one SFU operation an element
# instead of two, as exact in float16: 0.499 ulp under the interpreter), which needed 175 registers
# against 161 and ran 1.6717 ms against 1.5691 for the same config with the division (tuner's
# timings, H200, commit 5b981e3).
# The last three (issue #40) are the H100's winners not yet in this list (8192^3 fused bf16, 4096^3
# fp16, 4096^3 bf16 runner-up there); untimed on the H200 so far: its tuner times them at build.
CANDIDATES = (
    (128, 256, 64, 8, 3, 1, 8, 0), (128, 256, 64, 8, 4, 1, 8, 0), (128, 256, 64, 8, 3, 0, 8, 0),
    (128, 256, 64, 8, 3, 1, 16, 0), (128, 256, 64, 8, 4, 1, 4, 0), (128, 128, 64, 4, 4, 1, 8, 0),
    (128, 256, 64, 8, 4, 1, 8, 1), (128, 256, 64, 8, 3, 1, 8, 1),
    (128, 256, 64, 8, 4, 1, 16, 1), (128, 256, 64, 8, 4, 1, 16, 0), (128, 256, 64, 8, 3, 0, 16, 0),
)  # the H200's list (above)
# The H100's list (issue #40): benchmarks/gemm_sweep.py on one H100 80GB HBM3
# (results/history/h100/2026-12-06-gemm-sweep; torch
# 2.11, triton 3.6; 17 configs, every one beside cuBLAS in 5 interleaved do_bench rounds, L2
# flushed; the card at its 700 W cap, SM clock 1335-1755 MHz under load, so round-to-round spreads
# of 2-5%). Medians against cuBLAS (matmul) or the faster of manual and torch.compile (GeLU):
#   matmul 4096^3 bf16: s3 sub1 G16 0.999x (cuBLAS 0.1902 ms); fp16: s4 sub1 G16 0.988x (0.1979)
#   matmul 8192^3 bf16: s3 sub1 G8 1.035x (1.6009); fp16: s3 sub1 G8 stream-K 1.013x (1.6518)
#   matmul_gelu 4096^3: s3 sub1 G16 1.064x bf16, s4 sub1 G16 1.068x fp16
#   matmul_gelu 8192^3: s4 sub1 G16 stream-K 1.057x bf16, s3 sub0 G8 1.039x fp16
# Kept: every config within 3% of a row's winner in some row. Dropped for the H100: 256 x 128 (0.83-
# 0.89x), 128 x 128 x 64 w4 (0.91-0.94x), 128 x 256 x 32 s6 (0.92-0.95x), GROUP_M 32 and s4 G4
# (never within 3%); s4 without SUBTILE needs 256 KiB of shared memory (over the 227 KiB).
H100_CANDIDATES = (
    (128, 256, 64, 8, 3, 1, 8, 0), (128, 256, 64, 8, 3, 1, 16, 0), (128, 256, 64, 8, 4, 1, 16, 0),
    (128, 256, 64, 8, 4, 1, 8, 0), (128, 256, 64, 8, 3, 0, 8, 0), (128, 256, 64, 8, 3, 0, 16, 0),
    (128, 256, 64, 8, 3, 1, 4, 0), (128, 256, 64, 8, 3, 1, 8, 1), (128, 256, 64, 8, 4, 1, 16, 1),
    (128, 256, 64, 8, 4, 1, 8, 1),
)
# Tried for 4096^3 and dropped (issue #40, second H100 call, tuner's rounds, 2026-12-06): BLOCK_K
# 128 in two stages (192 KiB of A and B tiles + 32 KiB for the SUBTILE store; half the K
# iterations and barrier waits a tile): 0.2711 ms against 0.1856 for the winner at 4096^3 bf16,
# 2.07 against 1.46 ms at 8192^3 (two stages leave one load in flight behind each wgmma).
# Tried for 4096^3 on the H100 and dropped (issue #40, benchmarks/gemm_variants.py, one call, Triton
# 3.6, 5 interleaved rounds, results/history/h100/2026-12-06-variants/; x cuBLAS at 4096^3 bf16 /
# fp16, cuBLAS 0.1909 / 0.2003 ms; this list's best there 1.005x / 0.993x, s3 SUBTILE G8). The
# noise band: warp_specialize=True compiles to PTX identical to the unflattened loop, and the pair
# ran 0.975x / 0.998x against 0.984x / 0.976x. num_ctas=2 (2-CTA clusters; the grid is SMs / 2
# clusters): Triton splits the program's tile over the cluster and each CTA loads its own copy of
# the shared operand (shared::cluster TMA copies, no .multicast::cluster, in 3.6 and 3.9; ncu: 8%
# more L2 bytes, tensor pipe 93.5% against 93.75%): 256x256 (a 128x256 half a CTA) 0.985x /
# 0.973x, 128x512 0.960x / 0.950x, 128x256 (128x128 a CTA) 0.814x / 0.859x; SUBTILE with num_ctas=2
# fails to compile in Triton 3.6 (LinearLayout error). maxnreg 232 0.998x / 0.978x (a 256-thread
# program alone on its SM already gets 255 registers). C in four 128x64 parts: s3 G16 1.003x /
# 1.003x (8192^3 0.989x / 1.012x), s4 G16 0.995x / 0.993x: a tie, not added. The tile loop
# unflattened 0.984x / 0.976x; descriptors made in the kernel 0.973x / 0.942x; 128x128x64 w4 s5
# 0.940x / 0.933x; 256x128 w8 s4 SUBTILE 0.875x / 0.868x.
# The H100's extra candidates for the fused GeLU epilogue (issue #40): the first configs of
# H100_CANDIDATES with the GeLU's tanh taken by one MUFU instruction (GELU 1: tanh.approx.f32)
# instead of an exp2 and a reciprocal (two MUFU instructions an element). Why: at 8192^3 the
# fused kernel ran 1.4372 ms against 1.4169 for the same GEMM without GeLU (H100, results/h100.md),
# 1.3 us a 128 x 256 tile on 132 SMs, about the 32768 x 2 MUFU ops / 16 a clock of one tile's
# epilogue, which does not overlap the tensor cores. Measured (H100, tuner's rounds at 8192^3
# bf16, 2026-12-06, results/history/h100/2026-12-06-gemm40/): GELU 1 faster than GELU 0 in each of
# the four pairs, s3 SUBTILE G8 1.4642 against 1.6020 ms, s3 G16 1.5155 / 1.5696, s4 G8 1.5274 /
# 1.5370, s4 G16 1.5403 / 1.5702; the winner (s3 G8 GELU 1) level with the best plain GEMM of the
# same tuning (1.4645, stream-K); under ncu 1365.8 us against 1369.2 + 87.1 for cuBLAS then GeLU. Only from K = FAST_TANH_MIN_K: tanh.approx.f32
# is within 2^-11 of tanh, so GeLU's absolute error reaches 0.5 |x| 2^-11 <= 1.3e-3 (|x| <= 5.2;
# past that the instruction gives +-1 exactly); the check's accumulation term, 16 u_f32 sqrt(K)
# rms(ref) ~ 6.7e-7 K on the standard-normal inputs, covers that from K ~ 1900 (2x margin: 4096).
H100_GELU_CANDIDATES = tuple(c + (1,) for c in H100_CANDIDATES[:4])
FAST_TANH_MIN_K = 4096
CONFIG_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "SUBTILE", "GROUP_M", "STREAMK", "GELU")


def _dicts(configs) -> list[dict[str, int]]:
    """CONFIG_KEYS dicts of candidate tuples (GELU, when a tuple leaves it out, 0: exp2 and divide)."""
    return [dict(zip(CONFIG_KEYS, tuple(c) + (0,) * (len(CONFIG_KEYS) - len(c)))) for c in configs]


def candidate_lists(activation: str = "none", k: int = 0) -> CandidateLists:
    """The autotune candidates per device (CONFIG_KEYS dicts): the H200's and the H100's lists,
    and for any other device the union of both (the H200's order first), tuned on first use.
    activation "gelu" and K >= FAST_TANH_MIN_K: the H100's list also holds H100_GELU_CANDIDATES."""
    fast = activation == "gelu" and k >= FAST_TANH_MIN_K
    h100 = H100_CANDIDATES + (H100_GELU_CANDIDATES if fast else ())
    generic = list(dict.fromkeys(CANDIDATES + H100_CANDIDATES))
    return CandidateLists({"H200 sm_90": _dicts(CANDIDATES), "H100 sm_90": _dicts(h100)}, _dicts(generic))


def candidate_configs(device: str | None = None, activation: str = "none", k: int = 0) -> list[dict[str, int]]:
    """The autotune candidates for a device tag ("NVIDIA H100 80GB HBM3 sm_90"; None: the generic list)."""
    return candidate_lists(activation, k).select(device)[1]


def tensor_descriptor_class() -> Any:
    """Triton's host TensorDescriptor (3.4+), or None where this Triton has none."""
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor
    except ImportError:
        return None
    return TensorDescriptor


def tma_supported(dtype: str, k: int, n: int) -> bool:
    """Whether the TMA kernel can take this problem: a 16-bit dtype, rows of A, B and C 16-byte
    aligned (K and N multiples of 8), and a Triton with host tensor descriptors."""
    return dtype in ("float16", "bfloat16") and k % 8 == 0 and n % 8 == 0 and tensor_descriptor_class() is not None


@jit
def _tile_ids(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of a tile in GROUP_M-grouped order: GROUP_M tile rows walked column by
    column, so that the programs running at the same time share A rows and B columns in L2 (the
    Triton tutorial's walk; GROUP_M = 1 is row-major order). Both GEMM kernels use it."""
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((tile_id % num_pid_in_group) % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@jit
def _gelu_tile(acc, GELU: tl.constexpr = 0):
    """tanh-form GeLU of a float32 tile. GELU 0: x / (1 + 2^u), u = -2 log2(e) sqrt(2/pi)(x +
    0.044715 x^3) (kernels/gelu.py's form: one exp2 and one division per element, two MUFU
    instructions). GELU 1: 0.5 x (1 + tanh(a)), a = sqrt(2/pi)(x + 0.044715 x^3), the tanh by
    tanh.approx.f32 (one MUFU instruction, within 2^-11 of tanh: FAST_TANH_MIN_K). PTX inline
    assembly: the launch takes 0 under the interpreter (gelu_mode)."""
    if GELU == 0:
        u = acc * (acc * acc * -0.10294323958002350 + -2.3022081981443250)
        return acc / (1.0 + tl.exp2(u))
    a = acc * (acc * acc * 0.035677408136300125 + 0.7978845608028654)
    t = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [a], dtype=tl.float32, is_pure=True, pack=1)
    half = acc * 0.5
    return half + half * t


@jit
def _tma_matmul_kernel(a_desc, b_desc, c_desc, M, N, K,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr, ACTIVATION: tl.constexpr,
                       SUBTILE: tl.constexpr, GELU: tl.constexpr = 0):
    """Persistent TMA + wgmma GEMM: program p computes tiles p, p + NUM_PROGRAMS, ..."""
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    _data_parallel_tiles(a_desc, b_desc, c_desc, start_pid, num_tiles, num_pid_m, num_pid_n, k_tiles,
                         BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_PROGRAMS, ACTIVATION, SUBTILE, GELU)


@jit
def _tile_dot(a_desc, b_desc, offs_am, offs_bn, k_lo, k_hi, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr):
    """A float32 BLOCK_M x BLOCK_N tile of A @ B over K steps k_lo..k_hi-1 (out-of-range rows and
    the K tail arrive as zeros: TMA padding)."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(k_lo, k_hi):
        offs_k = ki * BLOCK_K
        a = a_desc.load([offs_am, offs_k])
        b = b_desc.load([offs_k, offs_bn])
        acc = tl.dot(a, b, acc)
    return acc


@jit
def _data_parallel_tiles(a_desc, b_desc, c_desc, start_pid, n_tiles, num_pid_m, num_pid_n, k_tiles,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr, ACTIVATION: tl.constexpr,
                         SUBTILE: tl.constexpr, GELU: tl.constexpr = 0):
    """Tiles start_pid, start_pid + NUM_PROGRAMS, ... below n_tiles, each whole, then stored."""
    # A second tile counter for the epilogue, so that the pipeliner does not have to keep the main
    # loop's tile id alive across the flattened loop (Triton's persistent-matmul tutorial).
    tile_id_c = start_pid - NUM_PROGRAMS
    for tile_id in tl.range(start_pid, n_tiles, NUM_PROGRAMS, flatten=True):
        pid_m, pid_n = _tile_ids(tile_id, num_pid_m, num_pid_n, GROUP_M)
        acc = _tile_dot(a_desc, b_desc, pid_m * BLOCK_M, pid_n * BLOCK_N, 0, k_tiles, BLOCK_M, BLOCK_N, BLOCK_K)
        tile_id_c += NUM_PROGRAMS
        pid_m, pid_n = _tile_ids(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        _store_tile(c_desc, acc, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N, ACTIVATION, SUBTILE, GELU)


@jit
def _store_tile(c_desc, acc, offs_cm, offs_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                ACTIVATION: tl.constexpr, SUBTILE: tl.constexpr, GELU: tl.constexpr = 0):
    """The epilogue: act(acc) in C's dtype through TMA, in two BLOCK_N / 2 halves with SUBTILE."""
    if ACTIVATION == "gelu":
        acc = _gelu_tile(acc, GELU)  # fused epilogue: the tile is still in registers
    if SUBTILE:
        acc0, acc1 = _halves(acc, BLOCK_M, BLOCK_N)
        _store_halves(c_desc, acc0, acc1, offs_cm, offs_cn, BLOCK_N, "none")
    else:
        c_desc.store([offs_cm, offs_cn], acc.to(c_desc.dtype))


@jit
def _halves(acc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """A BLOCK_M x BLOCK_N tile as its two BLOCK_M x BLOCK_N / 2 column halves."""
    return tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))


@jit
def _store_halves(c_desc, acc0, acc1, offs_cm, offs_cn, BLOCK_N: tl.constexpr, ACTIVATION: tl.constexpr,
                  GELU: tl.constexpr = 0):
    """The epilogue of a tile held as its two BLOCK_N / 2 halves (C's descriptor blocks are
    BLOCK_N / 2 wide: stream-K configs have SUBTILE)."""
    if ACTIVATION == "gelu":
        acc0 = _gelu_tile(acc0, GELU)
        acc1 = _gelu_tile(acc1, GELU)
    c_desc.store([offs_cm, offs_cn], acc0.to(c_desc.dtype))
    c_desc.store([offs_cm, offs_cn + BLOCK_N // 2], acc1.to(c_desc.dtype))


@jit
def _tma_streamk_kernel(a_desc, b_desc, c_desc, ws_ptr, flags_ptr, M, N, K,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr, ACTIVATION: tl.constexpr,
                        SUBTILE: tl.constexpr, GELU: tl.constexpr = 0):
    """Hybrid stream-K: the full waves of tiles as _tma_matmul_kernel (program p: tiles p,
    p + NUM_PROGRAMS, ...), then the last, partial wave's K iterations split evenly over every
    program, so no SM idles through the last wave (4096^3 in 128 x 256 tiles: 512 tiles on 132
    SMs are 3.88 waves, run as 4 by the data-parallel kernel).

    Stream-K phase: the remaining R tiles' R * k_tiles iterations, `per` = cdiv(R * k_tiles,
    NUM_PROGRAMS) a program, in order of (tile, k). A program walks its range's tile segments from
    the last to the first. A segment that ends before its tile's last iteration is a partial: its
    float32 accumulator goes to the program's workspace slot (ws_ptr + pid * BLOCK_M * BLOCK_N)
    and the program's flag is set (release). The segment holding the tile's last iteration owns
    the tile: it waits for the flags of the programs before it that hold parts of the tile
    (acquire), adds their partials, clears their flags for the next launch, and stores the tile.
    Each program writes at most one partial (its last segment) and owns at most one split tile
    (its first segment), so the owner's wait is for partials written first by lower programs: no
    program waits on one that waits on it, and under the interpreter, which runs programs in
    order, every flag is set before it is read. Needs every program resident (the persistent grid
    is at most one program per SM) and one launch at a time per workspace (kernels/_tma_gemm.py
    tma_runner owns one per callable)."""
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    dp_tiles = (num_tiles // NUM_PROGRAMS) * NUM_PROGRAMS
    _data_parallel_tiles(a_desc, b_desc, c_desc, start_pid, dp_tiles, num_pid_m, num_pid_n, k_tiles,
                         BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_PROGRAMS, ACTIVATION, SUBTILE, GELU)

    sk_iters = (num_tiles - dp_tiles) * k_tiles
    per = tl.cdiv(sk_iters, NUM_PROGRAMS)
    start = start_pid * per
    it_end = tl.minimum(start + per, sk_iters)
    offs_half = tl.arange(0, BLOCK_M)[:, None] * (BLOCK_N // 2) + tl.arange(0, BLOCK_N // 2)[None, :]
    while it_end > start:
        t_local = (it_end - 1) // k_tiles
        tile_first = t_local * k_tiles
        seg_start = tl.maximum(start, tile_first)
        pid_m, pid_n = _tile_ids(dp_tiles + t_local, num_pid_m, num_pid_n, GROUP_M)
        offs_am = pid_m * BLOCK_M
        offs_bn = pid_n * BLOCK_N
        acc = _tile_dot(a_desc, b_desc, offs_am, offs_bn, seg_start - tile_first, it_end - tile_first,
                        BLOCK_M, BLOCK_N, BLOCK_K)
        # the partial tile moves in two BLOCK_N / 2 halves: an owner then holds its accumulator and
        # half a partial (192 of 255 registers), not two whole tiles (spills at 128 x 256)
        acc0, acc1 = _halves(acc, BLOCK_M, BLOCK_N)
        if it_end - tile_first < k_tiles:  # a partial: the tile goes on in the next program
            slot = ws_ptr + start_pid * (BLOCK_M * BLOCK_N)
            tl.store(slot + offs_half, acc0)
            tl.store(slot + (BLOCK_M * BLOCK_N // 2) + offs_half, acc1)
            tl.debug_barrier()  # every thread's part is stored before the flag says so
            tl.atomic_xchg(flags_ptr + start_pid, 1, sem="release")
        else:
            for q in range(tile_first // per, start_pid):  # the programs before this one in the tile
                while tl.atomic_add(flags_ptr + q, 0, sem="acquire") == 0:
                    pass
                slot = ws_ptr + q * (BLOCK_M * BLOCK_N)
                acc0 += tl.load(slot + offs_half, cache_modifier=".cg")
                acc1 += tl.load(slot + (BLOCK_M * BLOCK_N // 2) + offs_half, cache_modifier=".cg")
                tl.atomic_xchg(flags_ptr + q, 0)  # ready for the next launch
            _store_halves(c_desc, acc0, acc1, offs_am, offs_bn, BLOCK_N, ACTIVATION, GELU)
        it_end = seg_start


class _StandIn:
    """A tensor stand-in for the ahead-of-time compile's descriptors: dtype, shape, a 16-byte
    aligned address (what the JIT specialises on), no memory."""

    def __init__(self, dtype: Any, shape: tuple[int, int]):
        self.dtype, self.shape = dtype, shape

    def data_ptr(self) -> int:
        return 0


def tma_launch(M: int, N: int, K: int, dtype: str, config: Mapping[str, int], *, activation: str = "none",
               sms: int = SM90_SMS, a: Any = None, b: Any = None, c: Any = None, note: str = "",
               workspace: Any = None, flags: Any = None) -> TritonLaunch:
    """The launch of `_tma_matmul_kernel` (or, with config STREAMK = 1, `_tma_streamk_kernel`)
    for C (M, N) = act(A (M, K) @ B (K, N)), contiguous.

    With tensors a, b, c (and for stream-K a float32 workspace of programs x BLOCK_M x BLOCK_N
    and int32 zeroed flags, one per program: streamk_buffers) the descriptors point at them (the
    run); without, at stand-ins of the same dtype and shape (the ahead-of-time PTX, same
    specialisation). sms: programs of the persistent grid. Raises WorkbenchError (from
    TensorDescriptor) for misaligned rows, ValueError for STREAMK without SUBTILE.
    """
    import torch

    descriptor = tensor_descriptor_class()
    torch_dtype = getattr(torch, dtype)
    bm, bn, bk = int(config["BLOCK_M"]), int(config["BLOCK_N"]), int(config["BLOCK_K"])
    sub = int(config["SUBTILE"])
    streamk = int(config.get("STREAMK", 0))
    if streamk and not sub:
        raise ValueError(f"matmul triton: STREAMK=1 needs SUBTILE=1 (the stream-K kernel moves tiles in halves), got {dict(config)}")
    a = a if a is not None else _StandIn(torch_dtype, (M, K))
    b = b if b is not None else _StandIn(torch_dtype, (K, N))
    c = c if c is not None else _StandIn(torch_dtype, (M, N))
    descs = {"a_desc": descriptor(a, [M, K], [K, 1], [bm, bk]), "b_desc": descriptor(b, [K, N], [N, 1], [bk, bn]),
             "c_desc": descriptor(c, [M, N], [N, 1], [bm, bn // 2 if sub else bn])}
    tiles = -(-M // bm) * -(-N // bn)
    programs = max(1, min(sms, tiles))
    t = TRITON_DTYPE[dtype]
    signature = {"a_desc": f"tensordesc<{t}[{bm}, {bk}]>", "b_desc": f"tensordesc<{t}[{bk}, {bn}]>",
                 "c_desc": f"tensordesc<{t}[{bm}, {bn // 2 if sub else bn}]>"}
    scalars: dict[str, Any] = {"M": M, "N": N, "K": K, **descs}
    if streamk:
        signature.update(ws_ptr="*fp32", flags_ptr="*i32")
        scalars.update(ws_ptr=workspace if workspace is not None else _StandIn(torch.float32, (programs, bm * bn)),
                       flags_ptr=flags if flags is not None else _StandIn(torch.int32, (programs,)))
    signature.update({"M": "i32", "N": "i32", "K": "i32",
                      **{k: "constexpr" for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "NUM_PROGRAMS",
                                                  "ACTIVATION", "SUBTILE", "GELU")}})
    return TritonLaunch(
        kernel=_tma_streamk_kernel if streamk else _tma_matmul_kernel,
        signature=signature,
        constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": int(config["GROUP_M"]),
                    "NUM_PROGRAMS": programs, "ACTIVATION": activation, "SUBTILE": sub,
                    "GELU": gelu_mode(config, activation)},
        grid=(programs, 1, 1),
        num_warps=int(config["num_warps"]),
        num_stages=int(config["num_stages"]),
        note=note,
        scalars=scalars,
    )


def gelu_mode(config: Mapping[str, int], activation: str) -> int:
    """The GeLU epilogue's form (config GELU: 0 or 1; _gelu_tile): 0 without GeLU, and 0 under
    the Triton interpreter, which runs no PTX inline assembly (the same function, exp2 and divide)."""
    import os

    mode = int(config.get("GELU", 0))
    if mode not in (0, 1):
        raise ValueError(f"matmul triton: GELU must be 0 or 1, got {mode}")
    return mode if activation == "gelu" and os.environ.get("TRITON_INTERPRET") != "1" else 0


def streamk_buffers(M: int, N: int, config: Mapping[str, int], sms: int, device: Any) -> tuple[Any, Any]:
    """(workspace, flags) for _tma_streamk_kernel: float32 (programs, BLOCK_M * BLOCK_N), one
    partial accumulator a program (128 x 256 tiles on 132 SMs: 16.5 MiB), and int32 zeros, one
    flag a program (each owner clears the flags it consumed, so they stay zero between launches)."""
    import torch

    bm, bn = int(config["BLOCK_M"]), int(config["BLOCK_N"])
    programs = max(1, min(sms, -(-M // bm) * -(-N // bn)))
    return (torch.empty((programs, bm * bn), dtype=torch.float32, device=device),
            torch.zeros((programs,), dtype=torch.int32, device=device))


def run_launch(launch: TritonLaunch) -> Any:
    """`kernel[grid](...)` of a `tma_launch` built on real tensors."""
    args = {**launch.scalars, **launch.constexprs}
    return launch.kernel[launch.grid](**args, num_warps=launch.num_warps, num_stages=launch.num_stages)


def sm_count(ctx: Any) -> int:
    """Multiprocessors of the run's CUDA device (the persistent grid), SM90_SMS without one."""
    import torch

    if ctx is not None and ctx.is_cuda and torch.cuda.is_available():
        return int(torch.cuda.get_device_properties(torch.device(ctx.device)).multi_processor_count)
    return SM90_SMS


def tma_runner(spec: Any, config: Mapping[str, int], activation: str, sms: int):
    """The timed callable: C = act(A @ B) through the TMA kernel (A, B made contiguous; C new).
    Raises ValueError when A and B do not chain."""
    import torch

    dtype = str(spec.dtype)

    buffers: dict[tuple, tuple[Any, Any]] = {}  # stream-K's workspace and flags, per (device, M, N)

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        (m, k), (k_b, n) = a.shape, b.shape
        if k != k_b:
            raise ValueError(f"matmul triton: inner dimensions differ: A is {m}x{k}, B is {k_b}x{n}")
        a, b = a.contiguous(), b.contiguous()
        c = torch.empty((m, n), dtype=a.dtype, device=a.device)
        ws = flags = None
        if int(config.get("STREAMK", 0)):
            key = (str(a.device), m, n)
            if key not in buffers:
                buffers[key] = streamk_buffers(m, n, config, sms, a.device)
            ws, flags = buffers[key]
        run_launch(tma_launch(m, n, k, dtype, config, activation=activation, sms=sms, a=a, b=b, c=c,
                              workspace=ws, flags=flags))
        return c
    return run
