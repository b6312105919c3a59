"""Products of a few rows (M = 8, 16, 32 by default) against TinyLlama's weights: cuBLAS (F.linear) against a Triton kernel that
multiplies (BLOCK_M x BLOCK_K) inputs by (BLOCK_N x BLOCK_K) weight tiles with tl.dot, optionally split along K
(fp32 atomics into a zeroed buffer, then a cast). Each timed inside a CUDA graph (triton.testing.do_bench_cudagraph).
  python3 benchmarks/skinny_gemm_sweep.py --out $OUT/skinny.json
"""
import argparse, itertools, json, os, sys, time
import torch, triton, triton.language as tl
from triton.testing import do_bench_cudagraph

SHAPES = {"qkv": (2560, 2048), "o": (2048, 2048), "gate_up": (11264, 2048), "down": (2048, 5632), "lm_head": (32000, 2048)}


@triton.jit
def _skinny(x_ptr, w_ptr, y_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
            SPLIT: tl.constexpr, STAGES: tl.constexpr):
    pn, pm, ps = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rm, rn, rk = pm * BLOCK_M + tl.arange(0, BLOCK_M), pn * BLOCK_N + tl.arange(0, BLOCK_N), tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    per = tl.cdiv(K, SPLIT * BLOCK_K) * BLOCK_K
    for k in tl.range(ps * per, tl.minimum(ps * per + per, K), BLOCK_K, num_stages=STAGES):
        kk = k + rk
        x = tl.load(x_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[:, None] * K + kk[None, :], mask=(rn[:, None] < N) & (kk[None, :] < K), other=0.0)
        acc += tl.dot(x, tl.trans(w))
    ptrs, m = y_ptr + rm[:, None] * N + rn[None, :], (rm[:, None] < M) & (rn[None, :] < N)
    if SPLIT == 1: tl.store(ptrs, acc.to(y_ptr.dtype.element_ty), mask=m)
    else: tl.atomic_add(ptrs, acc, mask=m, sem="relaxed")


def skinny(x, w, bm, bn, bk, split, warps, stages):
    M, K = x.shape
    N = w.shape[0]
    grid = (triton.cdiv(N, bn), triton.cdiv(M, bm), split)
    if split == 1:
        y = torch.empty(M, N, dtype=x.dtype, device=x.device)
        _skinny[grid](x, w, y, M, N, K, bm, bn, bk, 1, stages, num_warps=warps)
        return y
    acc = torch.zeros(M, N, dtype=torch.float32, device=x.device)
    _skinny[grid](x, w, acc, M, N, K, bm, bn, bk, split, stages, num_warps=warps)
    return acc.to(x.dtype)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--ms", default="8,16,32")
    a = p.parse_args()
    torch.manual_seed(0)
    res = dict(commit=os.environ.get("MINI_VLLM_COMMIT"), device=torch.cuda.get_device_name(0), rows=[])
    t_end = time.time() + float(os.environ.get("SWEEP_SECONDS", "420"))
    for name, (N, K) in SHAPES.items():
        w = torch.randn(N, K, dtype=torch.bfloat16, device="cuda") / 30
        for M in map(int, a.ms.split(",")):
            x = torch.randn(M, K, dtype=torch.bfloat16, device="cuda")
            ref = torch.nn.functional.linear(x, w)
            cub = do_bench_cudagraph(lambda: torch.nn.functional.linear(x, w), rep=30)
            best = None
            for bm, bn, bk, split, warps, stages in itertools.product([max(16, M)], [32, 64, 128], [64, 128, 256],
                                                                     [1, 2, 4], [4], [3, 4]):
                if time.time() > t_end: break
                try:
                    y = skinny(x, w, bm, bn, bk, split, warps, stages)
                    if not torch.allclose(y.float(), ref.float(), atol=3e-2, rtol=3e-2): continue
                    t = do_bench_cudagraph(lambda: skinny(x, w, bm, bn, bk, split, warps, stages), rep=20)
                except Exception as e:
                    continue
                if best is None or t < best[0]: best = (t, dict(bm=bm, bn=bn, bk=bk, split=split, warps=warps, stages=stages))
            gb = N * K * 2 / 1e9
            row = dict(shape=name, M=M, cublas_us=round(cub * 1e3, 2), cublas_tb_s=round(gb / cub, 2),
                       triton_us=round(best[0] * 1e3, 2) if best else None,
                       triton_tb_s=round(gb / best[0], 2) if best else None, config=best[1] if best else None)
            res["rows"].append(row)
            print(json.dumps(row), flush=True)
            with open(a.out, "w") as f: json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
