"""Products of a full decode batch (M = 128-256 rows) against TinyLlama's weights: cuBLAS (torch.mm) against a
Triton `tl.dot` kernel over (BLOCK_M, BLOCK_N, BLOCK_K) tiles, its weights read through plain pointers or through
TMA descriptors. Each call reads its own copy of the weights inside one CUDA graph (so that they come from HBM, as
in a step, not from the 50 MB L2), and each tiling's output is checked against cuBLAS's. Prints one JSON row per
shape and row count; writes them all to --out. `--int8`: int8 weights with a scale per row instead, chapter 05's
`qmm` (in the cuBLAS column) against a TMA kernel that turns the integers into bf16 in registers, the weights on the
right of `tl.dot` or on its left (`int8_left`: out.T = W @ x.T).
  python3 benchmarks/experiments/full_batch_gemm_sweep.py --out $OUT/full_batch_gemm.json [--ms 128,208,256] [--budget-s 400] [--int8]
"""
import argparse, itertools, json, os, sys, time
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent), str(HERE)]   # repo root, benchmarks/, here
import torch, triton, triton.language as tl
from gpu_bench import graph_us  # noqa: E402  (calls recorded into one CUDA graph, us per call)

SHAPES = {"qkv": (2560, 2048), "o": (2048, 2048), "gate_up": (11264, 2048), "down": (2048, 5632), "lm_head": (32000, 2048)}


@triton.jit
def _mm(x_ptr, w_ptr, y_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        STAGES: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)          # the row tiles of one weight tile run side by side
    rm, rn, rk = pm * BLOCK_M + tl.arange(0, BLOCK_M), pn * BLOCK_N + tl.arange(0, BLOCK_N), tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k in tl.range(0, K, BLOCK_K, num_stages=STAGES):
        x = tl.load(x_ptr + rm[:, None] * K + (k + rk)[None, :], mask=rm[:, None] < M, other=0.0)
        w = tl.load(w_ptr + rn[:, None] * K + (k + rk)[None, :])
        acc += tl.dot(x, tl.trans(w))
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc.to(y_ptr.dtype.element_ty), mask=rm[:, None] < M)


@triton.jit
def _mm_tma(x_desc, w_desc, y_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
            STAGES: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k in tl.range(0, K, BLOCK_K, num_stages=STAGES):
        acc += tl.dot(x_desc.load([pm * BLOCK_M, k]), tl.trans(w_desc.load([pn * BLOCK_N, k])))
    y_desc.store([pm * BLOCK_M, pn * BLOCK_N], acc.to(y_desc.dtype))


@triton.jit
def _mm_int8(x_desc, w_desc, s_ptr, y_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_K: tl.constexpr, STAGES: tl.constexpr, W_LEFT: tl.constexpr):
    "int8 weights (N, K) with a scale per row, through TMA; the integers become bf16 in registers, scaled at the end."
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm, rn = pm * BLOCK_M + tl.arange(0, BLOCK_M), pn * BLOCK_N + tl.arange(0, BLOCK_N)
    if W_LEFT:                                            # out.T = W @ x.T: the weights are wgmma's register operand
        acc = tl.zeros((BLOCK_N, BLOCK_M), tl.float32)
        for k in tl.range(0, K, BLOCK_K, num_stages=STAGES):
            w = w_desc.load([pn * BLOCK_N, k]).to(tl.bfloat16)
            acc = tl.dot(w, tl.trans(x_desc.load([pm * BLOCK_M, k])), acc)
        acc = tl.trans(acc)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
        for k in tl.range(0, K, BLOCK_K, num_stages=STAGES):
            w = w_desc.load([pn * BLOCK_N, k]).to(tl.bfloat16)
            acc = tl.dot(x_desc.load([pm * BLOCK_M, k]), tl.trans(w), acc)
    acc = acc * tl.load(s_ptr + rn).to(tl.float32)[None, :]
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc.to(y_ptr.dtype.element_ty), mask=rm[:, None] < M)


def mm(x, w, y, kind, bm, bn, bk, warps, stages, scales=None):
    M, K = x.shape
    N = w.shape[0]
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    if kind == "ptr":
        return lambda: _mm[grid](x, w, y, M, N, K, bm, bn, bk, stages, num_warps=warps)
    from triton.tools.tensor_descriptor import TensorDescriptor
    if kind.startswith("int8"):
        xd, wd = TensorDescriptor.from_tensor(x, [bm, bk]), TensorDescriptor.from_tensor(w, [bn, bk])
        return lambda: _mm_int8[grid](xd, wd, scales, y, M, N, K, bm, bn, bk, stages, kind == "int8_left",
                                      num_warps=warps)
    xd, wd, yd = (TensorDescriptor.from_tensor(x, [bm, bk]), TensorDescriptor.from_tensor(w, [bn, bk]),
                  TensorDescriptor.from_tensor(y, [bm, bn]))
    return lambda: _mm_tma[grid](xd, wd, yd, K, bm, bn, bk, stages, num_warps=warps)


