"""Chapter 05b2's int4 kernel (05b3's int8 kernel with `--bits 8`) on a GPU: checked against the dequantized
weight, then timed a product at a time beside 05b0's layer (its GEMV up to two rows, `qmm` beyond) and cuBLAS on
the bf16 weight, on TinyLlama's and Llama-3-8B's four products, 1-16 tokens, warps per strip 4, 8, 16 and
`mma_warps`' choice. `--depths 8,16`: the kernel also built with its weights streamed that many chunks ahead
(the package's streams 4), checked equal to the package's and timed at each warps as `int4_mma_d{depth}_w{warps}`.
`--int4-grid 64,asym`: the int4 layers in that grid (groups of 64 with zeros, the grid `LLM(quantization="int4")`
calibrates in) instead of symmetric groups of 128.

Each timing is a CUDA graph of 20 calls, each on its own copy of the layer (copies enough to pass the L2 cache),
timed by gpu_bench's `graph_us` (the median of 10 replays); microseconds a call. The figures in
results/int4_mma_h100_118a53e/ were taken by this script at 118a53e, whose own timer took the median of five
rounds of 10 replays. Writes --out (JSON) and prints each row.

    python3 benchmarks/int4_mma_bench.py --out $OUT/int4_mma_bench.json
    python3 benchmarks/int4_mma_bench.py --bits 8 --out $OUT/int8_mma_bench.json
    python3 benchmarks/int4_mma_bench.py --shapes llama3_8b --ms 1,2 --depths 8,16 --out $OUT/int4_depth.json
    python3 benchmarks/int4_mma_bench.py --shapes llama3_8b --ms 1,2,16 --int4-grid 64,asym --out $OUT/g64a.json
"""
import argparse, json, os, subprocess, sys, time
from pathlib import Path

import torch
import torch.nn.functional as F

from mini_vllm.quant.int4_mma import (CPP_SRC, CUDA_SRC, build_extension, extension, int4_mma, mma_warps,
                                      shuffle_int4)
from mini_vllm.quant.int8_mma import CPP_SRC8, CUDA_SRC8, TensorCoreLinear, extension8, int8_mma, shuffle_int8
from mini_vllm.quant.quant_kernels import TritonQuantLinear
from mini_vllm.quant.quantization import (dequantize_int4, dequantize_int8, quantize_int4, quantize_int8,
                                          unpack_int4)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_bench import graph_us  # noqa: E402  (calls recorded into one CUDA graph, us per call)

SHAPES = {"llama3_8b": dict(qkv=(6144, 4096), o=(4096, 4096), gate_up=(28672, 4096), down=(4096, 14336)),
          "tinyllama": dict(qkv=(2560, 2048), o=(2048, 2048), gate_up=(11264, 2048), down=(2048, 5632))}


def chain_us(fn, calls=20):
    "Microseconds a call of fn(i), i = 0 .. calls - 1, recorded into one CUDA graph (gpu_bench's)."
    return graph_us([lambda i=i: fn(i) for i in range(calls)])


def checks8():
    "Largest error of int8_mma against x @ the dequantized weight (fp32), per case, 1-16 tokens."
    out = []
    for (N, K), dtype in [((256, 512), torch.bfloat16), ((512, 1024), torch.float16),
                          ((28672, 4096), torch.bfloat16), ((4096, 14336), torch.bfloat16)]:
        q, s = quantize_int8(torch.randn(N, K, device="cuda", dtype=dtype) * 0.02)
        words, ref_w = shuffle_int8(q), dequantize_int8(q, s)
        for M in (1, 2, 3, 8, 9, 16):
            x = torch.randn(M, K, device="cuda", dtype=dtype)
            ref = x.float() @ ref_w.T
            err = ((int8_mma(x, words, s).float() - ref).abs().max() / ref.abs().max()).item()
            out.append(dict(N=N, K=K, dtype=str(dtype), M=M, rel_err=err))
            assert err < 1e-2, out[-1]
    return out


def checks():
    "Largest error of int4_mma against x @ the dequantized weight (fp32), per case, 1-16 tokens."
    out = []
    cases = [((256, 512), True, torch.bfloat16, 128), ((256, 512), False, torch.bfloat16, 128),
             ((512, 1024), True, torch.float16, 128), ((6144, 4096), True, torch.bfloat16, 128),
             ((4096, 14336), False, torch.bfloat16, 128), ((4096, 14336), False, torch.bfloat16, 64),
             ((512, 1024), False, torch.float16, 64)]
    for (N, K), symmetric, dtype, group in cases:
        w = torch.randn(N, K, device="cuda", dtype=dtype) * 0.02
        packed, s, z = quantize_int4(w, group, symmetric)
        words, ref_w = shuffle_int4(unpack_int4(packed, group)), dequantize_int4(packed, s, z, group)
        for M in (1, 2, 3, 8, 9, 16):
            x = torch.randn(M, K, device="cuda", dtype=dtype)
            ref = x.float() @ ref_w.T
            err = ((int4_mma(x, words, s, z, group_size=group).float() - ref).abs().max()
                   / ref.abs().max()).item()
            out.append(dict(N=N, K=K, symmetric=symmetric, group=group, dtype=str(dtype), M=M, rel_err=err))
            assert err < 1e-2, out[-1]
    return out


