// The products of a whole one-token step (22 TinyLlama layers: q,k,v, o, gate/up, down; no attention, norm or
// SwiGLU) in ONE kernel launch, int8 (one scale a row) or bf16: each phase's output is the next phase's input, and the
// phases hand over through a grid-wide barrier instead of a kernel boundary. Before it waits at a barrier, each warp
// asks for its first rows of the next phase's weights (they do not depend on the previous phase), as 04i's kernels do
// before their PDL wait. The GEMV inside is cuda_gemv_ceiling.cu's (a warp owns rows, a lane 16-byte runs of them).
// A measurement of what fewer kernel boundaries would give at batch 1, not a kernel of the package. On the GPU:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -o persistent benchmarks/experiments/cuda_persistent_products.cu
//   ./persistent > persistent.txt
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_gemv.cuh"

constexpr int LAYERS = 22, SHAPES = 4;
constexpr int NS[SHAPES] = {2560, 2048, 11264, 2048}, KS[SHAPES] = {2048, 2048, 2048, 5632};

struct Phase { const uint4* w; const float* s; int N; };

// Block-wide arrival on the grid's counter (after this block's stores), and the wait for `target` arrivals. FENCE:
// a full fence, then the add; else one add with release semantics (which covers the block's stores, ordered before
// it by the block barrier).
template <bool FENCE>
__device__ __forceinline__ void arrive(unsigned* count) {
    __syncthreads();
    if (threadIdx.x == 0) {
        if (FENCE) { __threadfence(); atomicAdd(count, 1u); }
        else asm volatile("red.release.gpu.global.add.u32 [%0], 1;" :: "l"(count) : "memory");
    }
}
__device__ __forceinline__ void wait(unsigned* count, unsigned target) {
    if (threadIdx.x == 0) {
        unsigned v;
        do { asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(count)); } while (v < target);
    }
    __syncthreads();
}

// One phase: rows gw*G .. of N, G at a time, every W*G rows; the first G rows' weights are requested before the
// wait for the previous phase; x (written by the previous phase on other multiprocessors) read through L2 after it.
template <int K, int G, int BITS>
__device__ void phase(const Phase& p, const uint4* x, __nv_bfloat16* y, int gw, int W, int lane, unsigned* count,
                      unsigned target) {
    constexpr int PER = BITS == 8 ? 16 : 8, VPR = K / PER, IT = VPR / 32;
    uint4 c[G][IT];
    int base = gw * G;
    auto load = [&](int b) {
#pragma unroll
        for (int r = 0; r < G; ++r)
#pragma unroll
            for (int i = 0; i < IT; ++i)
                c[r][i] = b + r < p.N ? ld_stream(p.w + (size_t)(b + r) * VPR + i * 32 + lane) : make_uint4(0, 0, 0, 0);
    };
    load(base);
    wait(count, target);
    while (base < p.N) {
        float acc[G];
#pragma unroll
        for (int r = 0; r < G; ++r) acc[r] = 0.f;
#pragma unroll
        for (int i = 0; i < IT; ++i) {
            const int v = i * 32 + lane;
            const uint4 xa = __ldcg(x + (BITS == 8 ? 2 * v : v));
            const uint4 xb = BITS == 8 ? __ldcg(x + 2 * v + 1) : xa;
#pragma unroll
            for (int r = 0; r < G; ++r) acc[r] = chunk_dot<BITS>(c[r][i], xa, xb, acc[r]);
        }
#pragma unroll
        for (int r = 0; r < G; ++r) {
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
            if (lane == 0 && base + r < p.N)
                y[base + r] = __float2bfloat16(BITS == 8 ? acc[r] * p.s[base + r] : acc[r]);
        }
        base += W * G;
        if (base < p.N) load(base);
    }
}

// phases[0 .. n): shape n % 4 of layer n / 4; buffers ping-pong (phase n writes buf[n & 1], reads the other, or x0).
template <int BITS, int G, bool FENCE = true>
__global__ void products(const Phase* __restrict__ phases, int n, const uint4* x0, __nv_bfloat16* buf0,
                         __nv_bfloat16* buf1, unsigned* count) {
    const int lane = threadIdx.x & 31, W = gridDim.x * (blockDim.x >> 5);
    const int gw = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    for (int k = 0; k < n; ++k) {
        const uint4* x = k == 0 ? x0 : (const uint4*)(k & 1 ? buf0 : buf1);
        __nv_bfloat16* y = k & 1 ? buf1 : buf0;
        const unsigned target = k * gridDim.x;                    // every block has arrived k times
        switch (k % SHAPES) {
            case 3: phase<5632, 1, BITS>(phases[k], x, y, gw, W, lane, count, target); break;
            default: phase<2048, G, BITS>(phases[k], x, y, gw, W, lane, count, target); break;
        }
        arrive<FENCE>(count);
    }
}

// Host side ------------------------------------------------------------------------------------------------------
static uint16_t to_bf(double d) {
    float f = (float)d; uint32_t v; memcpy(&v, &f, 4);
    return (uint16_t)((v + 0x7FFF + ((v >> 16) & 1)) >> 16);
}

struct Host { std::vector<uint8_t> w; std::vector<float> s; };

