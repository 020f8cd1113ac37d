// Row softmax in CUDA C++: only __global__ kernels and plain launchers, no torch headers, so
// `nvcc -ptx -arch=sm_90 softmax.cu` compiles this file alone. The torch binding (tensor checks,
// dtype dispatch) lives in kernels/softmax.py and is passed to load_inline.
//
//   y[i, j] = exp(x[i, j] - m_i) / sum_k exp(x[i, k] - m_i),   m_i = max_k x[i, k]
//
// Two kernels: `softmax_onepass_kernel` (the `cuda` implementation) reads each row from HBM once:
// the row stays in registers between the reduction and the output. A row up to
// THREADS * PACKS * VEC elements lives in one block; a longer one is split over a thread-block
// cluster of up to 16 blocks (sm_90), which merge their partial (max, sum) pairs through
// distributed shared memory (QuACK's design, Dao-AILab, 2025), so a 262144-wide row is still read
// once. `softmax_kernel` (two passes, the row re-read from L2) takes the rows longer than that.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cooperative_groups.h>
#include <math.h>

#include "common.cuh"  // to_float / from_float, cdiv

// ---- which kernels a build instantiates -----------------------------------------------------
// Without WB_SOFTMAX_KERNELS every kernel of this file is compiled (`nvcc -ptx softmax.cu`, the
// GPU scripts' module: 155 entries). kernels/softmax.py builds a row's module, and its PTX view,
// with -DWB_SOFTMAX_KERNELS=<tokens joined by "__">: the kernels the row launches or its tuner
// times, one token each, their template arguments in order (T: f32, f16, bf16; bools 0 or 1):
//   onepass_<T>_<VEC>_<THREADS>_<PACKS>_<IN_CLUSTER>_<SPACKS>_<KEEP>_<EVEN>
//   l2_<T>_<THREADS>_<TRITON_FORM>      twopass_<T>_<VEC>
// e.g. onepass_f32_4_512_8_0_0_0_0__l2_f32_1024_1. The launchers are all compiled; one whose
// kernel is not built returns cudaErrorInvalidConfiguration, as an unknown configuration does.
// Why: a cold start (a fresh box) spent most of its time in nvcc, which compiled every kernel for
// every row that launches one to eight of them (docs/engine.md, "Cold start").
namespace pick {
#define WB_STR2(x) #x
#define WB_STR(x) WB_STR2(x)
template <typename T> constexpr const char* type_tag();
template <> constexpr const char* type_tag<float>() { return "f32"; }
template <> constexpr const char* type_tag<__half>() { return "f16"; }
template <> constexpr const char* type_tag<__nv_bfloat16>() { return "bf16"; }

// A token spelled at compile time: a name, then "_<n>" per template argument.
struct Token {
    char c[96] = {};
    int n = 0;
    constexpr Token(const char* kind, const char* type) { add(kind); c[n++] = '_'; add(type); }
    constexpr void add(const char* s) { while (*s) c[n++] = *s++; }
    constexpr Token& operator<<(int v) {
        char digits[12] = {};
        int k = 0;
        do { digits[k++] = (char)('0' + v % 10); v /= 10; } while (v > 0);
        c[n++] = '_';
        while (k > 0) c[n++] = digits[--k];
        return *this;
    }
};

#ifdef WB_SOFTMAX_KERNELS
constexpr const char* LIST = WB_STR(WB_SOFTMAX_KERNELS);
// Whether LIST names `t` (a whole token between "__" separators).
constexpr bool listed(const Token& t) {
    for (int i = 0; LIST[i] != 0;) {
        int j = 0;
        while (j < t.n && LIST[i + j] == t.c[j]) ++j;
        if (j == t.n && (LIST[i + j] == 0 || (LIST[i + j] == '_' && LIST[i + j + 1] == '_'))) return true;
        while (LIST[i] != 0 && !(LIST[i] == '_' && LIST[i + 1] == '_')) ++i;  // to this token's end
        if (LIST[i] != 0) i += 2;
    }
    return false;
}
#else
constexpr bool listed(const Token&) { return true; }  // every kernel
#endif

template <typename T, int VEC, int THREADS, int PACKS, bool IN_CLUSTER, int SPACKS, bool KEEP, bool EVEN>
constexpr bool onepass() {
    return listed(Token("onepass", type_tag<T>()) << VEC << THREADS << PACKS << IN_CLUSTER << SPACKS << KEEP << EVEN);
}
template <typename T, int THREADS, bool TRITON_FORM>
constexpr bool l2() { return listed(Token("l2", type_tag<T>()) << THREADS << TRITON_FORM); }
template <typename T, int VEC>
constexpr bool twopass() { return listed(Token("twopass", type_tag<T>()) << VEC); }
}  // namespace pick

// A running (max m, sum s of exp(x - m)) pair. s is rescaled only when the max grows, so
// the common case costs one exp per element.
__device__ __forceinline__ void online_add(float& m, float& s, float v) {
    if (v > m) {
        s = (m == -INFINITY ? 0.0f : s * expf(m - v)) + 1.0f;
        m = v;
    } else if (v != -INFINITY) {  // exp(-inf) adds nothing; skipping it avoids exp(-inf - -inf)
        s += expf(v - m);
    }
}

// Merge pair (m2, s2) into (m, s). An empty pair is (-inf, 0).
__device__ __forceinline__ void online_merge(float& m, float& s, float m2, float s2) {
    float m_new = fmaxf(m, m2);
    if (m_new == -INFINITY) return;  // both empty
    s = (m == -INFINITY ? 0.0f : s * expf(m - m_new)) + (m2 == -INFINITY ? 0.0f : s2 * expf(m2 - m_new));
    m = m_new;
}

// Reduce the pair across the 32 lanes of a warp with register shuffles (shfl.sync.bfly):
// after log2(32) = 5 butterfly steps every lane holds the warp's pair.
__device__ __forceinline__ void warp_merge(float& m, float& s) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
        float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
        online_merge(m, s, m2, s2);
    }
}

