"""Chapter 05b's int8 product through TMA (`qmm_tma`) at a full decode batch, against variants of its loop: Triton's
warp specialization (`tl.range(..., warp_specialize=True)`: a group of warps that only issues the TMA loads, others
that convert and multiply), and the int8 weights on the left of the product (out.T = W @ x.T, the converted tile then
a register operand of `wgmma` instead of going back to shared memory). Each call on its own copy of the weights inside
one CUDA graph (from HBM, as in a step); every variant's output checked against the dequantized product first. bf16
cuBLAS on the same shapes for scale. Prints one JSON row per shape and row count; writes them all to --out.
  python3 benchmarks/experiments/qmm_tma_ws.py --out $OUT/qmm_tma_ws.json [--ms 208,256] [--budget-s 200]
"""
import argparse, itertools, json, os, sys, time
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent), str(HERE)]   # repo root, benchmarks/, here
import torch, triton, triton.language as tl
from gpu_bench import graph_us  # noqa: E402  (calls recorded into one CUDA graph, us per call)
from full_batch_gemm_sweep import SHAPES  # noqa: E402

from mini_vllm.quant.quant_kernels import qmm, qmm_tma, rebuild  # noqa: E402


@triton.jit
def _bf16x2_int8(w):
    """Int8 weights (as loaded) as bf16 without an int-to-float conversion: a byte b's low seven bits under the
    exponent of 128 give v = 128 + (b & 127), its top bit under the same exponent gives c = 128 or 256, and
    v - c = q exactly; two weights per 32-bit register, one `prmt`, two `and`, one bf16x2 multiply-add per pair."""
    return tl.inline_asm_elementwise(
        asm="""{
        .reg .b32 m, n1, t0, t1, v, c;
        mov.b32 m, 0x43434343;
        mov.b32 n1, 0xBF80BF80;
        prmt.b32 t0, $2, m, 0x4140;
        prmt.b32 t1, $2, m, 0x4342;
        and.b32 v, t0, 0xFF7FFF7F;
        and.b32 c, t0, 0xFF80FF80;
        fma.rn.bf16x2 $0, c, n1, v;
        and.b32 v, t1, 0xFF7FFF7F;
        and.b32 c, t1, 0xFF80FF80;
        fma.rn.bf16x2 $1, c, n1, v;
        }""", constraints="=r,=r,r", args=[w], dtype=tl.bfloat16, is_pure=True, pack=4)


@triton.jit
def _qmm_tma_v(x_desc, w_desc, s_ptr, out_ptr, part_ptr, count_ptr, M, N, K, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAGES: tl.constexpr, WS: tl.constexpr,
               W_LEFT: tl.constexpr, CVT: tl.constexpr, SPLIT: tl.constexpr):
    pm, pn, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    k_len = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT) * BLOCK_K                   # this program's share of K
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    if W_LEFT: acc = tl.zeros([BLOCK_N, BLOCK_M], tl.float32)
    for k in tl.range(split * k_len, min(K, split * k_len + k_len), BLOCK_K, num_stages=STAGES, warp_specialize=WS):
        xk = x_desc.load([pm * BLOCK_M, k])
        if CVT: w = _bf16x2_int8(w_desc.load([pn * BLOCK_N, k]))
        else: w = w_desc.load([pn * BLOCK_N, k]).to(xk.dtype)
        if W_LEFT: acc = tl.dot(w, tl.trans(xk), acc)
        else: acc = tl.dot(xk, tl.trans(w), acc)
    if W_LEFT: acc = tl.trans(acc)
    last = True
    if SPLIT > 1:                                  # each share writes its sum; the last to arrive adds them in order
        pid = pm * tl.num_programs(1) + pn
        tile = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        sums = part_ptr + pid.to(tl.int64) * (SPLIT * BLOCK_N * BLOCK_M)
        tl.store(sums + split * BLOCK_N * BLOCK_M + tile, acc)
        tl.debug_barrier()
        last = tl.atomic_add(count_ptr + pid, 1, sem="acq_rel") == SPLIT - 1
        if last:
            tl.store(count_ptr + pid, 0)
            acc = tl.load(sums + tile)
            for j in range(1, SPLIT): acc += tl.load(sums + j * BLOCK_N * BLOCK_M + tile)
    if last:
        m, n = pm * BLOCK_M + tl.arange(0, BLOCK_M), pn * BLOCK_N + tl.arange(0, BLOCK_N)
        y = (acc * tl.load(s_ptr + n, mask=n < N, other=0.0).to(tl.float32)[None, :]).to(out_ptr.dtype.element_ty)
        tl.store(out_ptr + m.to(tl.int64)[:, None] * N + n[None, :], y, mask=(m < M)[:, None] & (n < N)[None, :])