int main() {
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    uint32_t st = 7;
    std::vector<uint16_t> hx = random_bf16(2048, 0x3F00, st);    // |x| ~ 0.5
    void* x0; CK(cudaMalloc(&x0, 2048 * 2)); CK(cudaMemcpy(x0, hx.data(), 4096, cudaMemcpyHostToDevice));
    __nv_bfloat16 *b0, *b1; CK(cudaMalloc(&b0, 11264 * 2)); CK(cudaMalloc(&b1, 11264 * 2));
    unsigned* count; CK(cudaMalloc(&count, 4));
    for (int bits : {8, 16}) {
        std::vector<Phase> ph(LAYERS * SHAPES);
        std::vector<Host> host(SHAPES);                 // layer 0's weights, for the check
        for (int k = 0; k < LAYERS * SHAPES; ++k) {
            int N = NS[k % SHAPES], K = KS[k % SHAPES];
            size_t bytes = (size_t)N * K * bits / 8;
            std::vector<uint8_t> h(bytes);
            for (auto& b : h) { st = st * 1664525u + 1013904223u; b = st >> 24; }
            if (bits == 16) for (size_t i = 1; i < bytes; i += 2) h[i] = 0x3C + (h[i] & 1) + (h[i] & 0x80);
            std::vector<float> s(N, bits == 8 ? 1.f / (74.f * sqrtf((float)K)) : 1.f);
            void* w; float* ds;
            CK(cudaMalloc(&w, bytes)); CK(cudaMemcpy(w, h.data(), bytes, cudaMemcpyHostToDevice));
            CK(cudaMalloc(&ds, N * 4)); CK(cudaMemcpy(ds, s.data(), N * 4, cudaMemcpyHostToDevice));
            ph[k] = Phase{(const uint4*)w, ds, N};
            if (k < SHAPES) host[k] = Host{h, s};
        }
        Phase* dph; CK(cudaMalloc(&dph, ph.size() * sizeof(Phase)));
        CK(cudaMemcpy(dph, ph.data(), ph.size() * sizeof(Phase), cudaMemcpyHostToDevice));
        // The reference for layer 0's four phases, each output rounded to bf16 as the kernel's.
        std::vector<double> xr(hx.size());
        for (size_t i = 0; i < hx.size(); ++i) xr[i] = bf(hx[i]);
        for (int k = 0; k < SHAPES; ++k) {
            int N = NS[k], K = KS[k];
            std::vector<double> yr(N);
            for (int r = 0; r < N; ++r) {
                double a = 0;
                for (int c = 0; c < K; ++c)
                    a += (bits == 8 ? (double)(int8_t)host[k].w[(size_t)r * K + c]
                                    : bf(((uint16_t*)host[k].w.data())[(size_t)r * K + c])) * xr[c];
                yr[r] = bf(to_bf(a * host[k].s[r]));
            }
            xr = yr;
            if (k == 2) xr.resize(5632);                // down reads the first 5,632 of gate/up's outputs
        }
        struct V { const char* name; void (*k)(const Phase*, int, const uint4*, __nv_bfloat16*, __nv_bfloat16*,
                                                 unsigned*); int warps; };
        const std::vector<V> variants = {{"G1 w4", products<8, 1>, 4}, {"G2 w4", products<8, 2>, 4}, {"G4 w4", products<8, 4>, 4},
                              {"G1 w8", products<8, 1>, 8}, {"G2 w8", products<8, 2>, 8}, {"G4 w8", products<8, 4>, 8},
                              {"G1 w16", products<8, 1>, 16}, {"G2 w16", products<8, 2>, 16},
                              {"G4 w8 rel", products<8, 4, false>, 8}, {"G2 w16 rel", products<8, 2, false>, 16},
                              {"G2 w4 rel", products<8, 2, false>, 4}};
        const std::vector<V> variants16 = {{"G1 w4", products<16, 1>, 4}, {"G2 w4", products<16, 2>, 4},
                                {"G4 w4", products<16, 4>, 4}, {"G1 w8", products<16, 1>, 8},
                                {"G2 w8", products<16, 2>, 8}, {"G4 w8", products<16, 4>, 8},
                                {"G1 w16", products<16, 1>, 16}, {"G2 w16", products<16, 2>, 16},
                                {"G2 w8 rel", products<16, 2, false>, 8}, {"G4 w4 rel", products<16, 4, false>, 4}};
        for (const V& v : bits == 8 ? variants : variants16) {
            int per_sm = 0;
            CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, v.k, v.warps * 32, 0));
            if (per_sm == 0) { printf("bits %d %s: does not fit\n", bits, v.name); continue; }
            int grid = per_sm * prop.multiProcessorCount;     // all resident at once (nothing else runs)
            auto run = [&](cudaStream_t s, int n) {
                CK(cudaMemsetAsync(count, 0, 4, s));
                launch_k(v.k, dim3(grid), dim3(v.warps * 32), 0, s, false, (const Phase*)dph, n, (const uint4*)x0, b0,
                         b1, count);
            };
            run(0, SHAPES);                               // layer 0 alone: the check
            CK(cudaDeviceSynchronize());
            std::vector<uint16_t> out(2048);
            CK(cudaMemcpy(out.data(), b1, 4096, cudaMemcpyDeviceToHost));    // phase 3 writes buf1
            double worst = 0, scale = 0;
            for (int i = 0; i < 2048; ++i) scale = std::max(scale, fabs(xr[i]));
            for (int i = 0; i < 2048; ++i) worst = std::max(worst, fabs(bf(out[i]) - xr[i]) / scale);
            const double us = graph_us([&](cudaStream_t s) { run(s, LAYERS * SHAPES); }, LAYERS);
            printf("bits %2d %-10s %d blocks of %2d warps: %6.2f us a layer (22 layers, one launch)  layer 0 err %.1e%s\n",
                   bits, v.name, grid, v.warps, us, worst, worst > 3e-2 ? "  WRONG" : "");
            fflush(stdout);
        }
        for (auto& p : ph) { CK(cudaFree((void*)p.w)); CK(cudaFree((void*)p.s)); }
        CK(cudaFree(dph));
    }
    return 0;
}