// One block per row, blockDim.x a multiple of 32 (at most 1024). Pass 1: each thread folds its
// elements (VEC per 16-byte load, strided by the block) into an online (max, sum) pair; warps
// merge pairs with shuffles, then warp 0 merges the per-warp pairs from shared memory. Pass 2
// re-reads the row (from L2: rows in flight are far smaller than L2) and writes exp(x - m) / s.
// Global traffic: the row read once from HBM and once from L2, the output written once.
// VEC > 1 needs n_cols % VEC == 0 and 16-byte-aligned pointers (the launcher checks).
template <typename T, int VEC>
__global__ void softmax_kernel(const T* __restrict__ x, T* __restrict__ y, int n_cols) {
    struct alignas(sizeof(T) * VEC) Pack { T v[VEC]; };
    __shared__ float warp_m[32];
    __shared__ float warp_s[32];
    const int64_t row = blockIdx.x;
    const Pack* x_row = reinterpret_cast<const Pack*>(x + row * n_cols);
    Pack* y_row = reinterpret_cast<Pack*>(y + row * n_cols);
    const int n_packs = n_cols / VEC;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int n_warps = blockDim.x >> 5;

    float m = -INFINITY, s = 0.0f;
    for (int i = threadIdx.x; i < n_packs; i += blockDim.x) {
        Pack p = x_row[i];
#pragma unroll
        for (int j = 0; j < VEC; ++j) online_add(m, s, to_float(p.v[j]));
    }
    warp_merge(m, s);
    if (lane == 0) { warp_m[warp] = m; warp_s[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        m = lane < n_warps ? warp_m[lane] : -INFINITY;
        s = lane < n_warps ? warp_s[lane] : 0.0f;
        warp_merge(m, s);
        if (lane == 0) { warp_m[0] = m; warp_s[0] = s; }
    }
    __syncthreads();
    const float row_max = warp_m[0];
    const float inv_sum = 1.0f / warp_s[0];

    for (int i = threadIdx.x; i < n_packs; i += blockDim.x) {
        Pack p = x_row[i];
#pragma unroll
        for (int j = 0; j < VEC; ++j) p.v[j] = from_float<T>(expf(to_float(p.v[j]) - row_max) * inv_sum);
        y_row[i] = p;
    }
}

// Threads per block: about four packs per thread, a power of two in [32, 1024].
static int softmax_threads(int n_packs) {
    int threads = 32;
    while (threads < 1024 && threads * 4 < n_packs) threads *= 2;
    return threads;
}

// threads: the block size (a multiple of 32 in [32, 1024]; anything else is cudaErrorInvalidValue),
// or 0 for softmax_threads'. (A row that fits one block in the one-pass plan took this kernel as a
// tuner candidate until the H200 put it 40-50% behind the plan, 2026-12-03.)
template <typename T>
static cudaError_t launch_softmax(const T* x, T* y, int64_t n_rows, int n_cols, int threads, cudaStream_t stream) {
    constexpr int VEC = 16 / sizeof(T);
    bool vec_ok = (n_cols % VEC == 0) && ((uintptr_t)x % 16 == 0) && ((uintptr_t)y % 16 == 0);
    if (threads != 0 && (threads < 32 || threads > 1024 || threads % 32 != 0)) return cudaErrorInvalidValue;
    if (n_rows == 0 || n_cols == 0) return cudaSuccess;
    if (vec_ok) {
        const int block = threads ? threads : softmax_threads(n_cols / VEC);
        if constexpr (pick::twopass<T, VEC>()) softmax_kernel<T, VEC><<<(unsigned int)n_rows, block, 0, stream>>>(x, y, n_cols);
        else return cudaErrorInvalidConfiguration;  // not built (WB_SOFTMAX_KERNELS)
    } else {
        const int block = threads ? threads : softmax_threads(n_cols);
        if constexpr (pick::twopass<T, 1>()) softmax_kernel<T, 1><<<(unsigned int)n_rows, block, 0, stream>>>(x, y, n_cols);
        else return cudaErrorInvalidConfiguration;
    }
    return cudaGetLastError();
}

// Plain launchers (extern "C" so the binding can declare them without templates).
extern "C" cudaError_t softmax_f32(const void* x, void* y, int64_t rows, int cols, int threads, cudaStream_t s) {
    return launch_softmax((const float*)x, (float*)y, rows, cols, threads, s);
}
extern "C" cudaError_t softmax_f16(const void* x, void* y, int64_t rows, int cols, int threads, cudaStream_t s) {
    return launch_softmax((const __half*)x, (__half*)y, rows, cols, threads, s);
}
extern "C" cudaError_t softmax_bf16(const void* x, void* y, int64_t rows, int cols, int threads, cudaStream_t s) {
    return launch_softmax((const __nv_bfloat16*)x, (__nv_bfloat16*)y, rows, cols, threads, s);
}

// ==== one pass: the row in registers (a block, or a cluster of blocks) ========================
namespace cg = cooperative_groups;

namespace onepass {

// VEC elements of T moved as one access (16 bytes when VEC * sizeof(T) == 16): get(k) reads
// element k as float, set2(k, a, b) writes elements k and k + 1 (k even).
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
    T v[VEC];
    __device__ __forceinline__ float get(int k) const { return to_float(v[k]); }
    __device__ __forceinline__ void set2(int k, float a, float b) { v[k] = from_float<T>(a); v[k + 1] = from_float<T>(b); }
    __device__ __forceinline__ void set1(int k, float a) { v[k] = from_float<T>(a); }
    // KEEP (float32 packs only: the kept value is the float itself, no rounding).
    __device__ __forceinline__ float kept(int k) const { return to_float(v[k]); }
    __device__ __forceinline__ void keep2(int k, float a, float b) { set2(k, a, b); }
};

// KEEP in 16-bit packs: exp(x - m) * 2^KEEP_SHIFT_16 replaces x as a float16 pair, whatever T
// is. The value lies in [0, 2^15], where float16 rounds to 2^-11 relative down to 2^-29 (bfloat16
// would round to 2^-8, a second rounding as large as the output's); smaller values are
// subnormal (absolute 2^-40 at most after the shift back, far under the check's atol).
constexpr float KEEP_SHIFT_16 = 15.0f;
__device__ __forceinline__ float kept_half(uint32_t w, int k) {
    const __half2 h = *reinterpret_cast<const __half2*>(&w);
    return (k & 1) ? __high2float(h) : __low2float(h);
}
__device__ __forceinline__ uint32_t keep_half2(float a, float b) {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
}
// KEEP's max on packed pairs (HMNMX2: exact, NaN ignored as fmaxf does): acc holds a pair H2
// (__half2 or __nv_bfloat162) of the pack's 4 words w.
template <typename H2>
__device__ __forceinline__ void pair_max_into(const uint32_t* w, uint32_t& acc) {
    H2 a = *reinterpret_cast<const H2*>(&acc);
#pragma unroll
    for (int q = 0; q < 4; ++q) a = __hmax2(a, *reinterpret_cast<const H2*>(&w[q]));
    acc = *reinterpret_cast<uint32_t*>(&a);
}
template <typename H2>
__device__ __forceinline__ float pair_max_of(uint32_t acc) {
    const H2 a = *reinterpret_cast<const H2*>(&acc);
    return fmaxf(__low2float(a), __high2float(a));
}

// Eight 16-bit values kept as four 32-bit words: as T v[8], ptxas splits every word into two
// registers (32 instead of 16 per 16-byte pack; a bfloat16 row of 32 elements per thread then
// takes 52 registers and half the blocks per SM). A bfloat16 is the high half of a float.
template <>
struct alignas(16) Pack<__nv_bfloat16, 8> {
    uint32_t w[4];
    __device__ __forceinline__ float get(int k) const {
        return __uint_as_float((k & 1) ? (w[k >> 1] & 0xffff0000u) : (w[k >> 1] << 16));
    }
    __device__ __forceinline__ void set2(int k, float a, float b) {
        __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
        w[k >> 1] = *reinterpret_cast<uint32_t*>(&h);
    }
    __device__ __forceinline__ float kept(int k) const { return kept_half(w[k >> 1], k); }
    __device__ __forceinline__ void keep2(int k, float a, float b) { w[k >> 1] = keep_half2(a, b); }
    static constexpr uint32_t NEG_INF2 = 0xff80ff80u;
    __device__ __forceinline__ void max_into(uint32_t& acc) const { pair_max_into<__nv_bfloat162>(w, acc); }
    static __device__ __forceinline__ float max_of(uint32_t acc) { return pair_max_of<__nv_bfloat162>(acc); }
};
template <>
struct alignas(16) Pack<__half, 8> {
    uint32_t w[4];
    __device__ __forceinline__ float get(int k) const {
        const __half2 h = *reinterpret_cast<const __half2*>(&w[k >> 1]);
        return (k & 1) ? __high2float(h) : __low2float(h);
    }
    __device__ __forceinline__ void set2(int k, float a, float b) {
        __half2 h = __floats2half2_rn(a, b);
        w[k >> 1] = *reinterpret_cast<uint32_t*>(&h);
    }
    __device__ __forceinline__ float kept(int k) const { return kept_half(w[k >> 1], k); }
    __device__ __forceinline__ void keep2(int k, float a, float b) { w[k >> 1] = keep_half2(a, b); }
    static constexpr uint32_t NEG_INF2 = 0xfc00fc00u;
    __device__ __forceinline__ void max_into(uint32_t& acc) const { pair_max_into<__half2>(w, acc); }
    static __device__ __forceinline__ float max_of(uint32_t acc) { return pair_max_of<__half2>(acc); }
};

constexpr float LOG2E = 1.4426950408889634f;

// 2^x on the special-function unit (one MUFU.EX2; relative error ~2^-22, PTX ISA "ex2").
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// exp(x - m) as 2^((x - m) log2e): the difference first. x - m is exact for x near m (Sterbenz),
// while the fused fmaf(x, log2e, -m log2e) rounds m log2e at the row's magnitude: at m = 1000 that
// exponent error (ulp(1443) / 2 = 6e-5) gave a relative error of 4.8e-5 in float32 (H200, the
// special inputs' row shifted by +1000), three times the float32 tolerance.
__device__ __forceinline__ float exp_shifted(float x, float m) { return ex2((x - m) * LOG2E); }

// Merge the pair (m2, s2) into (m, s): m a max, s a sum of 2^((x - m) log2e). Empty is (-inf, 0).
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    const float m_new = fmaxf(m, m2);
    const float a = (m == -INFINITY) ? 0.0f : s * ex2((m - m_new) * LOG2E);
    const float b = (m2 == -INFINITY) ? 0.0f : s2 * ex2((m2 - m_new) * LOG2E);
    m = m_new;
    s = a + b;
}

