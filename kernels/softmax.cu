// Row softmax in CUDA C++: only __global__ kernels and plain launchers, no torch headers, so
// `nvcc -ptx -arch=sm_90 softmax.cu` compiles this file alone. The torch binding (tensor checks,
// dtype dispatch) lives in kernels/softmax.py and is passed to load_inline.
//
//   y[i, j] = exp(x[i, j] - m_i) / sum_k exp(x[i, k] - m_i),   m_i = max_k x[i, k]
#include <math.h>

#include "common.cuh"  // to_float / from_float, cdiv

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

template <typename T>
static cudaError_t launch_softmax(const T* x, T* y, int64_t n_rows, int n_cols, cudaStream_t stream) {
    constexpr int VEC = 16 / sizeof(T);
    bool vec_ok = (n_cols % VEC == 0) && ((uintptr_t)x % 16 == 0) && ((uintptr_t)y % 16 == 0);
    if (n_rows == 0 || n_cols == 0) return cudaSuccess;
    if (vec_ok) {
        softmax_kernel<T, VEC><<<(unsigned int)n_rows, softmax_threads(n_cols / VEC), 0, stream>>>(x, y, n_cols);
    } else {
        softmax_kernel<T, 1><<<(unsigned int)n_rows, softmax_threads(n_cols), 0, stream>>>(x, y, n_cols);
    }
    return cudaGetLastError();
}

// Plain launchers (extern "C" so the binding can declare them without templates).
extern "C" cudaError_t softmax_f32(const void* x, void* y, int64_t rows, int cols, cudaStream_t s) {
    return launch_softmax((const float*)x, (float*)y, rows, cols, s);
}
extern "C" cudaError_t softmax_f16(const void* x, void* y, int64_t rows, int cols, cudaStream_t s) {
    return launch_softmax((const __half*)x, (__half*)y, rows, cols, s);
}
extern "C" cudaError_t softmax_bf16(const void* x, void* y, int64_t rows, int cols, cudaStream_t s) {
    return launch_softmax((const __nv_bfloat16*)x, (__nv_bfloat16*)y, rows, cols, s);
}
