// What a hand-written CUDA GEMV reaches at one token on TinyLlama's four shapes, int8 (one scale a row) and bf16:
// a ceiling for chapter 05b's Triton GEMV, not a kernel of the package. Each warp owns R rows; each lane asks for
// all of its 16-byte weight chunks first (R x K/512 of them for int8), then converts and multiplies them; the row's
// sum is taken with warp shuffles. int8 becomes fp32 as in 04i's `_int8_weights` (one byte permute under 2^23's
// exponent, one subtraction). Timed as chains of 22 launches (one weight copy per launch, so every weight comes from
// HBM) in one CUDA graph, and as 22 layers of the four shapes, launched plainly and with PDL (each kernel asks for
// its weights, lets the next launch, then waits for the previous one before it reads x); with PDL, tiles are also
// chosen in the layer. Beside them: `gemv_ahead`, whose blocks ask the copy engine for their rows into shared memory
// before the wait, and a chain of kernels that read no weights (what four products a layer cost beside their bytes).
// Build and run on the GPU:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -o gemv_ceiling benchmarks/experiments/cuda_gemv_ceiling.cu
//   ./gemv_ceiling > ceiling.txt
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "cuda_gemv.cuh"

constexpr int LAYERS = 22;

// y[n] = scale[n] * sum_k W[n, k] x[k] for n < N; W int8 (BITS 8) or bf16 (16), rows of K.
template <int K, int R, int WARPS, int BITS, bool PDL>
__global__ void __launch_bounds__(WARPS * 32) gemv(const uint4* __restrict__ w, const float* __restrict__ scale,
                                                   const uint4* __restrict__ x, __nv_bfloat16* __restrict__ y,
                                                   int N) {
    constexpr int PER = BITS == 8 ? 16 : 8;        // weights in 16 bytes
    constexpr int VPR = K / PER;                   // 16-byte chunks a row
    static_assert(VPR % 32 == 0, "a row in whole warp-wide chunks");
    constexpr int IT = VPR / 32;
    const int lane = threadIdx.x & 31;
    const int row0 = (blockIdx.x * WARPS + (threadIdx.x >> 5)) * R;
    uint4 c[R][IT];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int i = 0; i < IT; ++i)
            c[r][i] = row0 + r < N ? ld_stream(w + (size_t)(row0 + r) * VPR + i * 32 + lane) : make_uint4(0, 0, 0, 0);
    if (PDL) {
        asm volatile("griddepcontrol.launch_dependents;");
        asm volatile("griddepcontrol.wait;" ::: "memory");
    }
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.f;
    rows_dot<R, IT, BITS>(c, x, lane, acc);
    rows_store<R, BITS>(acc, y, scale, row0, N, lane);
}

// The handover alone: a kernel that reads the K inputs in every warp, as the GEMV does, and writes one output a
// warp, with no weights. A chain of these is what four products a layer cost beside their weights.
template <bool PDL>
__global__ void handover(const uint4* __restrict__ x, __nv_bfloat16* __restrict__ y, int K) {
    if (PDL) {
        asm volatile("griddepcontrol.launch_dependents;");
        asm volatile("griddepcontrol.wait;" ::: "memory");
    }
    const int lane = threadIdx.x & 31;
    float acc = 0.f;
    for (int v = lane; v < K / 8; v += 32) {
        const uint4 xa = __ldg(x + v);
        acc += lo(xa.x) + hi(xa.y) + lo(xa.z) + hi(xa.w);
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) y[blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)] = __float2bfloat16(acc);
}

// The weights asked for ahead into shared memory: one block a multiprocessor, each with a run of whole rows; before
// its PDL wait, one thread asks the copy engine (`cp.async.bulk`) for the first `pre_rows` of them (as many as fit in
// the block's share of shared memory, chosen so that two consecutive products' blocks fit on a multiprocessor at
// once), then every warp reads its rows from shared memory; rows beyond those are read from HBM after the wait.
__device__ __forceinline__ uint32_t saddr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