def depth_variant(bits: int, depth: int):
    "05b2's int4 (05b3's int8) kernel built with its weights streamed `depth` 64-column chunks ahead of use."
    cpp, cuda = (CPP_SRC, CUDA_SRC) if bits == 4 else (CPP_SRC8, CUDA_SRC8)
    src = cuda.replace("constexpr int DEPTH = 4;", f"constexpr int DEPTH = {depth};")
    assert src != cuda, "the kernel no longer names its DEPTH"
    return build_extension(f"mini_vllm_int{bits}_mma_d{depth}", cpp, src, f"int{bits}_mma", f"int{bits}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="int4_mma_bench.json")
    ap.add_argument("--ms", default="1,2,4,8,16")
    ap.add_argument("--shapes", default="llama3_8b,tinyllama")
    ap.add_argument("--bits", type=int, default=4, choices=(4, 8))
    ap.add_argument("--depths", default="", help="the kernel also built streaming this many chunks ahead")
    ap.add_argument("--int4-grid", default="128,sym", help="GROUP,sym|asym: the int4 layers' groups and grid")
    a = ap.parse_args()
    group4, grid = a.int4_grid.split(",")
    group4, symmetric = int(group4), grid == "sym"
    assert grid in ("sym", "asym"), "--int4-grid: GROUP,sym or GROUP,asym"

    t0 = time.time()
    assert (extension() if a.bits == 4 else extension8()) is not None
    depths = {d: depth_variant(a.bits, d) for d in map(int, filter(None, a.depths.split(",")))}
    assert all(depths.values())
    kernel, group = (int4_mma, group4) if a.bits == 4 else (int8_mma, 64)
    name = f"int{a.bits}_mma"
    commit = os.environ.get("MINI_VLLM_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    res = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, commit=commit,
               bits=a.bits, int4_grid=a.int4_grid if a.bits == 4 else None,
               build_s=round(time.time() - t0, 1), checks=checks() if a.bits == 4 else checks8(), rows=[])
    print(f"built in {res['build_s']} s; checks: largest error {max(c['rel_err'] for c in res['checks']):.1e}",
          flush=True)
    torch.manual_seed(0)
    for shape in a.shapes.split(","):
        for layer, (N, K) in SHAPES[shape].items():
            copies = max(1, int(256e6 // (N * K * 2)))                  # bf16 copies past the L2 cache
            lins = [torch.nn.Linear(K, N, bias=False, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
            new = [TensorCoreLinear(lin, a.bits, group4, symmetric) for lin in lins]   # 05b0's: TritonQuantLinear's
            assert all(m.prepare() for m in new)
            for M in [int(m) for m in a.ms.split(",")]:
                x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
                row = dict(shape=shape, layer=layer, N=N, K=K, M=M, warps=mma_warps(N, K, group, M))
                row["cublas_bf16"] = chain_us(lambda i: F.linear(x, lins[i % copies].weight))
                row["triton_05b0"] = chain_us(lambda i: TritonQuantLinear.forward(new[i % copies], x))
                row[name] = chain_us(lambda i: new[i % copies](x))
                for w in (4, 8, 16) if M <= 8 else (4, 8):       # two tiles: at most 8 warps
                    mma = ((lambda m: int4_mma(x, m.words, m.scales, m.zeros, None, group, w)) if a.bits == 4
                           else (lambda m: int8_mma(x, m.words, m.scales, warps=w)))
                    row[f"{name}_w{w}"] = chain_us(lambda i: mma(new[i % copies]))
                    for d, ext in depths.items():                # the same sums in the same order
                        run = getattr(ext, name)
                        call = ((lambda m: run(x, m.words, m.scales, m.zeros, None, group, w)) if a.bits == 4
                                else (lambda m: run(x, m.words, m.scales, None, w)))
                        try: got = call(new[0])
                        except RuntimeError as e:                # more registers than a block of w warps has
                            if "too many resources" not in str(e): raise
                            row[f"{name}_d{d}_w{w}"] = None
                            continue
                        assert torch.equal(got, mma(new[0])), (d, w)
                        row[f"{name}_d{d}_w{w}"] = chain_us(lambda i: call(new[i % copies]))
                weight_bytes = (N * K / 2 + N * K / group * 2 * (1 + (not symmetric)) if a.bits == 4
                                else N * K + N * 2)
                row[f"int{a.bits}_TBps"] = weight_bytes / row[name] / 1e6
                res["rows"].append(row)
                print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}),
                      flush=True)
            del lins, new
            torch.cuda.empty_cache()
    Path(a.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
