// Matrix multiply in CUDA C++: only __global__ kernels and plain launchers, no torch headers, so
// `nvcc -ptx -arch=sm_90 matmul.cu` compiles this file alone. The torch binding (tensor checks,
// dtype dispatch) lives in kernels/matmul.py and is passed to load_inline.
//
//   C[m, n] = sum_k A[m, k] B[k, n]      A: (M, K), B: (K, N), C: (M, N), all row-major
//
// Both kernels run on the CUDA cores (FMA) with a float accumulator; neither uses tensor cores,
// which is why cuBLAS (`pytorch`) and Triton's tl.dot are far ahead in 16-bit dtypes.
#include "common.cuh"  // to_float / from_float, cdiv

// The lecture's triple loop on the GPU (section 7): one thread per output element. threadIdx.x
// runs along a row of C, so a warp reads 32 consecutive B elements (coalesced) and one A element
// (broadcast). Every output reads a whole row of A and column of B from global memory: about
// 2MNK loads in all, served mostly by L1/L2.
__global__ void matmul_naive_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                    float* __restrict__ C, int M, int N, int K) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += A[(int64_t)row * K + k] * B[(int64_t)k * N + col];
        C[(int64_t)row * N + col] = acc;
    }
}

// Shared-memory tiling with register blocking (section 7: each tile is loaded once and reused
// BM or BN times, cutting global reads from ~2MNK to ~MNK(1/BM + 1/BN)). A block of
// (BM/TM) x (BN/TN) threads computes a BM x BN tile of C; per BK step it stages an A tile
// (stored transposed, As[k][m]) and a B tile in shared memory as float, then each thread
// accumulates a TM x TN micro-tile from register fragments. Thread (ty, tx) owns rows
// ty + i*(BM/TM) and columns tx + j*(BN/TN): a warp's fragment reads are one broadcast row of
// As and 16 consecutive words of Bs (no bank conflicts), and its stores are 16 consecutive
// columns. Out-of-range rows, columns and the K tail are zero-filled / masked.
template <typename T, int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
matmul_tiled_kernel(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N, int K) {
    constexpr int THREADS_N = BN / TN;
    constexpr int THREADS_M = BM / TM;
    constexpr int THREADS = THREADS_M * THREADS_N;
    constexpr int PAD = 4;  // skews As rows across banks for the transposing store
    __shared__ float As[BK][BM + PAD];
    __shared__ float Bs[BK][BN + PAD];

    const int tid = threadIdx.x;
    const int tx = tid % THREADS_N;
    const int ty = tid / THREADS_N;
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // A tile: consecutive threads take consecutive k of one row (contiguous in A).
#pragma unroll
        for (int idx = tid; idx < BM * BK; idx += THREADS) {
            const int m = idx / BK, k = idx % BK;
            const int gm = row0 + m, gk = k0 + k;
            As[k][m] = (gm < M && gk < K) ? to_float(A[(int64_t)gm * K + gk]) : 0.0f;
        }
        // B tile: consecutive threads take consecutive n of one row (contiguous in B).
#pragma unroll
        for (int idx = tid; idx < BK * BN; idx += THREADS) {
            const int k = idx / BN, n = idx % BN;
            const int gk = k0 + k, gn = col0 + n;
            Bs[k][n] = (gk < K && gn < N) ? to_float(B[(int64_t)gk * N + gn]) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a_frag[TM], b_frag[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a_frag[i] = As[k][ty + i * THREADS_M];
#pragma unroll
            for (int j = 0; j < TN; ++j) b_frag[j] = Bs[k][tx + j * THREADS_N];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a_frag[i] * b_frag[j];
        }
        __syncthreads();  // the tiles are overwritten by the next step
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int gm = row0 + ty + i * THREADS_M;
        if (gm >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int gn = col0 + tx + j * THREADS_N;
            if (gn < N) C[(int64_t)gm * N + gn] = from_float<T>(acc[i][j]);
        }
    }
}

// Tile shape of the tiled kernel: 128 x 128 outputs per block of 256 threads, 8 x 8 per thread,
// K staged 16 at a time (16.5 KiB of shared memory).
constexpr int TILE_M = 128, TILE_N = 128, TILE_K = 16, MICRO_M = 8, MICRO_N = 8;
constexpr int TILED_THREADS = (TILE_M / MICRO_M) * (TILE_N / MICRO_N);

template <typename T>
static cudaError_t launch_tiled(const T* a, const T* b, T* c, int m, int n, int k, cudaStream_t stream) {
    dim3 grid(cdiv(n, TILE_N), cdiv(m, TILE_M));
    matmul_tiled_kernel<T, TILE_M, TILE_N, TILE_K, MICRO_M, MICRO_N><<<grid, TILED_THREADS, 0, stream>>>(a, b, c, m, n, k);
    return cudaGetLastError();
}

// Plain launchers (extern "C" so the binding can declare them without templates).
extern "C" cudaError_t matmul_naive_f32(const void* a, const void* b, void* c, int m, int n, int k, cudaStream_t s) {
    dim3 block(32, 8);
    dim3 grid(cdiv(n, block.x), cdiv(m, block.y));
    matmul_naive_kernel<<<grid, block, 0, s>>>((const float*)a, (const float*)b, (float*)c, m, n, k);
    return cudaGetLastError();
}
extern "C" cudaError_t matmul_tiled_f32(const void* a, const void* b, void* c, int m, int n, int k, cudaStream_t s) {
    return launch_tiled((const float*)a, (const float*)b, (float*)c, m, n, k, s);
}
extern "C" cudaError_t matmul_tiled_f16(const void* a, const void* b, void* c, int m, int n, int k, cudaStream_t s) {
    return launch_tiled((const __half*)a, (const __half*)b, (__half*)c, m, n, k, s);
}
extern "C" cudaError_t matmul_tiled_bf16(const void* a, const void* b, void* c, int m, int n, int k, cudaStream_t s) {
    return launch_tiled((const __nv_bfloat16*)a, (const __nv_bfloat16*)b, (__nv_bfloat16*)c, m, n, k, s);
}
