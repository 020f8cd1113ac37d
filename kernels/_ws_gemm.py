"""A warp-specialised Hopper GEMM in Gluon (Triton's tile-level language), for `matmul` and
`matmul_gelu`'s `triton` in 16-bit dtypes on sm_90.

    C = act(A @ B)        A: (M, K), B: (K, N) -> C: (M, N), bfloat16 or float16; act: none or GeLU

Why a second kernel beside kernels/_tma_gemm.py: there, every warp both issues the TMA loads and
runs `wgmma`, and one tile's epilogue (GeLU, conversion, store) runs while no `wgmma` is in
flight (H200 `ncu`, 2026-12-03: the tensor pipe 94.2% busy against cuBLAS's 95.0% at 4096^3; the
GeLU epilogue costs 1.4-2.5% at 8192^3). cuBLAS's sm_90 kernels are warp-specialised: a producer
warp feeds shared memory while two consumer warp groups take turns on the tensor cores
(CUTLASS's "ping-pong"), so one consumer's epilogue overlaps the other's main loop. Triton 3.6's
`tl.range(warp_specialize=True)` builds no such kernel on sm_90; Gluon states the partitions
explicitly (`gl.warp_specialize`) and lowers them with `setmaxnreg`.

The kernel: a persistent grid (one program per SM) walks its tiles NUM_PROGRAMS apart in
GROUP_M-grouped order. Three partitions share a ring of STAGES shared-memory slots (A: BLOCK_M x
BLOCK_K, B: BLOCK_K x BLOCK_N) with two mbarriers a slot (ready: the TMA bytes landed; empty:
the consumer's `wgmma` that read it completed):
- the producer (1 warp, few registers) issues every tile's TMA loads in order;
- consumer 0 (the default partition, 4 warps = one warp group) takes the program's even tiles,
  consumer 1 (a 4-warp worker) the odd ones; each keeps one BLOCK_M x BLOCK_N float32 accumulator
  in registers (128 x 128: 128 a thread), keeps one `wgmma` in flight, and stores its tile
  through its own C slot by TMA.
The ring is filled in tile order, so consumer 1's main loop starts as consumer 0's ends: the
consumers alternate on the tensor cores and each epilogue runs under the other's `wgmma`s.

Shared memory: STAGES x (BLOCK_M + BLOCK_N) x BLOCK_K x 2 bytes + 2 x BLOCK_M x BLOCK_N x 2 bytes;
128 x 128 x 64 with 4 stages: 192 KiB (sm_90 allows 227).
"""

from __future__ import annotations

from typing import Any, Mapping

from workbench.kernel_source import TRITON_DTYPE, TritonLaunch

try:  # Gluon ships with Triton 3.5+; its API is experimental and moves between releases
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                                   warpgroup_mma, warpgroup_mma_wait)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonTensorDescriptor
except ImportError:  # pragma: no cover - older Triton
    gluon = gl = None
    GluonTensorDescriptor = None

SM90_SMS = 132
WS_VERSION = "ws1"  # bump when the kernel changes (autotune cache key)
PRODUCER_REGS = 40  # registers a producer thread keeps after setmaxnreg (it holds only scalars)


def gluon_available() -> bool:
    """Whether this Triton has the Gluon pieces the kernel uses (warp_specialize, Hopper TMA,
    mbarrier, wgmma, the Gluon host TensorDescriptor)."""
    return gl is not None and hasattr(gl, "warp_specialize")