// Butterfly over the 32 lanes (shfl.sync.bfly): afterwards every lane holds the warp's pair.
__device__ __forceinline__ void warp_merge(float& m, float& s) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
        merge(m, s, m2, s2);
    }
}

// The block's pair from every thread's pair: shuffles in each warp, then warp 0 merges the
// per-warp pairs. Every thread returns the block's pair.
template <int THREADS>
__device__ __forceinline__ float2 block_merge(float m, float s, float2* warp_pairs) {
    constexpr int WARPS = THREADS / 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    warp_merge(m, s);
    if (WARPS == 1) return make_float2(m, s);
    if (lane == 0) warp_pairs[warp] = make_float2(m, s);
    __syncthreads();
    if (warp == 0) {
        float2 p = lane < WARPS ? warp_pairs[lane] : make_float2(-INFINITY, 0.0f);
        warp_merge(p.x, p.y);
        if (lane == 0) warp_pairs[WARPS] = p;
    }
    __syncthreads();
    return warp_pairs[WARPS];
}

// The output pack exp(x - row_max) * inv_sum of one input pack.
template <typename P, int VEC>
__device__ __forceinline__ P scaled_pack(const P& in, float row_max, float inv_sum) {
    P o;
    if constexpr (VEC == 1) {
        o.set1(0, exp_shifted(in.get(0), row_max) * inv_sum);
    } else {
#pragma unroll
        for (int k = 0; k < VEC; k += 2)
            o.set2(k, exp_shifted(in.get(k), row_max) * inv_sum, exp_shifted(in.get(k + 1), row_max) * inv_sum);
    }
    return o;
}

// KEEP's output pack: the kept exp(x - m_thread) * 2^shift times the thread's scale c (VEC even).
template <typename P, int VEC>
__device__ __forceinline__ P kept_pack(const P& in, float c) {
    P o;
#pragma unroll
    for (int k = 0; k < VEC; k += 2) o.set2(k, in.kept(k) * c, in.kept(k + 1) * c);
    return o;
}

