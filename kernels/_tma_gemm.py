"""The Hopper Triton GEMM behind `matmul` and `matmul_gelu`'s `triton` in 16-bit dtypes.

    C = act(A @ B)        A: (M, K), B: (K, N) -> C: (M, N); act: none or GeLU (tanh form)

Tiles come in through the tensor memory accelerator (TMA: host `TensorDescriptor`s, so every load
is a `cp.async.bulk.tensor` into shared memory and no thread computes an address), feed `wgmma`,
and C leaves through TMA too. The grid is persistent: NUM_PROGRAMS programs (one per SM) walk the
tiles NUM_PROGRAMS apart in GROUP_M-grouped order, and the flattened tile loop lets the loads of a
program's next tile start while its epilogue (GeLU, store) runs. SUBTILE stores C in two
BLOCK_N / 2 halves, which frees shared memory for the pipeline. Addresses are the TMA unit's
(int32 coordinates per dimension, 64-bit base): tensors past 2^31 elements need no other care.

Config space and choice: the candidates below, timed on the device by kernels/_autotune.py. On one
H200 (exploration run, 2026-12-01; cuBLAS measured in the same run) the best of them reached:
8192^3 bfloat16 1.003x cuBLAS (128x256x64, 8 warps, 3 stages, SUBTILE, GROUP_M 16), float16 1.015x
(the same with GROUP_M 8); 4096^3 0.97x (bfloat16) and 0.93x (float16, where the tutorial's
pointer kernel was best), within the 9% spread of cuBLAS's own repeat at 4096^3. TMA needs 16-byte
aligned rows (K and N multiples of 8 in 16-bit dtypes); other shapes use kernels/matmul.py's
pointer kernel.
"""

from __future__ import annotations

from typing import Any, Mapping

from workbench.kernel_source import TRITON_DTYPE, TritonLaunch
from workbench.triton_support import jit, tl

SM90_SMS = 132  # H200 multiprocessors: the persistent grid where no device can be asked
TMA_VERSION = "tma3"  # the autotune cache key's version: bump when the kernel or CANDIDATES change

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, SUBTILE, GROUP_M); the first is the default.
# Shared memory (Triton 3.6, sm_90 AOT): 128x256x64 s3 sub1 176 KiB, s4 sub1 224 KiB, sub0 s3 208 KiB
# (sub0 s4 would need 272 KiB: over sm_90's 227). Pruned in round 2 of issue #19 to the 128x256x64
# family, from tune19 --quick at 4096^3 bfloat16 (results/h200/2026-12-01b/tune19/tune19.json,
# cuBLAS 0.1738 ms in the same run, spreads ~0.5%): s4 sub1 G8 0.993x, s3 sub0 G8 0.993x, s3 sub1
# G16 0.988x (the 8192^3 bfloat16 winner, 1.003x, in the exploration), s3 sub1 G8 0.988x (the
# default: 8192^3 float16's 1.015x). Dropped: 128x128x64 w8 s4/s5, 128x128x128 and 256x128 (0.85-0.89x);
# kept of the 128x128 tiles only the 4-warp s4 (0.92x), the neighbour for problems too small to
# fill 132 SMs with 128x256 tiles. Added: s4 sub1 GROUP_M 4 (the winner's stages with a narrower
# group: 4096^3 has 32 x 16 tiles, so GROUP_M 8 walks 8 tile rows = 1 MiB of A per column step
# and 4 halves it; untimed until tune19 round 2). Not added: warp_specialize=True, which in Triton
# 3.6 for sm_90 compiles to the same loop unflattened (no setmaxnreg, no producer warps).
CANDIDATES = (
    (128, 256, 64, 8, 3, 1, 8), (128, 256, 64, 8, 4, 1, 8), (128, 256, 64, 8, 3, 0, 8),
    (128, 256, 64, 8, 3, 1, 16), (128, 256, 64, 8, 4, 1, 4), (128, 128, 64, 4, 4, 1, 8),
)
CONFIG_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "SUBTILE", "GROUP_M")


def candidate_configs() -> list[dict[str, int]]:
    """The autotune candidates as dicts (CONFIG_KEYS)."""
    return [dict(zip(CONFIG_KEYS, c)) for c in CANDIDATES]


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
def _gelu_tile(acc):
    """tanh-form GeLU of a float32 tile as x / (1 + 2^u), u = -2 log2(e) sqrt(2/pi)(x + 0.044715 x^3)
    (kernels/gelu.py's form: one exp2 and one division per element)."""
    u = acc * (acc * acc * -0.10294323958002350 + -2.3022081981443250)
    return acc / (1.0 + tl.exp2(u))


