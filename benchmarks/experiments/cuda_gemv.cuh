// What the CUDA GEMV benchmarks share (cuda_gemv_ceiling.cu, cuda_persistent_products.cu): error checks, a CUDA graph's
// replay timed, weights read once and not kept in L1, bf16 pairs and int8 bytes turned into fp32, and one 16-byte
// chunk of weights multiplied by its inputs.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1); } } while (0)

// k<<<grid, block, smem, st>>>(args...), with PDL when `pdl` (the next kernel may launch before this one ends; it
// waits for it with griddepcontrol.wait).
template <class... Params, class... Args>
static void launch_k(void (*k)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t st, bool pdl,
                     Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid; cfg.blockDim = block; cfg.dynamicSmemBytes = smem; cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at; cfg.numAttrs = pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&cfg, k, args...));
}

// A bf16 number's value, on the host.
static float bf(uint16_t u) { uint32_t v = (uint32_t)u << 16; float f; memcpy(&f, &v, 4); return f; }

// n bf16 numbers of random sign and mantissa, their top bits `base` (0x3F00: |v| in [0.5, 1)), from the generator st.
static std::vector<uint16_t> random_bf16(int n, uint16_t base, uint32_t& st) {
    std::vector<uint16_t> h(n);
    for (auto& v : h) { st = st * 1664525u + 1013904223u; v = base + (st >> 25) + ((st >> 16) & 0x8000); }
    return h;
}

// Microseconds a launch (or a layer) of a graph of `calls` launches, the median of 5 x 50 replays.
template <class F> static double graph_us(F record, int calls) {
    cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    record(st);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 10; ++i) CK(cudaGraphLaunch(ge, st));
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    std::vector<double> t;
    for (int rep = 0; rep < 5; ++rep) {
        CK(cudaEventRecord(a, st));
        for (int i = 0; i < 50; ++i) CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        float ms; CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1000.0 / 50 / calls);
    }
    std::sort(t.begin(), t.end());
    CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g)); CK(cudaStreamDestroy(st));
    return t[2];
}

__device__ __forceinline__ uint4 ld_stream(const uint4* p) {   // volatile: the compiler keeps these loads first
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ float lo(uint32_t u) { return __uint_as_float(u << 16); }          // bf16 pair, element 0
__device__ __forceinline__ float hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }  // element 1

__device__ __forceinline__ float i8(uint32_t t, uint32_t sel) {   // byte of t (top bit flipped) -> q, as fp32
    return __uint_as_float(__byte_perm(t, 0x4B000000u, sel)) - 8388736.f;
}

__device__ __forceinline__ float dot_i8(uint32_t q, uint32_t x01, uint32_t x23, float acc) {
    uint32_t t = q ^ 0x80808080u;
    acc = fmaf(i8(t, 0x7440), lo(x01), acc);
    acc = fmaf(i8(t, 0x7441), hi(x01), acc);
    acc = fmaf(i8(t, 0x7442), lo(x23), acc);
    return fmaf(i8(t, 0x7443), hi(x23), acc);
}

__device__ __forceinline__ float dot_bf16(uint32_t w, uint32_t x, float acc) {
    return fmaf(lo(w), lo(x), fmaf(hi(w), hi(x), acc));
}

// acc + one chunk c of weights times its inputs: 16 int8 weights against the 16 bf16 inputs xa, xb, or 8 bf16
// weights against xa.
template <int BITS>
__device__ __forceinline__ float chunk_dot(uint4 c, uint4 xa, uint4 xb, float acc) {
    if (BITS == 8) {
        acc = dot_i8(c.x, xa.x, xa.y, acc);
        acc = dot_i8(c.y, xa.z, xa.w, acc);
        acc = dot_i8(c.z, xb.x, xb.y, acc);
        return dot_i8(c.w, xb.z, xb.w, acc);
    }
    acc = dot_bf16(c.x, xa.x, acc);
    acc = dot_bf16(c.y, xa.y, acc);
    acc = dot_bf16(c.z, xa.z, acc);
    return dot_bf16(c.w, xa.w, acc);
}

// acc[r] += row r's chunks c[r][0 .. IT) (chunk i of a row is the lane's i * 32 + lane) times their inputs x.
template <int R, int IT, int BITS>
__device__ __forceinline__ void rows_dot(const uint4 (&c)[R][IT], const uint4* x, int lane, float (&acc)[R]) {
#pragma unroll
    for (int i = 0; i < IT; ++i) {
        const int v = i * 32 + lane, a = BITS == 8 ? 2 * v : v;
        const uint4 xa = __ldg(x + a);
        const uint4 xb = BITS == 8 ? __ldg(x + a + 1) : xa;
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = chunk_dot<BITS>(c[r][i], xa, xb, acc[r]);
    }
}

// Each row's sum over the warp's lanes, written by lane 0 (times the row's scale for int8) for rows below N.
template <int R, int BITS>
__device__ __forceinline__ void rows_store(float (&acc)[R], __nv_bfloat16* y, const float* scale, int row0, int N,
                                           int lane) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
        if (lane == 0 && row0 + r < N) y[row0 + r] = __float2bfloat16(BITS == 8 ? acc[r] * scale[row0 + r] : acc[r]);
    }
}