template <int K, int WARPS, int BITS>
__global__ void __launch_bounds__(WARPS * 32, 2) gemv_ahead(const uint4* __restrict__ w, const float* __restrict__ scale,
                                                         const uint4* __restrict__ x, __nv_bfloat16* __restrict__ y,
                                                         int N, int rows_per_block, int pre_rows) {
    constexpr int PER = BITS == 8 ? 16 : 8, VPR = K / PER, IT = VPR / 32;
    static_assert(VPR % 32 == 0, "a row in whole warp-wide chunks");
    extern __shared__ __align__(128) uint4 ws[];
    __shared__ __align__(8) uint64_t bar;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int first = blockIdx.x * rows_per_block, rows = min(rows_per_block, N - first);
    const int pre = min(pre_rows, rows);
    if (threadIdx.x == 0 && pre > 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(saddr(&bar)));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        const uint32_t bytes = pre * VPR * 16;
        asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;"
                     :: "r"(saddr(&bar)), "r"(bytes) : "memory");
        const char* src = (const char*)(w + (size_t)first * VPR);
        for (uint32_t off = 0; off < bytes; off += 32768) {
            const uint32_t n = min(32768u, bytes - off);
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                         :: "r"(saddr((const char*)ws + off)), "l"(src + off), "r"(n), "r"(saddr(&bar)) : "memory");
        }
    }
    asm volatile("griddepcontrol.launch_dependents;");
    asm volatile("griddepcontrol.wait;" ::: "memory");
    uint4 xr[IT][BITS == 8 ? 2 : 1];                        // this lane's inputs, for every row
#pragma unroll
    for (int i = 0; i < IT; ++i) {
        const int v = i * 32 + lane;
        if (BITS == 8) { xr[i][0] = __ldg(x + 2 * v); xr[i][1] = __ldg(x + 2 * v + 1); }
        else xr[i][0] = __ldg(x + v);
    }
    __syncthreads();                                        // the barrier's initialisation seen by every thread
    if (pre > 0) {
        uint32_t done = 0;
        while (!done)
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                         : "=r"(done) : "r"(saddr(&bar)) : "memory");
    }
    for (int r = warp; r < rows; r += WARPS) {
        uint4 c[IT];
#pragma unroll
        for (int i = 0; i < IT; ++i)
            c[i] = r < pre ? ws[r * VPR + i * 32 + lane] : ld_stream(w + (size_t)(first + r) * VPR + i * 32 + lane);
        float acc = 0.f;
#pragma unroll
        for (int i = 0; i < IT; ++i) acc = chunk_dot<BITS>(c[i], xr[i][0], xr[i][BITS == 8 ? 1 : 0], acc);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0) y[first + r] = __float2bfloat16(BITS == 8 ? acc * scale[first + r] : acc);
    }
}

typedef void (*AheadKernel)(const uint4*, const float*, const uint4*, __nv_bfloat16*, int, int, int);

template <int BITS> static AheadKernel ahead_kernel(int K) {
    return K == 2048 ? gemv_ahead<2048, 8, BITS> : gemv_ahead<5632, 8, BITS>;
}

typedef void (*Kernel)(const uint4*, const float*, const uint4*, __nv_bfloat16*, int);

struct Config { const char* name; int K, R, warps, bits; Kernel k, k_pdl; };