// 16 bytes from global to shared memory without a register (cp.async.cg: L2 only, sm_80+); the
// copy completes at cp_async_wait_all. SPACKS > 0 stages that many packs per thread this way, so a
// block holds more of its row than its registers do (QuACK stages its whole tile in shared memory
// with cp.async the same way): smaller clusters, or more blocks per SM, for the same row.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    const unsigned int s = (unsigned int)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// One row, or one 1/CLUSTER slice of it, per block; THREADS threads hold PACKS packs of VEC
// elements each (16-byte loads when VEC * sizeof(T) == 16): a slice of THREADS * PACKS * VEC
// columns, pack p of thread t at pack index p * THREADS + t (consecutive threads, consecutive
// 16-byte packs: coalesced). Every load is issued before the first use. Pass 1 (registers only):
// each thread's max, then its sum of exp; the (max, sum) pairs merge across the block and, with
// IN_CLUSTER, across the cluster through distributed shared memory. Pass 2 (registers only):
// y = exp(x - max) / sum. VEC > 1 needs n_cols % VEC == 0 and 16-byte-aligned rows.
// With SPACKS, each thread also owns packs PACKS..PACKS+SPACKS-1 (same striding), kept in dynamic
// shared memory (THREADS * SPACKS * 16 bytes; 16-byte packs only): issued first as cp.async, they
// are in flight while the register loads are issued, and only the issuing thread reads them.
// With KEEP, the sum pass writes e = exp(x - m_thread) * 2^shift over each pack (float32, or a
// float16 pair in 16-bit packs: Pack::keep2) and the output is e * c, c = exp(m_thread - max) /
// sum / 2^shift per thread: one ex2 per element instead of two, and no exp in the output pass.
// Why: in bfloat16 a 16-byte pack is 8 elements, so two MUFU.EX2 per element (16 per SM per clock
// on sm_90) take ~0.5 ms of the 1.0 ms copy of 4096 x 262144; KEEP halves that.
// EVEN: the row is exactly the cluster's (or the block's) slice, so no pack is past its end and
// the 14 per-pack bounds checks go (launch_config refuses EVEN for any other row length). Why: in
// the bfloat16 long-row winner (1024 x (8 + 8), KEEP, cluster 2) the checks were 240 of 2192 SASS
// instructions a thread (ISETP, BSSY/BSYNC and BRA around every pack; sm_90a: 1952 with EVEN, 63
// registers either way, no spills). Instantiated only where it costs no registers
// (ONEPASS_EVEN_V*): the float32 1024 x (8 + 8) kernel spilled 212 bytes with it, and the 512-thread
// 16-bit shapes went from 32-40 to 59-64 registers (fewer blocks an SM).
template <typename T, int VEC, int THREADS, int PACKS, bool IN_CLUSTER, int SPACKS = 0, bool KEEP = false, bool EVEN = false>
__global__ void __launch_bounds__(THREADS)
softmax_onepass_kernel(const T* __restrict__ x, T* __restrict__ y, int n_cols) {
    using P = Pack<T, VEC>;
    static_assert(SPACKS == 0 || sizeof(P) == 16, "shared-memory packs are 16-byte cp.async copies");
    static_assert(!KEEP || sizeof(P) == 16, "KEEP writes exp(x - m) over 16-byte packs");
    constexpr float SHIFT = sizeof(T) == 2 ? KEEP_SHIFT_16 : 0.0f;  // keeps e in float16's range
    constexpr float UNSHIFT = sizeof(T) == 2 ? 1.0f / 32768.0f : 1.0f;  // 2^-SHIFT, exact
    constexpr int SLICE = THREADS * (PACKS + SPACKS) * VEC;
    extern __shared__ __align__(16) unsigned char staged_bytes[];
    P* staged = reinterpret_cast<P*>(staged_bytes);  // staged[j * THREADS + t]: no bank conflicts
    __shared__ float2 warp_pairs[THREADS / 32 + 1];
    __shared__ float2 block_pair;  // this block's pair, read by the cluster's other blocks

    int part = 0, parts = 1;
    if constexpr (IN_CLUSTER) {
        part = (int)cg::this_cluster().block_rank();
        parts = (int)cg::this_cluster().num_blocks();
    }
    const int64_t row = (int64_t)blockIdx.x / parts;  // grid.x = rows * parts: rows past 65535 fit
    const int col0 = part * SLICE;
    const int n_packs = (min(n_cols - col0, SLICE) + VEC - 1) / VEC;  // may be <= 0 for the last parts
    const P* x_p = reinterpret_cast<const P*>(x + row * n_cols + col0);
    P* y_p = reinterpret_cast<P*>(y + row * n_cols + col0);

    if constexpr (SPACKS > 0) {
#pragma unroll
        for (int j = 0; j < SPACKS; ++j) {
            const int i = (PACKS + j) * THREADS + (int)threadIdx.x;
            if (EVEN || i < n_packs) cp_async16(&staged[j * THREADS + threadIdx.x], &x_p[i]);
        }
    }
    P p[PACKS];
#pragma unroll
    for (int j = 0; j < PACKS; ++j) {
        const int i = j * THREADS + (int)threadIdx.x;
        if (EVEN || i < n_packs) p[j] = x_p[i];
    }
    // n_cols % VEC == 0 when VEC > 1, so a pack is wholly inside the row or wholly outside.
    float m = -INFINITY;
    if constexpr (KEEP && sizeof(T) == 2) {  // half an instruction per element, no unpacking
        uint32_t acc = P::NEG_INF2;
#pragma unroll
        for (int j = 0; j < PACKS; ++j)
            if (EVEN || j * THREADS + (int)threadIdx.x < n_packs) p[j].max_into(acc);
        if constexpr (SPACKS > 0) {
            cp_async_wait_all();  // this thread's copies are visible to it (no block barrier needed)
#pragma unroll
            for (int j = 0; j < SPACKS; ++j)
                if (EVEN || (PACKS + j) * THREADS + (int)threadIdx.x < n_packs) staged[j * THREADS + threadIdx.x].max_into(acc);
        }
        m = P::max_of(acc);
    } else {
#pragma unroll
        for (int j = 0; j < PACKS; ++j) {
            if (EVEN || j * THREADS + (int)threadIdx.x < n_packs) {
#pragma unroll
                for (int k = 0; k < VEC; ++k) m = fmaxf(m, p[j].get(k));
            }
        }
        if constexpr (SPACKS > 0) {
            cp_async_wait_all();  // this thread's copies are visible to it (no block barrier needed)
#pragma unroll
            for (int j = 0; j < SPACKS; ++j) {
                if (EVEN || (PACKS + j) * THREADS + (int)threadIdx.x < n_packs) {
                    const P q = staged[j * THREADS + threadIdx.x];
#pragma unroll
                    for (int k = 0; k < VEC; ++k) m = fmaxf(m, q.get(k));
                }
            }
        }
    }
    float s = 0.0f;
    if constexpr (KEEP) {
        // A thread of -inf only (or none) computes with 0 for its max: every e is then 0 and the
        // pair stays empty (-inf, 0).
        const float m0 = (m == -INFINITY) ? 0.0f : m;
        // The exponent (x - m0) log2e + SHIFT, the difference first (exact near the max; see
        // exp_shifted). Not folded into one FFMA x log2e + (SHIFT - m0 log2e): at |m0| = 1e6 (a
        // bfloat16 row may hold that) the rounding of m0 log2e is 0.06 in the exponent, 4%.
        auto e = [&](float v) { return ex2(fmaf(v - m0, LOG2E, SHIFT)); };
#pragma unroll
        for (int j = 0; j < PACKS; ++j) {
            if (EVEN || j * THREADS + (int)threadIdx.x < n_packs) {
#pragma unroll
                for (int k = 0; k < VEC; k += 2) {
                    const float a = e(p[j].get(k)), b = e(p[j].get(k + 1));
                    s += a + b;
                    p[j].keep2(k, a, b);
                }
            }
        }
        if constexpr (SPACKS > 0) {
#pragma unroll
            for (int j = 0; j < SPACKS; ++j) {
                if (EVEN || (PACKS + j) * THREADS + (int)threadIdx.x < n_packs) {
                    P q = staged[j * THREADS + threadIdx.x];
#pragma unroll
                    for (int k = 0; k < VEC; k += 2) {
                        const float a = e(q.get(k)), b = e(q.get(k + 1));
                        s += a + b;
                        q.keep2(k, a, b);
                    }
                    staged[j * THREADS + threadIdx.x] = q;  // only this thread reads it back
                }
            }
        }
        s *= UNSHIFT;  // exact: a power of two
    } else if (m != -INFINITY) {  // a thread with no element (or only -inf) keeps the empty pair
#pragma unroll
        for (int j = 0; j < PACKS; ++j) {
            if (EVEN || j * THREADS + (int)threadIdx.x < n_packs) {
#pragma unroll
                for (int k = 0; k < VEC; ++k) s += exp_shifted(p[j].get(k), m);
            }
        }
        if constexpr (SPACKS > 0) {
#pragma unroll
            for (int j = 0; j < SPACKS; ++j) {
                if (EVEN || (PACKS + j) * THREADS + (int)threadIdx.x < n_packs) {
                    const P q = staged[j * THREADS + threadIdx.x];
#pragma unroll
                    for (int k = 0; k < VEC; ++k) s += exp_shifted(q.get(k), m);
                }
            }
        }
    }
    float2 pair = block_merge<THREADS>(m, s, warp_pairs);
    if constexpr (IN_CLUSTER) {
        cg::cluster_group cluster = cg::this_cluster();
        if (threadIdx.x == 0) block_pair = pair;
        cluster.sync();  // every block's pair is written (release/acquire across the cluster)
        if (threadIdx.x < 32) {
            const int lane = (int)threadIdx.x;
            float2 q = lane < parts ? *cluster.map_shared_rank(&block_pair, lane) : make_float2(-INFINITY, 0.0f);
            warp_merge(q.x, q.y);
            if (lane == 0) warp_pairs[0] = q;
        }
        __syncthreads();
        pair = warp_pairs[0];
        // Arrive now, wait at the end: no block may exit while another still reads its pair.
        cluster.barrier_arrive();
    }
    const float row_max = pair.x;
    const float inv_sum = 1.0f / pair.y;
    if constexpr (KEEP) {
        // 0 * inv_sum: 0 for a thread of -inf only, NaN for a row of -inf only (as torch.softmax).
        const float c = (m == -INFINITY) ? 0.0f * inv_sum : ex2((m - row_max) * LOG2E) * (inv_sum * UNSHIFT);
#pragma unroll
        for (int j = 0; j < PACKS; ++j) {
            const int i = j * THREADS + (int)threadIdx.x;
            if (EVEN || i < n_packs) y_p[i] = kept_pack<P, VEC>(p[j], c);
        }
        if constexpr (SPACKS > 0) {
#pragma unroll
            for (int j = 0; j < SPACKS; ++j) {
                const int i = (PACKS + j) * THREADS + (int)threadIdx.x;
                if (EVEN || i < n_packs) y_p[i] = kept_pack<P, VEC>(staged[j * THREADS + threadIdx.x], c);
            }
        }
    } else {
#pragma unroll
        for (int j = 0; j < PACKS; ++j) {
            const int i = j * THREADS + (int)threadIdx.x;
            if (EVEN || i < n_packs) y_p[i] = scaled_pack<P, VEC>(p[j], row_max, inv_sum);
        }
        if constexpr (SPACKS > 0) {
#pragma unroll
            for (int j = 0; j < SPACKS; ++j) {
                const int i = (PACKS + j) * THREADS + (int)threadIdx.x;
                if (EVEN || i < n_packs) y_p[i] = scaled_pack<P, VEC>(staged[j * THREADS + threadIdx.x], row_max, inv_sum);
            }
        }
    }
    if constexpr (IN_CLUSTER) cg::this_cluster().barrier_wait();
}


