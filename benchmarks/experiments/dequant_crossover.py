"""Where rebuilding the weight pays: chapter 05b's quantized products at 128-16,384 rows, TinyLlama's four shapes,
int8 and int4 (groups of 128), each way a layer can run them:
  kernel      TritonQuantLinear as it runs below DEQUANT_MIN_M (qmm, or qmm_tma for int8 at 129-512 rows on Hopper)
  rebuild_mm  the weight rebuilt in one pass (quant_kernels.rebuild), then cuBLAS (F.linear), as from DEQUANT_MIN_M
  rebuild     the rebuild alone
  cublas      F.linear on the bf16 weight the integers stand for (the unquantized model's cost)
Each call reads its own copy of the weights inside one CUDA graph (so that they come from HBM, as in a step, not
from L2; the copies are counted in bf16 bytes, so int4's q, k, v and o copies hold 67-84 MB of integers, only just
beyond an H200's L2); each way's output is checked against cuBLAS's. Prints a table of a layer's four products (us)
per row count and, for each format, the smallest row count measured from which rebuild_mm stays faster; writes
everything to --out.
  python3 benchmarks/experiments/dequant_crossover.py --out $OUT/dequant_crossover.json [--ms 128,256,...] [--budget-s 240]
"""
import argparse, json, os, sys, time
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent), str(HERE)]   # repo root, benchmarks/, here
import torch
import torch.nn.functional as F
from gpu_bench import graph_us  # noqa: E402  (calls recorded into one CUDA graph, us per call)
from mini_vllm.quant import quant_kernels as qk  # noqa: E402

SHAPES = {"qkv": (2560, 2048), "o": (2048, 2048), "gate_up": (11264, 2048), "down": (2048, 5632)}
WAYS = ("kernel", "rebuild_mm", "rebuild", "cublas")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--ms", default="128,256,512,1024,2048,4096,8192,16384")
    p.add_argument("--budget-s", type=float, default=240, help="stop starting new row counts after this long")
    args = p.parse_args()
    t0, dev = time.perf_counter(), "cuda"
    qk.DEQUANT_MIN_M = qk.DEQUANT_MIN_M_WIDE = {8: 1 << 40, 4: 1 << 40}   # "kernel": never rebuild in the layer
    torch.manual_seed(0)
    import triton
    res = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
               commit=os.environ.get("MINI_VLLM_COMMIT"), ways=WAYS, rows={})
    layers = {}
    for name, (N, K) in SHAPES.items():
        copies = max(2, min(32, (400 << 20) // (N * K * 2)))      # 400 MB of bf16 weights: far beyond L2
        for bits in (8, 4):
            qls = [qk.TritonQuantLinear(torch.nn.Linear(K, N, bias=False, device=dev, dtype=torch.bfloat16), bits, 128)
                   for _ in range(copies)]
            layers[name, bits] = (qls, [q.dequantize(torch.bfloat16) for q in qls])
    for M in sorted(int(m) for m in args.ms.split(",")):
        if time.perf_counter() - t0 > args.budget_s: break
        row = res["rows"][M] = {}
        for name, (N, K) in SHAPES.items():
            x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
            for bits in (8, 4):
                qls, ws = layers[name, bits]
                q = lambda l: dict(scales=l.scales, zeros=l.zeros, group_size=l.group_size)
                ways = {"kernel": [lambda l=l: l(x) for l in qls],
                        "rebuild_mm": [lambda l=l: F.linear(x, qk.rebuild(l.qweight, dtype=x.dtype, **q(l)))
                                       for l in qls],
                        "rebuild": [lambda l=l: qk.rebuild(l.qweight, dtype=x.dtype, **q(l)) for l in qls],
                        "cublas": [lambda w=w: F.linear(x, w) for w in ws]}
                ref = F.linear(x, ws[0]).float()
                err = {w: ((ways[w][0]().float() - ref).abs().max() / ref.abs().max()).item()
                       for w in ("kernel", "rebuild_mm")}
                assert max(err.values()) < 2e-2, (name, bits, M, err)
                row[f"{name},int{bits}"] = dict({w: round(graph_us(c), 2) for w, c in ways.items()},
                                                rel_err={k: round(v, 5) for k, v in err.items()})
                torch.cuda.empty_cache()
        print(json.dumps({M: row}), flush=True)
    print(f"{res['gpu']}: a layer's four products, us "
          "(kernel / weight rebuilt + cuBLAS / the rebuild alone / cuBLAS on bf16)")
    first = {}
    for M, row in res["rows"].items():
        line = f"{M:>6} rows"
        for bits in (8, 4):
            t = {w: sum(row[f"{s},int{bits}"][w] for s in SHAPES) for w in WAYS}
            line += f"   int{bits} " + " / ".join(f"{t[w]:8.1f}" for w in WAYS)
            if t["rebuild_mm"] < t["kernel"]: first.setdefault(bits, M)
            else: first.pop(bits, None)                        # the smallest M from which it stays faster
        print(line)
    res["rebuild_faster_from"] = {f"int{b}": m for b, m in first.items()}
    print("rebuild + cuBLAS faster from (rows):", res["rebuild_faster_from"])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