#define CFG(K, R, W, B) Config{#K " R" #R " w" #W " b" #B, K, R, W, B, gemv<K, R, W, B, false>, gemv<K, R, W, B, true>}
static const Config CONFIGS[] = {
    CFG(2048, 1, 4, 8), CFG(2048, 2, 4, 8), CFG(2048, 4, 4, 8), CFG(2048, 1, 8, 8), CFG(2048, 2, 8, 8),
    CFG(2048, 4, 8, 8), CFG(2048, 8, 4, 8), CFG(2048, 3, 8, 8), CFG(2048, 6, 8, 8), CFG(2048, 8, 8, 8),
    CFG(2048, 3, 4, 8), CFG(2048, 6, 4, 8), CFG(2048, 11, 8, 8),
    CFG(5632, 1, 4, 8), CFG(5632, 2, 4, 8), CFG(5632, 1, 8, 8), CFG(5632, 2, 8, 8), CFG(5632, 4, 4, 8),
    CFG(5632, 3, 4, 8), CFG(5632, 3, 8, 8), CFG(5632, 4, 8, 8),
    CFG(2048, 1, 4, 16), CFG(2048, 2, 4, 16), CFG(2048, 4, 4, 16), CFG(2048, 1, 8, 16), CFG(2048, 2, 8, 16),
    CFG(2048, 4, 8, 16),
    CFG(5632, 1, 4, 16), CFG(5632, 2, 4, 16), CFG(5632, 1, 8, 16), CFG(5632, 2, 8, 16),
    CFG(2048, 3, 8, 16), CFG(2048, 6, 8, 16), CFG(2048, 3, 4, 16),
};

struct Shape { const char* name; int N, K; };
static const Shape SHAPES[] = {{"qkv", 2560, 2048}, {"o", 2048, 2048}, {"gate_up", 11264, 2048}, {"down", 2048, 5632}};

struct Mat { void* w; float* s; int N, K, bits; };