// ---- three passes over the row, the later two from L2 ------------------------------------------
// softmax_l2_kernel: torch.compile's form for wide rows (and kernels/_softmax_rows.py
// _softmax_l2_kernel's). One block of THREADS per row walks it in steps of THREADS 16-byte packs,
// three times: the max, the sum of exp(x - max), then the output. The first two reads ask L2 to
// keep the row (L2::evict_last), the third lets it go (evict_first), so HBM sees the row once.
// A thread holds one pack a step, not its share of the row: at most 32 registers, two blocks of
// 1024 an SM, where the one-pass plan holds 32 floats a thread in 52 registers (1024 threads an
// SM) and no block loads while it reduces. Why: H200, 16384 x 16384 float32, the one-pass plan
// ran 0.5178 ms (ncu: DRAM 86.1% of peak) against torch.compile's three passes at 0.4985 ms
// (89.0%). Needs n_cols % VEC == 0 and 16-byte-aligned rows (launch_l2 checks).
__device__ __forceinline__ uint64_t l2_evict_last_policy() {
    uint64_t policy;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
    uint64_t policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}

// One 16-byte pack with an L2 cache-eviction policy (PTX ISA: ld ... .L2::cache_hint); L1: 0 no L1
// priority (the default, evict_normal), 1 L1::evict_last, 2 L1::evict_first (PTX ISA "ld",
// .level::eviction_priority).
template <int L1, typename P>
__device__ __forceinline__ P load_with_policy(const P* ptr, uint64_t policy) {
    static_assert(sizeof(P) == 16, "16-byte packs");
    uint4 u;
    if constexpr (L1 == 1)
        asm volatile("ld.global.L1::evict_last.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                     : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w) : "l"(ptr), "l"(policy));
    else if constexpr (L1 == 2)
        asm volatile("ld.global.L1::evict_first.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                     : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w) : "l"(ptr), "l"(policy));
    else
        asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                     : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w) : "l"(ptr), "l"(policy));
    P p;
    memcpy(&p, &u, sizeof(P));
    return p;
}