@jit
def _tma_matmul_kernel(a_desc, b_desc, c_desc, M, N, K,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr, ACTIVATION: tl.constexpr,
                       SUBTILE: tl.constexpr):
    """Persistent TMA + wgmma GEMM: program p computes tiles p, p + NUM_PROGRAMS, ..."""
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    # A second tile counter for the epilogue, so that the pipeliner does not have to keep the main
    # loop's tile id alive across the flattened loop (Triton's persistent-matmul tutorial).
    tile_id_c = start_pid - NUM_PROGRAMS
    for tile_id in tl.range(start_pid, num_tiles, NUM_PROGRAMS, flatten=True):
        pid_m, pid_n = _tile_ids(tile_id, num_pid_m, num_pid_n, GROUP_M)
        offs_am = pid_m * BLOCK_M
        offs_bn = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):  # out-of-range rows and the K tail arrive as zeros (TMA padding)
            offs_k = ki * BLOCK_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_k, offs_bn])
            acc = tl.dot(a, b, acc)
        tile_id_c += NUM_PROGRAMS
        pid_m, pid_n = _tile_ids(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        offs_cm = pid_m * BLOCK_M
        offs_cn = pid_n * BLOCK_N
        if ACTIVATION == "gelu":
            acc = _gelu_tile(acc)  # fused epilogue: the tile is still in registers
        if SUBTILE:
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            acc0, acc1 = tl.split(halves)
            c_desc.store([offs_cm, offs_cn], acc0.to(c_desc.dtype))
            c_desc.store([offs_cm, offs_cn + BLOCK_N // 2], acc1.to(c_desc.dtype))
        else:
            c_desc.store([offs_cm, offs_cn], acc.to(c_desc.dtype))


class _StandIn:
    """A tensor stand-in for the ahead-of-time compile's descriptors: dtype, shape, a 16-byte
    aligned address (what the JIT specialises on), no memory."""

    def __init__(self, dtype: Any, shape: tuple[int, int]):
        self.dtype, self.shape = dtype, shape

    def data_ptr(self) -> int:
        return 0


def tma_launch(M: int, N: int, K: int, dtype: str, config: Mapping[str, int], *, activation: str = "none",
               sms: int = SM90_SMS, a: Any = None, b: Any = None, c: Any = None, note: str = "") -> TritonLaunch:
    """The launch of `_tma_matmul_kernel` for C (M, N) = act(A (M, K) @ B (K, N)), contiguous.

    With tensors a, b, c the descriptors point at them (the run); without, at stand-ins of the
    same dtype and shape (the ahead-of-time PTX, same specialisation). sms: programs of the
    persistent grid. Raises WorkbenchError (from TensorDescriptor) for misaligned rows.
    """
    import torch

    descriptor = tensor_descriptor_class()
    torch_dtype = getattr(torch, dtype)
    bm, bn, bk = int(config["BLOCK_M"]), int(config["BLOCK_N"]), int(config["BLOCK_K"])
    sub = int(config["SUBTILE"])
    a = a if a is not None else _StandIn(torch_dtype, (M, K))
    b = b if b is not None else _StandIn(torch_dtype, (K, N))
    c = c if c is not None else _StandIn(torch_dtype, (M, N))
    descs = {"a_desc": descriptor(a, [M, K], [K, 1], [bm, bk]), "b_desc": descriptor(b, [K, N], [N, 1], [bk, bn]),
             "c_desc": descriptor(c, [M, N], [N, 1], [bm, bn // 2 if sub else bn])}
    tiles = -(-M // bm) * -(-N // bn)
    programs = max(1, min(sms, tiles))
    t = TRITON_DTYPE[dtype]
    return TritonLaunch(
        kernel=_tma_matmul_kernel,
        signature={"a_desc": f"tensordesc<{t}[{bm}, {bk}]>", "b_desc": f"tensordesc<{t}[{bk}, {bn}]>",
                   "c_desc": f"tensordesc<{t}[{bm}, {bn // 2 if sub else bn}]>", "M": "i32", "N": "i32", "K": "i32",
                   **{k: "constexpr" for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "NUM_PROGRAMS",
                                               "ACTIVATION", "SUBTILE")}},
        constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": int(config["GROUP_M"]),
                    "NUM_PROGRAMS": programs, "ACTIVATION": activation, "SUBTILE": sub},
        grid=(programs, 1, 1),
        num_warps=int(config["num_warps"]),
        num_stages=int(config["num_stages"]),
        note=note,
        scalars={"M": M, "N": N, "K": K, **descs},
    )


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

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        (m, k), (k_b, n) = a.shape, b.shape
        if k != k_b:
            raise ValueError(f"matmul triton: inner dimensions differ: A is {m}x{k}, B is {k_b}x{n}")
        a, b = a.contiguous(), b.contiguous()
        c = torch.empty((m, n), dtype=a.dtype, device=a.device)
        run_launch(tma_launch(m, n, k, dtype, config, activation=activation, sms=sms, a=a, b=b, c=c))
        return c
    return run