def tilings(M, kinds=("ptr", "tma")):
    for kind, bm, bn, bk, warps, stages in itertools.product(kinds, (64, 128, 256), (64, 128, 256), (64, 128),
                                                            (4, 8), (3, 4)):
        if bm > max(64, triton.next_power_of_2(M)) or bm * bn > 128 * 256: continue
        if stages * (bm + bn) * bk * 2 > 200 * 1024: continue               # shared memory of the stages
        if bm * bn >= 128 * 256 and warps == 4: continue                    # the accumulator alone: 256 registers
        yield dict(kind=kind, bm=bm, bn=bn, bk=bk, warps=warps, stages=stages)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--ms", default="128,208,256")
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--budget-s", type=float, default=400)
    p.add_argument("--int8", action="store_true", help="int8 weights instead: chapter 05's qmm against TMA kernels")
    a = p.parse_args()
    torch.manual_seed(0)
    res = dict(commit=os.environ.get("MINI_VLLM_COMMIT"), device=torch.cuda.get_device_name(0),
               triton=triton.__version__, torch=torch.__version__, rows=[])
    t_end = time.time() + a.budget_s
    for name in a.shapes.split(","):
        N, K = SHAPES[name]
        copies = max(4, min(32, (400 << 20) // (N * K * 2)))                 # 400 MB of weights: beyond L2
        if a.int8:                                                          # half the bytes: twice the copies
            from mini_vllm.quant.quant_kernels import qmm
            scales = torch.rand(N, device="cuda", dtype=torch.bfloat16) / 100 + 1e-3
            ws = [torch.randint(-127, 128, (N, K), dtype=torch.int8, device="cuda") for _ in range(copies * 2)]
        else:
            ws = [torch.randn(N, K, dtype=torch.bfloat16, device="cuda") / 30 for _ in range(copies)]
        for M in map(int, a.ms.split(",")):
            x = torch.randn(M, K, dtype=torch.bfloat16, device="cuda")
            y = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
            if a.int8:
                ref = (x.float() @ ws[0].float().t() * scales.float()).to(x.dtype)
                cub = graph_us([lambda w=w: qmm(x, w, scales) for w in ws])            # qmm in the cuBLAS column
            else:
                ref = x @ ws[0].t()
                cub = graph_us([lambda w=w: torch.mm(x, w.t(), out=y) for w in ws])
            sweep = []
            for c in tilings(M, ("int8", "int8_left") if a.int8 else ("ptr", "tma")):
                if time.time() > t_end: break
                try:
                    cfg = {k: v for k, v in c.items() if k != "kind"}
                    if a.int8: cfg["scales"] = scales
                    y.zero_(); mm(x, ws[0], y, c["kind"], **cfg)(); torch.cuda.synchronize()
                    err = ((y.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
                    if err > 2e-2: print("  wrong", name, M, c, err, flush=True); continue
                    sweep.append(dict(c, us=round(graph_us([mm(x, w, y, c["kind"], **cfg) for w in ws]), 2)))
                except Exception as e:
                    print("  failed", name, M, c, repr(e)[:160], flush=True)
            sweep.sort(key=lambda s: s["us"])
            flop = 2 * M * N * K
            row = dict(shape=name, M=M, cublas_us=round(cub, 2), cublas_tflops=round(flop / cub / 1e6, 1),
                       best=sweep[0] if sweep else None,
                       best_tflops=round(flop / sweep[0]["us"] / 1e6, 1) if sweep else None, top=sweep[:8],
                       tried=len(sweep))
            res["rows"].append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "top"}), flush=True)
            with open(a.out, "w") as f: json.dump(res, f, indent=1)
        del ws
    sums = {}
    for r in res["rows"]:
        if r["best"] and r["shape"] != "lm_head":
            s = sums.setdefault(r["M"], dict(cublas_us=0.0, best_us=0.0))
            s["cublas_us"] += r["cublas_us"]; s["best_us"] += r["best"]["us"]
    res["layer_sums"] = sums
    print("a layer's four products, cuBLAS vs best tiling each:", json.dumps(sums), flush=True)
    with open(a.out, "w") as f: json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
