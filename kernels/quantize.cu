// Row-wise fp8 quantization in CUDA C++: only __global__ kernels and plain launchers, no torch
// headers, so `nvcc -ptx -arch=sm_90 quantize.cu` compiles this file alone. The torch binding
// lives in kernels/quantize.py and is passed to load_inline.
//
//   s[i] = max(amax_j |x[i, j]|, AMAX_FLOOR) / FP8_MAX,   q[i, j] = satfinite(x[i, j] / s[i])
//
// One block per row (the lecture's softmax pattern): a block-wide max reduction (warp shuffles,
// then one value per warp in shared memory), then the fp8 values written with the saturating
// conversion (cvt.rn.satfinite: a value past the format's max becomes +-max, never NaN or inf).
// Rows of up to 16384 bfloat16 in 16-byte packs stay in registers (quantize_rows_vec_kernel:
// one read); others are read twice (quantize_rows_kernel: the second read from L1/L2).
#include "common.cuh"  // to_float, cdiv
#include <cuda_fp8.h>

#define AMAX_FLOOR 1e-12f

template <int THREADS>
__device__ __forceinline__ float block_max(float v, float* shared) {
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, offset));
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < THREADS / 32 ? shared[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, offset));
    return v;  // every thread holds the row's max
}

// E5M2 = false: e4m3 (max 448); true: e5m2 (max 57344). x: bfloat16 (rows, cols), q: fp8 bytes.
template <int THREADS, bool E5M2>
__global__ void quantize_rows_kernel(const __nv_bfloat16* __restrict__ x, __nv_fp8_storage_t* __restrict__ q,
                                     float* __restrict__ scales, int cols) {
    __shared__ float shared[32];
    const int64_t row = blockIdx.x;
    const __nv_bfloat16* xr = x + row * cols;
    __nv_fp8_storage_t* qr = q + row * cols;
    float amax = 0.0f;
    for (int j = threadIdx.x; j < cols; j += THREADS) amax = fmaxf(amax, fabsf(to_float(xr[j])));
    amax = block_max<THREADS>(amax, shared);
    const float fp8_max = E5M2 ? 57344.0f : 448.0f;
    const float scale = fmaxf(amax, AMAX_FLOOR) / fp8_max;
    if (threadIdx.x == 0) scales[row] = scale;
    for (int j = threadIdx.x; j < cols; j += THREADS)
        qr[j] = __nv_cvt_float_to_fp8(to_float(xr[j]) / scale, __NV_SATFINITE, E5M2 ? __NV_E5M2 : __NV_E4M3);
}

// Rows of 8-element packs (N % 8 == 0, 16-byte aligned rows), up to THREADS * PACKS packs: each
// thread loads its packs once (16 bytes each, ld.global.v4) and keeps them in registers for the
// cast, so the row is read once from HBM and never again; 8 e4m3 bytes are stored at a time.
template <int THREADS, int PACKS, bool E5M2>
__global__ void quantize_rows_vec_kernel(const __nv_bfloat16* __restrict__ x, __nv_fp8_storage_t* __restrict__ q,
                                         float* __restrict__ scales, int cols) {
    __shared__ float shared[32];
    const int64_t row = blockIdx.x;
    const uint4* xr = reinterpret_cast<const uint4*>(x + row * cols);
    uint2* qr = reinterpret_cast<uint2*>(q + row * cols);
    const int packs = cols / 8;
    uint4 v[PACKS];
    float amax = 0.0f;
#pragma unroll
    for (int p = 0; p < PACKS; ++p) {
        const int j = threadIdx.x + p * THREADS;
        v[p] = j < packs ? xr[j] : make_uint4(0, 0, 0, 0);
        const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(&v[p]);
#pragma unroll
        for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(__bfloat162float(e[i])));
    }
    amax = block_max<THREADS>(amax, shared);
    const float fp8_max = E5M2 ? 57344.0f : 448.0f;
    const float scale = fmaxf(amax, AMAX_FLOOR) / fp8_max;
    if (threadIdx.x == 0) scales[row] = scale;
#pragma unroll
    for (int p = 0; p < PACKS; ++p) {
        const int j = threadIdx.x + p * THREADS;
        if (j < packs) {
            const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(&v[p]);
            union { __nv_fp8_storage_t b[8]; uint2 u; } out;
#pragma unroll
            for (int i = 0; i < 8; ++i)
                out.b[i] = __nv_cvt_float_to_fp8(__bfloat162float(e[i]) / scale, __NV_SATFINITE, E5M2 ? __NV_E5M2 : __NV_E4M3);
            qr[j] = out.u;
        }
    }
}

// Plain launchers (extern "C" so the binding can declare them without templates).
extern "C" cudaError_t quantize_rows_bf16(const void* x, void* q, void* scales, int64_t rows, int cols, int e5m2,
                                          cudaStream_t stream) {
    constexpr int THREADS = 256;
    if (rows == 0) return cudaSuccess;
    const bool aligned = ((uintptr_t)x % 16 == 0) && ((uintptr_t)q % 8 == 0) && cols % 8 == 0;
    if (aligned && cols <= THREADS * 8 * 8 && !e5m2) {  // the row in registers: read once
        if (cols <= THREADS * 8 * 2)
            quantize_rows_vec_kernel<THREADS, 2, false><<<(unsigned int)rows, THREADS, 0, stream>>>(
                (const __nv_bfloat16*)x, (__nv_fp8_storage_t*)q, (float*)scales, cols);
        else
            quantize_rows_vec_kernel<THREADS, 8, false><<<(unsigned int)rows, THREADS, 0, stream>>>(
                (const __nv_bfloat16*)x, (__nv_fp8_storage_t*)q, (float*)scales, cols);
        return cudaGetLastError();
    }
    if (e5m2)
        quantize_rows_kernel<THREADS, true><<<(unsigned int)rows, THREADS, 0, stream>>>(
            (const __nv_bfloat16*)x, (__nv_fp8_storage_t*)q, (float*)scales, cols);
    else
        quantize_rows_kernel<THREADS, false><<<(unsigned int)rows, THREADS, 0, stream>>>(
            (const __nv_bfloat16*)x, (__nv_fp8_storage_t*)q, (float*)scales, cols);
    return cudaGetLastError();
}