if gl is not None:
    @gluon.jit
    def _ws_tile_ids(tile_id, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
        """(pid_m, pid_n) of a tile in GROUP_M-grouped order (kernels/_tma_gemm.py _tile_ids)."""
        num_pid_in_group = GROUP_M * num_pid_n
        group_id = tile_id // num_pid_in_group
        first_pid_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
        pid_m = first_pid_m + ((tile_id % num_pid_in_group) % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        return pid_m, pid_n

    @gluon.jit
    def _ws_producer(a_desc, b_desc, a_bufs, b_bufs, ready, empty, pid, my_tiles, num_pid_m, num_pid_n, k_tiles,
                     GROUP_M: gl.constexpr, NUM_PROGRAMS: gl.constexpr):
        """Every tile's K steps in order: wait for the slot to be empty, then TMA A and B into it."""
        BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
        BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
        BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
        STAGES: gl.constexpr = a_bufs.type.shape[0]
        nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
        it = 0
        for t in range(my_tiles):
            pid_m, pid_n = _ws_tile_ids(pid + t * NUM_PROGRAMS, num_pid_m, num_pid_n, GROUP_M)
            for k in range(k_tiles):
                s = it % STAGES
                # mbarriers start with phase 1 complete: the first STAGES waits pass at once
                mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
                mbarrier.expect(ready.index(s), nbytes)
                tma.async_copy_global_to_shared(a_desc, [pid_m * BLOCK_M, k * BLOCK_K], ready.index(s), a_bufs.index(s))
                tma.async_copy_global_to_shared(b_desc, [k * BLOCK_K, pid_n * BLOCK_N], ready.index(s), b_bufs.index(s))
                it += 1

    @gluon.jit
    def _ws_consumer(a_bufs, b_bufs, c_bufs, ready, empty, turn, c_desc, pid, my_tiles, num_pid_m, num_pid_n,
                     k_tiles, WHICH: gl.constexpr, CONSUMERS: gl.constexpr, GROUP_M: gl.constexpr,
                     NUM_PROGRAMS: gl.constexpr, ACTIVATION: gl.constexpr):
        """Tiles WHICH, WHICH + CONSUMERS, ... of the program: wgmma over the ring's slots (one in
        flight), then act(acc) in C's dtype through this consumer's C slot by TMA.

        With two consumers their main loops take turns (`turn`: consumer c waits on turn[c]
        before a main loop and arrives on the other's after it). Besides the ping-pong this
        keeps each wait on a ring slot's `ready` barrier at most one phase ahead of it: a
        consumer that waited for its tile's first slot while the other still consumed the tile
        before would see that slot's previous phase complete (a parity wait cannot tell phase n
        from n - 2) and read the other tile's operands (on the H200 such a kernel faulted at
        4096^3 and ran right when one consumer had every tile)."""
        BLOCK_M: gl.constexpr = c_desc.block_type.shape[0]
        BLOCK_N: gl.constexpr = c_desc.block_type.shape[1]
        STAGES: gl.constexpr = a_bufs.type.shape[0]
        layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, BLOCK_N, 16])
        c_smem = c_bufs.index(WHICH)
        for t in range(WHICH, my_tiles, CONSUMERS):
            pid_m, pid_n = _ws_tile_ids(pid + t * NUM_PROGRAMS, num_pid_m, num_pid_n, GROUP_M)
            acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=layout)
            if CONSUMERS == 2:  # consumer 0's first wait passes at once (phase 1 starts complete)
                mbarrier.wait(turn.index(WHICH), ((t // 2) & 1) ^ (1 - WHICH))
            it0 = t * k_tiles
            for k in range(k_tiles):
                it = it0 + k
                s = it % STAGES
                mbarrier.wait(ready.index(s), (it // STAGES) & 1)
                acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
                # at most one wgmma in flight: the previous step's has finished reading its slot
                acc, _, _ = warpgroup_mma_wait(1, deps=(acc, a_bufs.index(s), b_bufs.index(s)))
                mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=k > 0)
            if CONSUMERS == 2:  # every wgmma of the tile issued: the other consumer's turn
                mbarrier.arrive(turn.index(1 - WHICH), count=1)
            acc = warpgroup_mma_wait(0, deps=(acc,))
            mbarrier.arrive(empty.index((it0 + k_tiles - 1) % STAGES), count=1)
            if ACTIVATION == "gelu":
                # tanh-form GeLU as x / (1 + 2^u), u = -2 log2(e) sqrt(2/pi) (x + 0.044715 x^3)
                # (kernels/gelu.py's form: one exp2 and one division an element)
                u = acc * (acc * acc * -0.10294323958002350 + -2.3022081981443250)
                acc = acc / (1.0 + gl.exp2(u))
            out = acc.to(c_desc.dtype)
            tma.store_wait(0)  # this consumer's previous tile has left its C slot
            c_smem.store(out)
            fence_async_shared()
            tma.async_copy_shared_to_global(c_desc, [pid_m * BLOCK_M, pid_n * BLOCK_N], c_smem)
        tma.store_wait(0)

    @gluon.jit
    def _ws_matmul_kernel(a_desc, b_desc, c_desc, M, N, K, GROUP_M: gl.constexpr, NUM_PROGRAMS: gl.constexpr,
                          STAGES: gl.constexpr, ACTIVATION: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                          PRODUCER_REGS: gl.constexpr, CONSUMERS: gl.constexpr):
        """Persistent warp-specialised GEMM: program p computes tiles p, p + NUM_PROGRAMS, ..."""
        BLOCK_M: gl.constexpr = c_desc.block_type.shape[0]
        BLOCK_N: gl.constexpr = c_desc.block_type.shape[1]
        BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
        dtype: gl.constexpr = a_desc.dtype
        a_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, BLOCK_K], a_desc.layout)
        b_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_K, BLOCK_N], b_desc.layout)
        c_bufs = gl.allocate_shared_memory(dtype, [2, BLOCK_M, BLOCK_N], c_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(2):
            mbarrier.init(turn.index(i), count=1)
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)  # the producer's expect (its TMA bytes complete it)
            # Triton 3.6 lowers a partition's mbarrier.arrive to a barrier of its warps and one
            # arrival (thread 0 of the warp group): one arrival empties a slot
            mbarrier.init(empty.index(i), count=1)

        pid = gl.program_id(0)
        num_pid_m = gl.cdiv(M, BLOCK_M)
        num_pid_n = gl.cdiv(N, BLOCK_N)
        k_tiles = gl.cdiv(K, BLOCK_K)
        my_tiles = gl.cdiv(num_pid_m * num_pid_n - pid, NUM_PROGRAMS)
        if CONSUMERS == 2:
            gl.warp_specialize([
                (_ws_consumer, (a_bufs, b_bufs, c_bufs, ready, empty, turn, c_desc, pid, my_tiles, num_pid_m, num_pid_n,
                                k_tiles, 0, 2, GROUP_M, NUM_PROGRAMS, ACTIVATION)),
                (_ws_consumer, (a_bufs, b_bufs, c_bufs, ready, empty, turn, c_desc, pid, my_tiles, num_pid_m, num_pid_n,
                                k_tiles, 1, 2, GROUP_M, NUM_PROGRAMS, ACTIVATION)),
                (_ws_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, pid, my_tiles, num_pid_m, num_pid_n,
                                k_tiles, GROUP_M, NUM_PROGRAMS)),
            ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])
        else:
            gl.warp_specialize([
                (_ws_consumer, (a_bufs, b_bufs, c_bufs, ready, empty, turn, c_desc, pid, my_tiles, num_pid_m, num_pid_n,
                                k_tiles, 0, 1, GROUP_M, NUM_PROGRAMS, ACTIVATION)),
                (_ws_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, pid, my_tiles, num_pid_m, num_pid_n,
                                k_tiles, GROUP_M, NUM_PROGRAMS)),
            ], [1], [PRODUCER_REGS])


