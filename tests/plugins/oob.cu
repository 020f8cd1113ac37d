// A deliberately broken kernel for the isolation evidence (tests/plugins/oob_cuda.py): every
// thread writes 4 TiB past the end of y, which the GPU reports as an illegal memory access.
#include <cuda_runtime.h>

__global__ void oob_add_one_kernel(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        y[i + (1LL << 40)] = x[i] + 1.0f;  // out of bounds on purpose
    }
}

extern "C" cudaError_t oob_add_one(const void* x, void* y, long long n, cudaStream_t stream) {
    long long blocks = (n + 255) / 256;
    oob_add_one_kernel<<<(unsigned int)blocks, 256, 0, stream>>>((const float*)x, (float*)y, n);
    return cudaGetLastError();
}