// TRITON_FORM: the loads of kernels/_softmax_rows.py's _softmax_l2_kernel as Triton 3.6 compiles
// it for sm_90 (which on the H200 ran at torch.compile's speed, 0.4995 against 0.5002 ms at
// 16384^2 float32, 2026-12-03, where this kernel without them ran 0.5192): the first two passes'
// loads also ask L1 to keep the row (L1::evict_last: two blocks' 64 KiB rows fit an SM's L1, so
// the re-reads can stop there), the last pass's ask L1 to drop it (L1::evict_first). Triton's PTX
// loops are not unrolled, but ptxas unrolls them (its SASS: four 16-byte loads in flight in each of
// the first two passes, two in the third), so the loops here keep theirs: a first try with
// `unroll 1` ran 0.5997 ms against 0.5239 without the hints (H200, 2026-12-03, third session).
template <typename T, int THREADS, bool TRITON_FORM = false>
__global__ void __launch_bounds__(THREADS, 2048 / THREADS)
softmax_l2_kernel(const T* __restrict__ x, T* __restrict__ y, int n_cols) {
    constexpr int VEC = 16 / (int)sizeof(T);
    using P = Pack<T, VEC>;
    __shared__ float2 warp_pairs[THREADS / 32 + 1];
    const int64_t row = blockIdx.x;
    const P* x_p = reinterpret_cast<const P*>(x + row * n_cols);
    P* y_p = reinterpret_cast<P*>(y + row * n_cols);
    const int n_packs = n_cols / VEC;
    const uint64_t keep = l2_evict_last_policy();

    constexpr int L1_KEEP = TRITON_FORM ? 1 : 0, L1_DROP = TRITON_FORM ? 2 : 0;

    float m = -INFINITY;
#pragma unroll 4
    for (int i = (int)threadIdx.x; i < n_packs; i += THREADS) {
        const P p = load_with_policy<L1_KEEP>(x_p + i, keep);
#pragma unroll
        for (int k = 0; k < VEC; ++k) m = fmaxf(m, p.get(k));
    }
    // pairs (m, 0) merge to the block's max; every thread returns it
    const float row_max = block_merge<THREADS>(m, 0.0f, warp_pairs).x;
    float s = 0.0f;
    if (row_max != -INFINITY) {  // a row of -inf only: the sum stays 0 and the output NaN (torch.softmax's)
#pragma unroll 4
        for (int i = (int)threadIdx.x; i < n_packs; i += THREADS) {
            const P p = load_with_policy<L1_KEEP>(x_p + i, keep);
#pragma unroll
            for (int k = 0; k < VEC; ++k) s += exp_shifted(p.get(k), row_max);
        }
    }
    // every pair has the same max: the merge adds the sums
    const float inv_sum = 1.0f / block_merge<THREADS>(row_max, s, warp_pairs).y;
    const uint64_t drop = l2_evict_first_policy();
#pragma unroll 4
    for (int i = (int)threadIdx.x; i < n_packs; i += THREADS)
        y_p[i] = scaled_pack<P, VEC>(load_with_policy<L1_DROP>(x_p + i, drop), row_max, inv_sum);
}

}  // namespace onepass