class _StandIn:
    """A tensor stand-in for the ahead-of-time compile's descriptors (no memory)."""

    def __init__(self, dtype: Any, shape: tuple[int, int]):
        self.dtype, self.shape = dtype, shape

    def data_ptr(self) -> int:
        return 0

    def stride(self) -> tuple[int, int]:
        return (self.shape[1], 1)


def ws_launch(M: int, N: int, K: int, dtype: str, config: Mapping[str, int], *, activation: str = "none",
              sms: int = SM90_SMS, a: Any = None, b: Any = None, c: Any = None, note: str = "") -> TritonLaunch:
    """The launch of `_ws_matmul_kernel` for C (M, N) = act(A (M, K) @ B (K, N)), contiguous,
    16-bit. config: BLOCK_M, BLOCK_N, BLOCK_K, num_stages (the ring's slots), GROUP_M and
    CONSUMER_REGS (registers a consumer thread keeps; the launch's maxnreg is chosen so that two
    consumer warp groups and the producer's fit the SM's 65536). Without tensors the descriptors
    point at stand-ins (the ahead-of-time PTX, same specialisation)."""
    import torch

    torch_dtype = getattr(torch, dtype)
    gl_dtype = gl.bfloat16 if dtype == "bfloat16" else gl.float16
    bm, bn, bk = int(config["BLOCK_M"]), int(config["BLOCK_N"]), int(config["BLOCK_K"])
    a = a if a is not None else _StandIn(torch_dtype, (M, K))
    b = b if b is not None else _StandIn(torch_dtype, (K, N))
    c = c if c is not None else _StandIn(torch_dtype, (M, N))
    layouts = {name: gl.NVMMASharedLayout.get_default_for(shape, gl_dtype)
               for name, shape in (("a", [bm, bk]), ("b", [bk, bn]), ("c", [bm, bn]))}
    descs = {"a_desc": GluonTensorDescriptor(a, [M, K], [K, 1], [bm, bk], layouts["a"]),
             "b_desc": GluonTensorDescriptor(b, [K, N], [N, 1], [bk, bn], layouts["b"]),
             "c_desc": GluonTensorDescriptor(c, [M, N], [N, 1], [bm, bn], layouts["c"])}
    tiles = -(-M // bm) * -(-N // bn)
    programs = max(1, min(sms, tiles))
    t = TRITON_DTYPE[dtype]
    signature = {"a_desc": f"tensordesc<{t}[{bm}, {bk}]>", "b_desc": f"tensordesc<{t}[{bk}, {bn}]>",
                 "c_desc": f"tensordesc<{t}[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32",
                 **{k: "constexpr" for k in ("GROUP_M", "NUM_PROGRAMS", "STAGES", "ACTIVATION", "CONSUMER_REGS",
                                             "PRODUCER_REGS", "CONSUMERS")}}
    consumer_regs = int(config.get("CONSUMER_REGS", 232))
    return TritonLaunch(
        kernel=_ws_matmul_kernel,
        signature=signature,
        constexprs={"GROUP_M": int(config["GROUP_M"]), "NUM_PROGRAMS": programs, "STAGES": int(config["num_stages"]),
                    "ACTIVATION": activation, "CONSUMER_REGS": consumer_regs, "PRODUCER_REGS": PRODUCER_REGS,
                    "CONSUMERS": int(config.get("CONSUMERS", 2))},
        grid=(programs, 1, 1),
        num_warps=4,
        num_stages=1,
        note=note,
        scalars={"M": M, "N": N, "K": K, **descs},
    )


def ws_maxnreg(config: Mapping[str, int]) -> int:
    """The launch's maxnreg, 168: the kernel runs 3 warp groups (two consumers and the producer's,
    384 threads) and the launch reserves maxnreg x 384 of the SM's 65536 registers (a multiple of
    8 a thread). After setmaxnreg the consumers keep CONSUMER_REGS each and the producer
    PRODUCER_REGS, which must fit the same 3 x 168. Raises ValueError for a config that does not."""
    if int(config.get("CONSUMERS", 2)) == 1:  # 2 warp groups: the consumer's and the producer's
        return 65536 // 256 // 8 * 8
    maxnreg = 65536 // 384 // 8 * 8
    consumer = int(config.get("CONSUMER_REGS", 232))
    if consumer % 8 or 2 * consumer + PRODUCER_REGS > 3 * maxnreg:
        raise ValueError(f"matmul triton (warp-specialised): CONSUMER_REGS={consumer} must be a multiple of 8 "
                         f"with 2 x {consumer} + {PRODUCER_REGS} <= {3 * maxnreg}")
    return maxnreg


def run_ws(a: Any, b: Any, c: Any, config: Mapping[str, int], activation: str = "none") -> Any:
    """C = act(A @ B) into `c` with `_ws_matmul_kernel` (A (M, K), B (K, N), C (M, N): contiguous
    CUDA tensors of one 16-bit dtype)."""
    import torch

    m, k = a.shape
    n = b.shape[1]
    sms = int(torch.cuda.get_device_properties(a.device).multi_processor_count)
    launch = ws_launch(m, n, k, str(a.dtype).replace("torch.", ""), config, activation=activation, sms=sms,
                       a=a, b=b, c=c)
    return launch.kernel[launch.grid](**launch.scalars, **launch.constexprs, num_warps=4,
                                      maxnreg=ws_maxnreg(config))
