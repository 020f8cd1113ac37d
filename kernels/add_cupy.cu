// z = x + y in float32 for CuPy's RawKernel (NVRTC, kernels/add.py `cupy`): device code only and
// no headers (NVRTC has no host headers; float4 is built in), so CuPy compiles it on the GPU box
// and `nvcc -ptx -arch=sm_90 add_cupy.cu` compiles it alone here.
//
// Each thread moves one 16-byte float4 of x, y and z per step of a grid-stride loop (ld.global.v4,
// coalesced: consecutive threads take consecutive packs); a scalar tail handles n % 4. `aligned`
// is 0 when a pointer is not 16-byte aligned (a view with an offset): then every element is scalar.
extern "C" __global__ void add_f32_kernel(const float* __restrict__ x, const float* __restrict__ y,
                                          float* __restrict__ z, long long n, int aligned) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long n_vec = aligned ? n / 4 : 0;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const float4* y4 = reinterpret_cast<const float4*>(y);
    float4* z4 = reinterpret_cast<float4*>(z);
    for (long long i = first; i < n_vec; i += stride) {
        const float4 a = x4[i], b = y4[i];
        float4 c;  // members set one by one: make_float4 lives in a header NVRTC may not have
        c.x = a.x + b.x; c.y = a.y + b.y; c.z = a.z + b.z; c.w = a.w + b.w;
        z4[i] = c;
    }
    for (long long i = n_vec * 4 + first; i < n; i += stride) {
        z[i] = x[i] + y[i];
    }
}