// ---- launchers ------------------------------------------------------------------------------
// The instantiated (THREADS, PACKS) configurations, as elements per thread E = PACKS * VEC:
// E = 32 for the default ladder (THREADS 32..1024), plus the variants the H200 exploration
// compared (E = 16 and 64). Codes: dtype 0 float32, 1 float16, 2 bfloat16.
// Dynamic shared memory past 48 KiB needs an opt-in per kernel (CUDA C++ Programming Guide,
// "Shared Memory"); sm_90 allows up to 227 KiB per block.
template <typename K>
static cudaError_t allow_smem(K kernel, int bytes) {
    if (bytes <= 48 * 1024) return cudaSuccess;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

// One instantiation of the one-pass kernel over `rows` rows (`cluster` blocks a row with
// IN_CLUSTER), if this build has it (pick::onepass), else cudaErrorInvalidConfiguration.
template <typename T, int VEC, int THREADS, int PACKS, bool IN_CLUSTER, int SPACKS, bool KEEP, bool EVEN>
static cudaError_t launch_kernel(const T* x, T* y, int64_t rows, int cols, int cluster, cudaStream_t stream) {
    if constexpr (!pick::onepass<T, VEC, THREADS, PACKS, IN_CLUSTER, SPACKS, KEEP, EVEN>()) {
        return cudaErrorInvalidConfiguration;  // not built (WB_SOFTMAX_KERNELS)
    } else {
        constexpr int SMEM = THREADS * SPACKS * 16;  // the staged packs (16 bytes each)
        auto kernel = onepass::softmax_onepass_kernel<T, VEC, THREADS, PACKS, IN_CLUSTER, SPACKS, KEEP, EVEN>;
        cudaError_t err = allow_smem(kernel, SMEM);
        if (err != cudaSuccess) return err;
        if constexpr (!IN_CLUSTER) {
            kernel<<<(unsigned int)rows, THREADS, SMEM, stream>>>(x, y, cols);
            return cudaGetLastError();
        } else {
            if (cluster > 8) {  // 16 blocks is a non-portable cluster size on sm_90: opt in once
                err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
                if (err != cudaSuccess) return err;
            }
            cudaLaunchConfig_t config = {};
            config.gridDim = dim3((unsigned int)(rows * cluster), 1, 1);
            config.blockDim = dim3(THREADS, 1, 1);
            config.dynamicSmemBytes = SMEM;
            config.stream = stream;
            cudaLaunchAttribute attr[1];
            attr[0].id = cudaLaunchAttributeClusterDimension;
            attr[0].val.clusterDim.x = (unsigned int)cluster;
            attr[0].val.clusterDim.y = 1;
            attr[0].val.clusterDim.z = 1;
            config.attrs = attr;
            config.numAttrs = 1;
            return cudaLaunchKernelEx(&config, kernel, x, y, cols);
        }
    }
}

template <typename T, int VEC, int THREADS, int PACKS, int SPACKS = 0, bool KEEP = false, bool EVEN = false>
static cudaError_t launch_config(const T* x, T* y, int64_t rows, int cols, int cluster, cudaStream_t stream) {
    constexpr int64_t SLICE = (int64_t)THREADS * (PACKS + SPACKS) * VEC;
    // EVEN drops the bounds checks: only a row of exactly the cluster's slices may take it
    if (EVEN && (int64_t)cols != SLICE * (cluster > 1 ? cluster : 1)) return cudaErrorInvalidValue;
    if (cluster <= 1) return launch_kernel<T, VEC, THREADS, PACKS, false, SPACKS, KEEP, EVEN>(x, y, rows, cols, 1, stream);
    return launch_kernel<T, VEC, THREADS, PACKS, true, SPACKS, KEEP, EVEN>(x, y, rows, cols, cluster, stream);
}

// X(THREADS, PACKS) for one VEC: every configuration the dispatch below can launch.
#define ONEPASS_CONFIGS_V4(X) X(32, 8) X(64, 8) X(128, 8) X(256, 8) X(512, 8) X(1024, 8) \
    X(1024, 4) X(256, 16) X(64, 4) X(128, 2) X(32, 4)
#define ONEPASS_CONFIGS_V8(X) X(32, 4) X(64, 4) X(128, 4) X(256, 4) X(512, 4) X(1024, 4) \
    X(1024, 2) X(256, 8) X(128, 16) X(512, 8) X(1024, 8) X(512, 2)
#define ONEPASS_CONFIGS_V1(X) X(32, 16) X(64, 16) X(128, 16) X(256, 16) X(512, 16) X(1024, 16)

// S(THREADS, PACKS, SPACKS): the configurations that stage SPACKS packs per thread in shared
// memory (16-byte packs only), for the long rows (4096 x 262144): a slice of THREADS * (PACKS +
// SPACKS) packs per block, so fewer blocks per row (clusters of 2-8 that tile the GPCs better) or
// two blocks per SM where registers alone allow one (the load of one overlaps the other's
// reduction). Sized for <= 227 KiB of shared memory per block (V4 (1024, 8, 8): 128 KiB).
// Round 2 keeps the three fastest of each width on the H200 (kernels/_onepass.py has the figures).
#define ONEPASS_STAGED_V4(S) S(1024, 8, 8) S(256, 16, 16) S(512, 8, 8)
#define ONEPASS_STAGED_V8(S) S(1024, 8, 8) S(512, 4, 4) S(512, 8, 8)
// K(THREADS, PACKS, SPACKS): staged configurations with KEEP (exp kept over the input: one ex2 per
// element), for the two fastest staged shapes of each width.
#define ONEPASS_KEPT_V4(K) K(1024, 8, 8) K(256, 16, 16)
#define ONEPASS_KEPT_V8(K) K(1024, 8, 8) K(512, 4, 4)
// Kept shapes that also have an EVEN instantiation (no bounds checks; see softmax_onepass_kernel),
// launched when even = 1 and the row is exactly the cluster's slices.
#define ONEPASS_EVEN_V8(E) E(1024, 8, 8)

// R(THREADS, PACKS, SPACKS, KEEP): one-block shapes for wide rows (>= 32 KiB, one block in the plan),
// launched without a cluster only (launch_row), which the tuner compares with the plan and the
// three-pass L2 kernel (kernels/_onepass.py ROW_SHAPES): KEEP on the plan's shape (half the ex2).
// (Half the threads with half of each thread's packs staged in shared memory ran 3-5% behind the
// plan on the H200 and were dropped.)
#define ONEPASS_ROWS_V4(R) R(512, 8, 0, 1)
#define ONEPASS_ROWS_V8(R) R(512, 4, 0, 1)

#define ONEPASS_CASE(THR, PK) \
    if (threads == THR && packs == PK && spacks == 0 && !keep && !even) \
        return launch_config<T, VEC, THR, PK>(x, y, rows, cols, cluster, stream);
#define ONEPASS_STAGED_CASE(THR, PK, SPK) \
    if (threads == THR && packs == PK && spacks == SPK && !keep && !even) \
        return launch_config<T, VEC, THR, PK, SPK>(x, y, rows, cols, cluster, stream);
#define ONEPASS_KEPT_CASE(THR, PK, SPK) \
    if (threads == THR && packs == PK && spacks == SPK && keep && !even) \
        return launch_config<T, VEC, THR, PK, SPK, true>(x, y, rows, cols, cluster, stream);

#define ONEPASS_EVEN_CASE(THR, PK, SPK) \
    if (threads == THR && packs == PK && spacks == SPK && keep && even) \
        return launch_config<T, VEC, THR, PK, SPK, true, true>(x, y, rows, cols, cluster, stream);
#define ONEPASS_ROW_CASE(THR, PK, SPK, KP) \
    if (threads == THR && packs == PK && spacks == SPK && keep == (KP != 0) && !even) \
        return launch_row<T, VEC, THR, PK, SPK, (KP != 0)>(x, y, rows, cols, cluster, stream);

// A one-block shape of ONEPASS_ROWS_V*: no cluster variant is compiled (half the kernels).
template <typename T, int VEC, int THREADS, int PACKS, int SPACKS, bool KEEP>
static cudaError_t launch_row(const T* x, T* y, int64_t rows, int cols, int cluster, cudaStream_t stream) {
    if (cluster > 1) return cudaErrorInvalidConfiguration;
    return launch_kernel<T, VEC, THREADS, PACKS, false, SPACKS, KEEP, false>(x, y, rows, cols, 1, stream);
}

template <typename T, int VEC>
static cudaError_t dispatch(const T* x, T* y, int64_t rows, int cols, int threads, int packs, int spacks,
                            int cluster, bool keep, bool even, cudaStream_t stream) {
    if constexpr (VEC * sizeof(T) == 16 && sizeof(T) == 4) {
        ONEPASS_CONFIGS_V4(ONEPASS_CASE)
        ONEPASS_STAGED_V4(ONEPASS_STAGED_CASE)
        ONEPASS_KEPT_V4(ONEPASS_KEPT_CASE)
        ONEPASS_ROWS_V4(ONEPASS_ROW_CASE)
    }
    if constexpr (VEC * sizeof(T) == 16 && sizeof(T) == 2) {
        ONEPASS_CONFIGS_V8(ONEPASS_CASE)
        ONEPASS_STAGED_V8(ONEPASS_STAGED_CASE)
        ONEPASS_KEPT_V8(ONEPASS_KEPT_CASE)
        ONEPASS_EVEN_V8(ONEPASS_EVEN_CASE)
        ONEPASS_ROWS_V8(ONEPASS_ROW_CASE)
    }
    if constexpr (VEC == 1) { ONEPASS_CONFIGS_V1(ONEPASS_CASE) }
    return cudaErrorInvalidConfiguration;  // not an instantiated configuration
}

// Elements per thread of the default ladder, and the largest cluster (sm_90: 16, non-portable).
static const int ELEMS_PER_THREAD = 32;
static const int MAX_CLUSTER = 16;

// The default configuration for a row of n_cols: the fewest threads (>= 32) that hold the row
// at ELEMS_PER_THREAD per thread in one block (<= 1024 threads); past that, 512-thread blocks in
// the smallest power-of-two cluster that holds it (<= 16 blocks, so rows up to
// 16 * 512 * 32 = 262144 columns). Returns 0 when the row is too long for one pass.
extern "C" int softmax_onepass_plan(int n_cols, int vec, int* threads, int* packs, int* cluster) {
    // Scalar rows (n_cols % VEC != 0) hold 16 per thread: 32 scalars at 1024 threads spill.
    const int packs_per_thread = vec == 1 ? ELEMS_PER_THREAD / 2 : ELEMS_PER_THREAD / vec;
    const int64_t n_packs = ((int64_t)n_cols + vec - 1) / vec;
    int t = 32;
    while (t < 1024 && (int64_t)t * packs_per_thread < n_packs) t *= 2;
    if ((int64_t)t * packs_per_thread >= n_packs) {
        *threads = t; *packs = packs_per_thread; *cluster = 1;
        return 1;
    }
    int c = 2;
    while (c < MAX_CLUSTER && (int64_t)c * 512 * packs_per_thread < n_packs) c *= 2;
    if ((int64_t)c * 512 * packs_per_thread < n_packs) return 0;
    *threads = 512; *packs = packs_per_thread; *cluster = c;
    return 1;
}

// threads, packs, spacks, cluster, keep: an instantiated configuration, or threads = 0 for the plan above.
static bool onepass_vec_ok(int cols, int itemsize, const void* x, const void* y) {
    return (cols % (16 / itemsize) == 0) && ((uintptr_t)x % 16 == 0) && ((uintptr_t)y % 16 == 0);
}

// Whether the one-pass kernel takes (rows, cols) with the default plan: 1 yes, 0 no (the row is
// longer than a 16-block cluster holds, or rows * cluster blocks exceed the grid).
extern "C" int softmax_onepass_fits(int64_t rows, int cols, int itemsize, const void* x, const void* y) {
    int threads, packs, cluster;
    const int vec = onepass_vec_ok(cols, itemsize, x, y) ? 16 / itemsize : 1;
    if (!softmax_onepass_plan(cols, vec, &threads, &packs, &cluster)) return 0;
    return rows * cluster <= 0x7fffffffLL ? 1 : 0;
}

template <typename T>
static cudaError_t launch_onepass(const T* x, T* y, int64_t rows, int cols, int threads, int packs, int spacks,
                                  int cluster, int keep, int even, cudaStream_t stream) {
    constexpr int VEC = 16 / sizeof(T);
    if (rows == 0 || cols == 0) return cudaSuccess;
    const bool vec_ok = onepass_vec_ok(cols, (int)sizeof(T), x, y);
    if (threads == 0 && !softmax_onepass_plan(cols, vec_ok ? VEC : 1, &threads, &packs, &cluster))
        return cudaErrorInvalidValue;  // too long for one pass: softmax_onepass_fits says so first
    if (cluster > 1 && rows * cluster > 0x7fffffffLL) return cudaErrorInvalidValue;
    return vec_ok ? dispatch<T, VEC>(x, y, rows, cols, threads, packs, spacks, cluster, keep != 0, even != 0, stream)
                  : dispatch<T, 1>(x, y, rows, cols, threads, packs, spacks, cluster, keep != 0, even != 0, stream);
}

// The three-pass L2 kernel at 1024 threads a block: 16-byte packs only; triton_form 1 for
// TRITON_FORM (L1 eviction hints). (512 threads, timed on the H200 in three calls, ran 4-27%
// behind 1024 and was dropped, 2026-12-03.)
template <typename T>
static cudaError_t launch_l2(const T* x, T* y, int64_t rows, int cols, int threads, int triton_form,
                             cudaStream_t stream) {
    if (rows == 0 || cols == 0) return cudaSuccess;
    if (!onepass_vec_ok(cols, (int)sizeof(T), x, y)) return cudaErrorInvalidValue;
    if (threads != 1024) return cudaErrorInvalidConfiguration;
    if (triton_form) {
        if constexpr (pick::l2<T, 1024, true>()) onepass::softmax_l2_kernel<T, 1024, true><<<(unsigned int)rows, 1024, 0, stream>>>(x, y, cols);
        else return cudaErrorInvalidConfiguration;  // not built (WB_SOFTMAX_KERNELS)
    } else {
        if constexpr (pick::l2<T, 1024, false>()) onepass::softmax_l2_kernel<T, 1024, false><<<(unsigned int)rows, 1024, 0, stream>>>(x, y, cols);
        else return cudaErrorInvalidConfiguration;
    }
    return cudaGetLastError();
}
extern "C" cudaError_t softmax_l2_f32(const void* x, void* y, int64_t rows, int cols, int threads, int form,
                                      cudaStream_t s) {
    return launch_l2((const float*)x, (float*)y, rows, cols, threads, form, s);
}
extern "C" cudaError_t softmax_l2_f16(const void* x, void* y, int64_t rows, int cols, int threads, int form,
                                      cudaStream_t s) {
    return launch_l2((const __half*)x, (__half*)y, rows, cols, threads, form, s);
}
extern "C" cudaError_t softmax_l2_bf16(const void* x, void* y, int64_t rows, int cols, int threads, int form,
                                       cudaStream_t s) {
    return launch_l2((const __nv_bfloat16*)x, (__nv_bfloat16*)y, rows, cols, threads, form, s);
}

// Plain launchers (extern "C" so the binding can declare them without templates).
extern "C" cudaError_t softmax_onepass_f32(const void* x, void* y, int64_t rows, int cols, int threads,
                                           int packs, int spacks, int cluster, int keep, int even,
                                           cudaStream_t s) {
    return launch_onepass((const float*)x, (float*)y, rows, cols, threads, packs, spacks, cluster, keep, even, s);
}
extern "C" cudaError_t softmax_onepass_f16(const void* x, void* y, int64_t rows, int cols, int threads,
                                           int packs, int spacks, int cluster, int keep, int even,
                                           cudaStream_t s) {
    return launch_onepass((const __half*)x, (__half*)y, rows, cols, threads, packs, spacks, cluster, keep, even, s);
}
extern "C" cudaError_t softmax_onepass_bf16(const void* x, void* y, int64_t rows, int cols, int threads,
                                           int packs, int spacks, int cluster, int keep, int even,
                                           cudaStream_t s) {
    return launch_onepass((const __nv_bfloat16*)x, (__nv_bfloat16*)y, rows, cols, threads, packs, spacks, cluster, keep, even, s);
}
