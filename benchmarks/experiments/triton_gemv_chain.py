"""The package's one-token GEMV (04i, with chapter 05's int8) timed the way benchmarks/experiments/cuda_gemv_ceiling.cu times its
hand-written CUDA one: each of TinyLlama's four shapes as a chain of 22 launches on 22 weight copies in one CUDA graph
(plain products: no norm, SwiGLU or residual; with and without PDL), then the four shapes as 22 layers; cuBLAS on bf16
weights beside.
Prints a table and writes triton_gemv_chain.json into --out. Run from the repo root on a CUDA GPU:
  python benchmarks/experiments/triton_gemv_chain.py --out $OUT
"""
import argparse, json, sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))     # the repo root
from mini_vllm.fast import small_batch as sb  # noqa: E402
from mini_vllm.quant.quantization import QuantLinear  # noqa: E402

SHAPES = {"qkv": (2560, 2048), "o": (2048, 2048), "gate_up": (11264, 2048), "down": (2048, 5632)}
LAYERS, DT = 22, torch.bfloat16


def graph_us(fn, calls: int) -> float:
    "Microseconds a call of a graph of `calls` calls: the median of 5 x 50 replays."
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g): fn()
    for _ in range(10): g.replay()
    times = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(50): g.replay()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1000 / 50 / calls)
    return sorted(times)[2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    torch.manual_seed(0)
    xs = {K: torch.randn(1, K, device="cuda", dtype=DT) * 0.1 for K in (2048, 5632)}
    res = {"device": torch.cuda.get_device_name(), "us": {}}
    outs = {K: torch.empty(1, 11264, device="cuda", dtype=DT) for K in (2048, 5632)}
    # each set of weights built once: int8 for the GEMV, bf16 for the GEMV and for cuBLAS
    for weights, variants in (("int8", (("int8", False), ("int8", True))),
                              ("bf16", (("bf16", False), ("bf16", True), ("cublas", False)))):
        mats = {}
        for name, (N, K) in SHAPES.items():
            mats[name] = []
            for _ in range(LAYERS):
                lin = torch.nn.Linear(K, N, bias=False, device="cuda", dtype=DT)
                torch.nn.init.normal_(lin.weight, std=0.02)
                if weights == "int8":
                    q = QuantLinear(lin, 8, 128, True)
                    mats[name].append((q.qweight, dict(scales=q.scales)))
                else: mats[name].append((lin.weight.detach(), {}))
        for fmt, pdl in variants:
            def call(name, w, kw):
                x, y = xs[SHAPES[name][1]], outs[SHAPES[name][1]][:, :w.shape[0]]
                if fmt == "cublas": torch.mm(x, w.t(), out=y)
                else: sb.gemv(x, w, out=y, pdl=pdl, **kw)

            row = {name: graph_us(lambda: [call(name, w, kw) for w, kw in mats[name]], LAYERS) for name in SHAPES}
            row["layer"] = graph_us(lambda: [call(n, *mats[n][l]) for l in range(LAYERS) for n in SHAPES], LAYERS)
            res["us"][fmt + (" PDL" if pdl else "")] = row
            print(fmt, "PDL" if pdl else "", " ".join(f"{k} {v:.2f}" for k, v in row.items()), "us", flush=True)
        del mats
        torch.cuda.empty_cache()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "triton_gemv_chain.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
