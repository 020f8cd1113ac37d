// What every .cu of the shipped kernels shares: float conversions for the three dtypes and the
// ceiling division of launch geometry. Device code and plain host helpers only, no torch headers,
// so `nvcc -ptx` compiles each .cu alone (quoted includes resolve beside the including file; the
// load_inline build passes -I for this folder: workbench/cuda_build.py).
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

// Arithmetic runs in float for every dtype: load with to_float, round once with from_float<T>.
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

// Blocks needed to cover a elements b at a time (a grid dimension).
static inline unsigned int cdiv(int64_t a, int64_t b) { return (unsigned int)((a + b - 1) / b); }
