"""Int8 weights times bf16 inputs on int8 tensor cores: each input row scaled to 16-bit integers and split into a high
and a low byte (x ~ s (256 hi + lo)), two int8 products summed in int32, then 256 acc_hi + acc_lo scaled in fp32 once.
The weights stay int8 and are never converted; the inputs carry ~16 bits a row (bf16 has 8 bits of mantissa per
element). TinyLlama's four shapes at a full decode batch, each call on its own copy of the weights in one CUDA graph,
against chapter 05b's int8 layer (TritonQuantLinear, its byte split switched off) and cuBLAS on the bf16 weights;
also `torch._int_mm` (cuBLASLt) twice, for the product alone, and one int8 product of 8-bit inputs (W8A8, not
weight-only) as a floor.
  python3 benchmarks/experiments/int8_split_mm.py --out $OUT/split.json [--ms 128,256] [--short] [--tma] [--tma-only]
The kernels here are where the idea was first timed (with a W8A8 switch the package has no use for); chapter 05b's
`byte_split` and `byte_split_mm` are the package's, with BYTE_SPLIT_TILING (by kind of layer) from the --tma-only sweep.
"""
import argparse, itertools, json, os, sys, time
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent), str(HERE)]   # repo root, benchmarks/, here
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

SHAPES = {"qkv": (2560, 2048), "o": (2048, 2048), "gate_up": (11264, 2048), "down": (2048, 5632)}
HI = tl.constexpr(127 * 256 + 127)                    # the largest 16-bit value whose two bytes are both int8


@triton.jit
def _split_rows(x_ptr, hi_ptr, lo_ptr, s_ptr, K, BLOCK: tl.constexpr):
    "One program a row: s = max|x| / HI, q = round(x / s), q = 256 hi + lo with hi, lo in [-127, 127]."
    m = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + m * K + offs, mask=offs < K, other=0.0).to(tl.float32)
    s = tl.maximum(tl.max(tl.abs(x), 0), 1e-30) / HI
    v = x / s
    q = tl.where(v >= 0, v + 0.5, v - 0.5).to(tl.int32)                 # to the nearest, halves away from 0
    lo = ((q + 128) & 255) - 128
    hi = (q - lo) >> 8
    tl.store(hi_ptr + m * K + offs, hi.to(tl.int8), mask=offs < K)
    tl.store(lo_ptr + m * K + offs, lo.to(tl.int8), mask=offs < K)
    tl.store(s_ptr + m, s)


def split_rows(x):
    M, K = x.shape
    hi = torch.empty(M, K, device=x.device, dtype=torch.int8); lo = torch.empty_like(hi)
    s = torch.empty(M, device=x.device, dtype=torch.float32)
    _split_rows[(M,)](x, hi, lo, s, K, BLOCK=triton.next_power_of_2(K), num_warps=4)
    return hi, lo, s


@triton.jit
def _split_mm(hi_ptr, lo_ptr, sx_ptr, w_ptr, sw_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
              BK: tl.constexpr, TWO: tl.constexpr):
    pid_m, pid_n = tl.program_id(1), tl.program_id(0)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc_hi = tl.zeros([BM, BN], tl.int32)
    acc_lo = tl.zeros([BM, BN], tl.int32)
    for k0 in range(0, K, BK):
        w = tl.load(w_ptr + rn[:, None] * K + (k0 + rk)[None, :], mask=rn[:, None] < N)
        a = tl.load(hi_ptr + rm[:, None] * K + (k0 + rk)[None, :], mask=rm[:, None] < M)
        acc_hi = tl.dot(a, tl.trans(w), acc_hi, out_dtype=tl.int32)
        if TWO:
            b = tl.load(lo_ptr + rm[:, None] * K + (k0 + rk)[None, :], mask=rm[:, None] < M)
            acc_lo = tl.dot(b, tl.trans(w), acc_lo, out_dtype=tl.int32)
    acc = acc_hi.to(tl.float32)
    if TWO: acc = acc * 256.0 + acc_lo.to(tl.float32)
    acc = acc * tl.load(sx_ptr + rm, mask=rm < M, other=0.0)[:, None] * tl.load(sw_ptr + rn, mask=rn < N,
                                                                                  other=0.0).to(tl.float32)[None, :]
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def split_mm(hi, lo, sx, w, sw, cfg, two=True):
    M, K = hi.shape; N = w.shape[0]
    y = torch.empty(M, N, device=hi.device, dtype=torch.bfloat16)
    BM, BN, BK, nw, ns = cfg
    grid = (triton.cdiv(N, BN), triton.cdiv(M, BM))
    _split_mm[grid](hi, lo, sx, w, sw, y, M, N, K, BM=BM, BN=BN, BK=BK, TWO=two, num_warps=nw, num_stages=ns)
    return y