def call(x, w, s, y, bm, bn, bk, warps, stages, ws, left, cvt=0, split=1):
    from triton.tools.tensor_descriptor import TensorDescriptor
    M, K = x.shape
    N = w.shape[0]
    xd, wd = TensorDescriptor.from_tensor(x, [bm, bk]), TensorDescriptor.from_tensor(w, [bn, bk])
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn), split)
    part = torch.empty(grid[0] * grid[1] * split * bm * bn if split > 1 else 1, dtype=torch.float32, device=x.device)
    counts = torch.zeros(grid[0] * grid[1], dtype=torch.int32, device=x.device)
    return lambda: _qmm_tma_v[grid](xd, wd, s, y, part, counts, M, N, K, bm, bn, bk, stages, ws, left, cvt, split,
                                    num_warps=warps)


def variants(ws_options, bns, bms, lefts=(False, True), cvts=(0,), splits=(1,)):
    for ws, left, cvt, split, bm, bn, bk, stages in itertools.product(ws_options, lefts, cvts, splits, bms, bns,
                                                                      (64, 128), (3, 4)):
        yield dict(ws=ws, left=left, cvt=cvt, split=split, bm=bm, bn=bn, bk=bk, warps=4, stages=stages)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--ms", default="208,256")
    p.add_argument("--shapes", default="qkv,o,gate_up,down")
    p.add_argument("--budget-s", type=float, default=200, help="for the sweep, shared by shapes and row counts")
    p.add_argument("--ws", default="0", help="warp specialization off (0) and/or on (1; its compile hung, triton 3.6)")
    p.add_argument("--bn", default="64,128", help="weight tiles of so many rows")
    p.add_argument("--bm", default="128", help="input tiles of so many rows")
    p.add_argument("--left", default="0,1", help="weights on the right (0) and/or on the left (1)")
    p.add_argument("--cvt", default="0", help="int8 to bf16 by a cast (0) and/or by bf16x2 bit operations (1)")
    p.add_argument("--split", default="1", help="K in so many shares (1, 2, 4)")
    a = p.parse_args()
    torch.manual_seed(0)
    res = dict(commit=os.environ.get("MINI_VLLM_COMMIT"), device=torch.cuda.get_device_name(0),
               triton=triton.__version__, torch=torch.__version__, rows=[])
    rows = len(a.shapes.split(",")) * len(a.ms.split(","))
    for name in a.shapes.split(","):
        N, K = SHAPES[name]
        copies = max(8, min(64, (400 << 20) // (N * K)))                    # 400 MB of int8 weights: beyond L2
        s = torch.rand(N, device="cuda", dtype=torch.bfloat16) / 100 + 1e-3
        ws = [torch.randint(-127, 128, (N, K), dtype=torch.int8, device="cuda") for _ in range(copies)]
        wb = [torch.randn(N, K, dtype=torch.bfloat16, device="cuda") for _ in range(copies // 2)]
        for M in map(int, a.ms.split(",")):
            x = torch.randn(M, K, dtype=torch.bfloat16, device="cuda")
            y = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
            ref = (x.float() @ ws[0].float().t() * s.float()).to(x.dtype).float()
            row = dict(shape=name, M=M,
                       cublas_bf16_us=round(graph_us([lambda w=w: torch.mm(x, w.t(), out=y) for w in wb]), 2),
                       qmm_us=round(graph_us([lambda w=w: qmm(x, w, s) for w in ws]), 2),
                       qmm_tma_us=round(graph_us([lambda w=w: qmm_tma(x, w, s) for w in ws]), 2),
                       rebuilt_cublas_us=round(graph_us([lambda w=w: torch.mm(x, rebuild(w, s).t(), out=y)
                                                         for w in ws]), 2))
            sweep, t_end = [], time.time() + a.budget_s / rows
            ints = lambda o: [int(b) for b in o.split(",")]
            for v in variants([bool(b) for b in ints(a.ws)], ints(a.bn), ints(a.bm), [bool(b) for b in ints(a.left)],
                              ints(a.cvt), ints(a.split)):
                if time.time() > t_end: break
                try:
                    print("  trying", name, M, v, flush=True)
                    y.zero_(); call(x, ws[0], s, y, **v)(); torch.cuda.synchronize()
                    err = ((y.float() - ref).abs().max() / ref.abs().max()).item()
                    if err > 2e-2: print("  wrong", name, M, v, err, flush=True); continue
                    sweep.append(dict(v, us=round(graph_us([call(x, w, s, y, **v) for w in ws]), 2)))
                except Exception as e:
                    print("  failed", name, M, v, repr(e)[:160], flush=True)
            keys = ("ws", "left", "cvt", "split")
            for key in sorted({tuple(r[k] for k in keys) for r in sweep}):
                best = min((r for r in sweep if tuple(r[k] for k in keys) == key), key=lambda r: r["us"])
                row["best " + ",".join(f"{k}={int(v)}" for k, v in zip(keys, key))] = best
            row["tried"] = len(sweep)
            res["rows"].append(row)
            print(json.dumps(row), flush=True)
            with open(a.out, "w") as f: json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