static Mat make(int N, int K, int bits, uint32_t seed) {
    Mat m{nullptr, nullptr, N, K, bits};
    size_t bytes = (size_t)N * K * bits / 8;
    std::vector<uint8_t> h(bytes);
    uint32_t st = seed * 2654435761u + 1;
    for (size_t i = 0; i < bytes; ++i) { st = st * 1664525u + 1013904223u; h[i] = st >> 24; }
    if (bits == 16) for (size_t i = 1; i < bytes; i += 2) h[i] = 0x3C + (h[i] & 1) + ((h[i] & 0x80));  // |w| ~ 0.01
    CK(cudaMalloc(&m.w, bytes));
    CK(cudaMemcpy(m.w, h.data(), bytes, cudaMemcpyHostToDevice));
    std::vector<float> s(N);
    for (int n = 0; n < N; ++n) s[n] = 1e-3f * (1 + n % 7);
    CK(cudaMalloc(&m.s, N * sizeof(float)));
    CK(cudaMemcpy(m.s, s.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    return m;
}

static void launch(const Config& c, const Mat& m, const void* x, __nv_bfloat16* y, cudaStream_t st, bool pdl = false) {
    launch_k(pdl ? c.k_pdl : c.k, dim3((m.N + c.warps * c.R - 1) / (c.warps * c.R)), dim3(c.warps * 32), 0, st, pdl,
             (const uint4*)m.w, (const float*)m.s, (const uint4*)x, y, m.N);
}

// One product with its weights asked for ahead: `blocks` blocks, at most `budget` bytes of shared memory each.
static void launch_ahead(const Mat& m, const void* x, __nv_bfloat16* y, cudaStream_t st, int blocks, int budget) {
    const int row_bytes = m.K * m.bits / 8, rows_per_block = (m.N + blocks - 1) / blocks;
    const int pre = std::min(rows_per_block, budget / row_bytes);
    AheadKernel k = m.bits == 8 ? ahead_kernel<8>(m.K) : ahead_kernel<16>(m.K);
    const int smem = std::max(pre * row_bytes, 16);
    launch_k(k, dim3((m.N + rows_per_block - 1) / rows_per_block), dim3(256), smem, st, true, (const uint4*)m.w,
             (const float*)m.s, (const uint4*)x, y, m.N, rows_per_block, pre);
}

// The largest relative error of one launch against a double-precision sum on the host.
static double check(const std::function<void()>& run, const Mat& m, const void* x, __nv_bfloat16* y,
                    const std::vector<uint16_t>& hx) {
    run();
    CK(cudaDeviceSynchronize());
    size_t bytes = (size_t)m.N * m.K * m.bits / 8;
    std::vector<uint8_t> hw(bytes);
    std::vector<float> hs(m.N);
    std::vector<uint16_t> hy(m.N);
    CK(cudaMemcpy(hw.data(), m.w, bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hs.data(), m.s, m.N * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hy.data(), y, m.N * 2, cudaMemcpyDeviceToHost));
    double worst = 0, scale = 0;
    std::vector<double> ref(m.N);
    for (int n = 0; n < m.N; ++n) {
        double a = 0;
        for (int k = 0; k < m.K; ++k) {
            double wv = m.bits == 8 ? (double)(int8_t)hw[(size_t)n * m.K + k]
                                    : bf(((uint16_t*)hw.data())[(size_t)n * m.K + k]);
            a += wv * bf(hx[k]);
        }
        ref[n] = m.bits == 8 ? a * hs[n] : a;
        scale = fmax(scale, fabs(ref[n]));
    }
    for (int n = 0; n < m.N; ++n) worst = fmax(worst, fabs(bf(hy[n]) - ref[n]) / scale);
    return worst;
}

int main() {
    cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
    printf("device %s, %d SMs\n", p.name, p.multiProcessorCount);
    uint32_t st = 7;
    std::vector<uint16_t> hx = random_bf16(5632, 0x3D00, st);    // |x| ~ 2^-5
    void* x; CK(cudaMalloc(&x, hx.size() * 2)); CK(cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    __nv_bfloat16* y; CK(cudaMalloc(&y, 11264 * 2));
    for (int bits : {8, 16}) {
        std::vector<std::vector<Mat>> mats(4);                  // [shape][layer]
        for (int s = 0; s < 4; ++s)
            for (int l = 0; l < LAYERS; ++l) mats[s].push_back(make(SHAPES[s].N, SHAPES[s].K, bits, 100 * s + l));
        const Config* best[4] = {};
        double best_us[4] = {1e9, 1e9, 1e9, 1e9};
        for (int s = 0; s < 4; ++s) {
            const Shape& sh = SHAPES[s];
            double mb = (double)sh.N * sh.K * bits / 8 / 1e6;
            for (const Config& c : CONFIGS) {
                if (c.K != sh.K || c.bits != bits) continue;
                double err = check([&] { launch(c, mats[s][0], x, y, 0); }, mats[s][0], x, y, hx);
                double us = graph_us([&](cudaStream_t stream) {
                    for (int l = 0; l < LAYERS; ++l) launch(c, mats[s][l], x, y, stream); }, LAYERS);
                printf("bits %2d %-8s %-18s %7.2f us  %6.2f TB/s  err %.1e%s\n", bits, sh.name, c.name, us,
                       mb / us, err, err > 2e-2 ? "  WRONG" : "");
                if (err <= 2e-2 && us < best_us[s]) { best_us[s] = us; best[s] = &c; }
            }
        }
        for (bool pdl : {false, true}) {
            double layer = graph_us([&](cudaStream_t stream) {
                for (int l = 0; l < LAYERS; ++l)
                    for (int s = 0; s < 4; ++s) launch(*best[s], mats[s][l], x, y, stream, pdl); }, LAYERS);
            printf("bits %2d%s layer (best of each shape, 22 layers in one graph): %.2f us a layer; alone:", bits,
                   pdl ? " PDL" : "", layer);
            for (int s = 0; s < 4; ++s) {
                double us = graph_us([&](cudaStream_t stream) {
                    for (int l = 0; l < LAYERS; ++l) launch(*best[s], mats[s][l], x, y, stream, pdl); }, LAYERS);
                printf(" %s %.2f (%s)", SHAPES[s].name, us, best[s]->name);
            }
            printf("\n");
        }
        // With PDL, each shape's tile chosen in the layer (the others as chosen so far), twice round: tiles whose
        // rows all fit in one wave ask for all of their weights before the wait.
        const Config* pb[4] = {best[0], best[1], best[2], best[3]};
        auto layer_us = [&](const Config* const* t) {
            return graph_us([&](cudaStream_t stream) {
                for (int l = 0; l < LAYERS; ++l)
                    for (int s = 0; s < 4; ++s) launch(*t[s], mats[s][l], x, y, stream, true); }, LAYERS); };
        double cur = layer_us(pb);
        for (int round = 0; round < 2; ++round)
            for (int s = 0; s < 4; ++s)
                for (const Config& c : CONFIGS) {
                    if (c.K != SHAPES[s].K || c.bits != bits || &c == pb[s]) continue;
                    const Config* t[4] = {pb[0], pb[1], pb[2], pb[3]};
                    t[s] = &c;
                    double us = layer_us(t);
                    if (us < cur) { cur = us; pb[s] = &c; }
                }
        printf("bits %2d PDL, tiles chosen in the layer: %.2f us a layer (again %.2f):", bits, cur, layer_us(pb));
        for (int s = 0; s < 4; ++s) printf(" %s %s", SHAPES[s].name, pb[s]->name);
        printf("\n");
        // Weights asked for ahead into shared memory, one block a multiprocessor; budgets (KB a block) for q,k,v, o,
        // gate/up, down such that two consecutive products' blocks fit together (228 KB a multiprocessor).
        const int nsm = p.multiProcessorCount;
        for (AheadKernel k : {ahead_kernel<8>(2048), ahead_kernel<8>(5632), ahead_kernel<16>(2048),
                              ahead_kernel<16>(5632)}) {      // all of a multiprocessor's L1 as shared memory
            CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
            CK(cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
        }
        for (int s = 0; s < 4; ++s) {
            double err = check([&] { launch_ahead(mats[s][0], x, y, 0, nsm, 110 << 10); }, mats[s][0], x, y, hx);
            printf("bits %2d ahead %-8s err %.1e%s\n", bits, SHAPES[s].name, err, err > 2e-2 ? "  WRONG" : "");
        }
        const int budgets[][4] = {{0, 0, 0, 0}, {64, 64, 100, 100}, {64, 64, 132, 90}, {96, 96, 110, 110},
                                  {40, 40, 120, 100}, {110, 110, 110, 110}};
        for (auto& b : budgets) {
            double us = graph_us([&](cudaStream_t stream) {
                for (int l = 0; l < LAYERS; ++l)
                    for (int s = 0; s < 4; ++s) launch_ahead(mats[s][l], x, y, stream, nsm, b[s] << 10); }, LAYERS);
            printf("bits %2d weights ahead in shared memory, budgets %d/%d/%d/%d KB: %.2f us a layer\n", bits, b[0], b[1],
                   b[2], b[3], us);
        }
        for (auto& v : mats) for (auto& m : v) { CK(cudaFree(m.w)); CK(cudaFree(m.s)); }
    }
    // The handover alone, with each shape's grid of the int8 table above (blocks x warps) and its K.
    const int grid[4] = {640, 256, 1408, 512}, warps[4] = {4, 8, 4, 4};
    for (bool pdl : {false, true}) {
        auto one = [&](int s, cudaStream_t stream) {
            launch_k(pdl ? handover<true> : handover<false>, dim3(grid[s]), dim3(warps[s] * 32), 0, stream, pdl,
                     (const uint4*)x, y, SHAPES[s].K);
        };
        double layer = graph_us([&](cudaStream_t stream) {
            for (int l = 0; l < LAYERS; ++l) for (int s = 0; s < 4; ++s) one(s, stream); }, LAYERS);
        printf("handover only (no weights)%s: %.2f us a layer of four;", pdl ? ", PDL" : "", layer);
        for (int s = 0; s < 4; ++s)
            printf(" %s %.2f", SHAPES[s].name, graph_us([&](cudaStream_t stream) {
                for (int l = 0; l < LAYERS; ++l) one(s, stream); }, LAYERS));
        printf("\n");
    }
    return 0;
}