@triton.jit
def _split_mm_tma(h_desc, l_desc, sx_ptr, w_desc, sw_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr, STAGES: tl.constexpr):
    "_split_mm with every tile brought by TMA (zeros past the edges), as chapter 05b's qmm_tma reads its tiles."
    pid_m, pid_n = tl.program_id(1), tl.program_id(0)
    acc_hi = tl.zeros([BM, BN], tl.int32)
    acc_lo = tl.zeros([BM, BN], tl.int32)
    for k in tl.range(0, K, BK, num_stages=STAGES):
        w = w_desc.load([pid_n * BN, k])
        acc_hi = tl.dot(h_desc.load([pid_m * BM, k]), tl.trans(w), acc_hi, out_dtype=tl.int32)
        acc_lo = tl.dot(l_desc.load([pid_m * BM, k]), tl.trans(w), acc_lo, out_dtype=tl.int32)
    rm, rn = pid_m * BM + tl.arange(0, BM), pid_n * BN + tl.arange(0, BN)
    acc = acc_hi.to(tl.float32) * 256.0 + acc_lo.to(tl.float32)
    sw = tl.load(sw_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
    acc = acc * tl.load(sx_ptr + rm, mask=rm < M, other=0.0)[:, None] * sw[None, :]
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def split_mm_tma(hi, lo, sx, w, sw, cfg):
    from triton.tools.tensor_descriptor import TensorDescriptor
    M, K = hi.shape; N = w.shape[0]
    y = torch.empty(M, N, device=hi.device, dtype=torch.bfloat16)
    BM, BN, BK, nw, ns = cfg
    hd, ld = TensorDescriptor.from_tensor(hi, [BM, BK]), TensorDescriptor.from_tensor(lo, [BM, BK])
    wd = TensorDescriptor.from_tensor(w, [BN, BK])
    _split_mm_tma[(triton.cdiv(N, BN), triton.cdiv(M, BM))](hd, ld, sx, wd, sw, y, M, N, K, BM=BM, BN=BN, BK=BK,
                                                            STAGES=ns, num_warps=nw)
    return y


TMA_CONFIGS = [c for c in itertools.product((64, 128), (64, 128, 256), (64, 128, 256), (4, 8), (3, 4, 5))
               if 2 * c[0] * c[1] <= 128 * 32 * c[3] and c[4] * (2 * c[0] + c[1]) * c[2] <= 220 << 10]
# (BM, BN, BK, warps, stages) for --tma, under the same limits as CONFIGS
TMA_CONFIGS_64 = [c for c in TMA_CONFIGS if c[0] == 64 and c[3] == 4]   # --tma-only: the sizes that won at 128-256 rows


CONFIGS = [c for c in itertools.product((64, 128, 256), (32, 64, 128), (64, 128, 256), (4, 8), (2, 3, 4))
           if 2 * c[0] * c[1] <= 128 * 32 * c[3] and c[4] * (2 * c[0] + c[1]) * c[2] <= 220 << 10]
# (BM, BN, BK, warps, stages): two int32 accumulators at most 128 registers a thread, the stages in shared memory
SHORT = [(64, 64, 128, 4, 3), (64, 64, 128, 4, 4), (64, 64, 256, 4, 4), (64, 128, 64, 4, 3), (64, 32, 128, 4, 4),
         (32, 64, 128, 4, 3), (32, 64, 256, 4, 4), (32, 128, 128, 4, 3), (128, 64, 128, 4, 3)]
# the tilings that won at 256 rows, and 32-row ones for fewer rows (--short)


def sweep(fn, configs, split, qls, err, tag):
    """{tiling: (µs, error)} of fn(hi, lo, sx, w, scales, tiling), each call on its own copy of the weights in one CUDA
    graph, over the tilings that compile (the others printed: too much shared memory)."""
    from gpu_bench import graph_us  # noqa: E402
    out = {}
    for cfg in configs:
        try:
            e = err(fn(*split, qls[0].qweight, qls[0].scales, cfg))
            out[cfg] = (graph_us([lambda l=l: fn(*split, l.qweight, l.scales, cfg) for l in qls]), e)
        except Exception as ex:  # noqa: BLE001
            print(tag, cfg, type(ex).__name__, str(ex)[:100], flush=True)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--ms", default="256,128")
    p.add_argument("--configs", type=int, default=len(CONFIGS), help="try the first this many tilings")
    p.add_argument("--short", action="store_true", help="only the tilings in SHORT")
    p.add_argument("--tma", action="store_true", help="also the tiles brought by TMA (TMA_CONFIGS), and the package's "
                   "byte_split_mm (its split included)")
    p.add_argument("--tma-only", action="store_true", help="only the layer, cuBLAS, the split and the TMA tilings of "
                   "64 rows (TMA_CONFIGS_64), every tiling's time kept in the output")
    p.add_argument("--budget-s", type=float, default=400)
    args = p.parse_args()
    from gpu_bench import graph_us  # noqa: E402
    from mini_vllm.quant import quant_kernels as qk  # noqa: E402
    t0, dev = time.perf_counter(), "cuda"
    qk.BYTE_SPLIT_ROWS = {k: (0, 0) for k in qk.BYTE_SPLIT_ROWS}   # "kernel": the layer's kernels without the split
    torch.manual_seed(0)
    res = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
               commit=os.environ.get("MINI_VLLM_COMMIT"), rows={})
    layers = {}
    for name, (N, K) in SHAPES.items():
        copies = max(2, min(32, (400 << 20) // (N * K * 2)))
        qls = [qk.TritonQuantLinear(torch.nn.Linear(K, N, bias=False, device=dev, dtype=torch.bfloat16), 8)
               for _ in range(copies)]
        layers[name] = (qls, [q.dequantize(torch.bfloat16) for q in qls])
    for M in (int(m) for m in args.ms.split(",")):
        row = res["rows"][M] = {}
        for name, (N, K) in SHAPES.items():
            if time.perf_counter() - t0 > args.budget_s: break
            x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
            qls, ws = layers[name]
            ref = F.linear(x, ws[0]).float()
            err = lambda y: ((y.float() - ref).abs().max() / ref.abs().max()).item()
            hi, lo, sx = split_rows(x)
            tiled = lambda fn, configs: sweep(fn, configs, (hi, lo, sx), qls, err, f"{name} {M}")
            best = lambda found: min(((us, cfg, e) for cfg, (us, e) in found.items()), default=None)
            if args.tma_only:
                r = row[name] = dict(kernel=graph_us([lambda l=l: l(x) for l in qls]),
                                     cublas=graph_us([lambda w=w: F.linear(x, w) for w in ws]),
                                     split_rows=graph_us([lambda: split_rows(x)] * 8))
                found = tiled(split_mm_tma, TMA_CONFIGS_64)
                assert all(e < 2e-2 for _, e in found.values()), (name, M, found)
                r["tma_all"] = {",".join(map(str, cfg)): round(us, 3) for cfg, (us, _) in found.items()}
                if not found: continue                       # no tiling compiled (printed above)
                r["split_tma"], cfg, _ = best(found)
                r["tma_cfg"] = ",".join(map(str, cfg))
                print(M, name, json.dumps({k: v for k, v in r.items() if k != "tma_all"}), flush=True)
                continue
            r = row[name] = dict(kernel=graph_us([lambda l=l: l(x) for l in qls]),
                                 cublas=graph_us([lambda w=w: F.linear(x, w) for w in ws]),
                                 split_rows=graph_us([lambda: split_rows(x)] * 8),
                                 int_mm2=graph_us([lambda l=l: (torch._int_mm(hi, l.qweight.t()),
                                                                torch._int_mm(lo, l.qweight.t())) for l in qls]))
            r["err_kernel"] = err(qls[0](x))
            r["split_mm"], r["split_cfg"], r["err_split"] = b = best(tiled(split_mm, SHORT if args.short
                                                                           else CONFIGS[:args.configs]))
            r["w8a8"] = graph_us([lambda l=l: split_mm(hi, lo, sx, l.qweight, l.scales, b[1], two=False)
                                  for l in qls])
            if args.tma:
                r["package"] = graph_us([lambda l=l: qk.byte_split_mm(x, l.qweight, l.scales) for l in qls])
                r["split_tma"], r["tma_cfg"], r["err_tma"] = best(tiled(split_mm_tma, TMA_CONFIGS))
            print(M, name, json.dumps({k: (round(v, 5) if isinstance(v, float) else v) for k, v in r.items()}),
                  flush=True)
            torch.cuda.empty_cache()
        if len(row) == len(SHAPES) and not args.tma_only:
            t = {w: sum(row[s][w] for s in SHAPES) for w in ("kernel", "cublas", "split_rows", "split_mm", "int_mm2",
                                                            "w8a8", "package", "split_tma") if w in row["qkv"]}
            print(f"{M} rows, a layer's four products, us: " + ", ".join(f"{k} {v:.1f}" for k, v in t.items()) +
                  f"; split_rows + split_mm {t['split_mm'] + t['split_rows']:.1f}", flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
