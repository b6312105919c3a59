"""Chapter 05b's few-token products beside the weight-only kernels PyTorch itself ships for CUDA, at TinyLlama's and
Llama-3-8B's shapes: how far a known kernel gets where this book's kernels stop (1.1x bf16 at batch 1).
  cublas      F.linear on the bf16 weight the integers stand for
  book        TritonQuantLinear as the model calls it: 04i's GEMV up to 2 rows, then qmm / qmm_tma / the rebuild;
              int8 and int4 (symmetric, groups of 128)
  tinygemm    torch._weight_int4pack_mm, the int4 kernel gpt-fast and torchao use (same integers, scales, zeros)
  int8pack    torch._weight_int8pack_mm (int8 per output channel), where this torch has it for CUDA (one row only)
  compiled    torch.compile of F.linear(x, w.to(bf16)) * s, gpt-fast's int8 (one row only)
Each call reads its own copy of the weights inside one CUDA graph (so that they stream from HBM); each way's output is
checked against cuBLAS on the dequantized weight. Prints a layer's four products (us) per shape, format and way.
  python3 benchmarks/experiments/batch1_anchors.py --out $OUT/batch1_anchors.json [--ms 1,2,4,16]
"""
import argparse, json, os, sys, traceback
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent), str(HERE)]   # repo root, benchmarks/, here
import torch
import torch.nn.functional as F
from gpu_bench import graph_us  # noqa: E402  (calls recorded into one CUDA graph, us per call)
from mini_vllm.quant import quant_kernels as qk  # noqa: E402
from mini_vllm.quant.quantization import unpack_int4  # noqa: E402

SHAPES = {"tinyllama": {"qkv": (2560, 2048), "o": (2048, 2048), "gate_up": (11264, 2048), "down": (2048, 5632)},
          "llama3_8b": {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}}


def tinygemm_weights(l):
    "A TritonQuantLinear's int4 integers, scales and zeros in the layout of torch._weight_int4pack_mm."
    q = unpack_int4(l.qweight, l.group_size).to(torch.int32)                    # (N, K) in 0..15
    w = torch._convert_weight_to_int4pack((q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8), 8)
    z = torch.zeros_like(l.scales) if l.zeros is None else l.zeros
    return w, torch.stack((l.scales.T, z.T), -1).to(torch.bfloat16).contiguous()  # (K/G, N, 2): w = (q - 8) s + z


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--ms", default="1")
    args = p.parse_args()
    import triton
    dev = "cuda"
    torch.manual_seed(0)
    res = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
               commit=os.environ.get("MINI_VLLM_COMMIT"), us={}, errors={})
    torch._dynamo.config.recompile_limit = 64                      # one compile per shape, none shared
    compiled = torch.compile(lambda x, w, s: F.linear(x, w.to(x.dtype)) * s, dynamic=False)
    for shape, mats in SHAPES.items():
        for name, (N, K) in mats.items():
            copies = max(2, min(32, (400 << 20) // (N * K * 2)))          # 400 MB of bf16 weights: far beyond L2
            for bits in (8, 4):
                qls = [qk.TritonQuantLinear(torch.nn.Linear(K, N, bias=False, device=dev, dtype=torch.bfloat16),
                                            bits, 128) for _ in range(copies)]
                ws = [l.dequantize(torch.bfloat16) for l in qls]
                extra = {}
                try:
                    if bits == 4: extra["tinygemm"] = [tinygemm_weights(l) for l in qls]
                    else:
                        s8 = [l.scales.reshape(-1).to(torch.bfloat16) for l in qls]
                        extra["int8pack"] = list(zip([l.qweight for l in qls], s8))
                except Exception as e: res["errors"][f"{shape},{name},int{bits},prep"] = repr(e)
                for M in (int(m) for m in args.ms.split(",")):
                    x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
                    ways = {"cublas": [lambda w=w: F.linear(x, w) for w in ws], "book": [lambda l=l: l(x) for l in qls]}
                    if "tinygemm" in extra:
                        ways["tinygemm"] = [lambda a=a: torch._weight_int4pack_mm(x, a[0], 128, a[1])
                                            for a in extra["tinygemm"]]
                    if "int8pack" in extra and M == 1:                     # generic kernels: one row is enough
                        ways["int8pack"] = [lambda a=a: torch._weight_int8pack_mm(x, a[0], a[1]) for a in extra["int8pack"]]
                        ways["compiled"] = [lambda a=a: compiled(x, a[0], a[1]) for a in extra["int8pack"]]
                    ref = F.linear(x, ws[0]).float()
                    row = res["us"].setdefault(f"{shape},M={M}", {}).setdefault(f"{name},int{bits}", {})
                    for way, calls in ways.items():
                        key = f"{shape},{name},int{bits},M={M},{way}"
                        try:
                            err = ((calls[0]().float() - ref).abs().max() / ref.abs().max()).item()
                            if err > 2e-2: raise AssertionError(f"relative error {err:.3g}")
                            row[way] = round(graph_us(calls), 2)
                        except Exception as e:
                            res["errors"][key] = "".join(traceback.format_exception_only(e)).strip()[-400:]
                    print(json.dumps({f"{shape},{name},int{bits},M={M}": row}), flush=True)
                del qls, ws, extra
                torch.cuda.empty_cache()
    print(f"\n{res['gpu']}, torch {res['torch']}: a layer's four products, us")
    for key, row in res["us"].items():
        for bits in (8, 4):
            ways = sorted({w for n in SHAPES[key.split(',')[0]] for w in row.get(f"{n},int{bits}", {})})
            if not ways: continue
            t = {w: sum(row[f"{n},int{bits}"].get(w, float("nan")) for n in SHAPES[key.split(',')[0]]) for w in ways}
            print(f"{key:>16} int{bits}: " + "  ".join(f"{w} {v:7.1f}" for w, v in t.items()))
    for k, v in res["errors"].items(): print("error", k, v[:200])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
