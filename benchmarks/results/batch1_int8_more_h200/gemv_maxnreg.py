"""The one-token chain of quant_chain_sweep.py (22 TinyLlama-shaped layers, PDL, one CUDA graph) with a register cap
(`maxnreg`) on one shape's GEMV at a time: fewer registers a thread, more programs resident on a multiprocessor.
On 3659736 with maxnreg_04i.diff's two launch lines applied (a tiling's `maxnreg` passed to the launches; not its
GEMV_TILING entry, which is ab_batch1.sh's bf16 variant), this file in benchmarks/:
  python benchmarks/gemv_maxnreg.py --out $OUT [--formats int8,bf16]
"""
import argparse, json, sys
from pathlib import Path
import torch
sys.path.insert(0, str(Path(__file__).resolve().parent))
from quant_chain_sweep import Layers, graph_us, weights  # noqa: E402

CAPS = {"qkv": (64, 56, 48), "o": (168, 128, 96), "gate_up": (64, 56, 48), "down": (80, 64)}

p = argparse.ArgumentParser(); p.add_argument("--out", default="."); p.add_argument("--formats", default="int8,bf16")
args = p.parse_args()
res = {}
torch.manual_seed(0)
for fmt in args.formats.split(","):
    run = Layers(weights(fmt))
    r = res[fmt] = {"table": graph_us(lambda: run({}))}
    print(f"{fmt}: table {r['table']:.2f} us a layer", flush=True)
    from mini_vllm import small_batch as sb
    for name, caps in CAPS.items():
        kind = {"gate_up": "swiglu", "down": "deep", "o": "narrow", "qkv": "qkv"}[name]
        bits = {"int8": 8, "int4": 4, "bf16": 16}[fmt]
        N, K = {"qkv": (2560, 2048), "o": (2048, 2048), "gate_up": (5632, 2048), "down": (2048, 5632)}[name]
        base = sb._tiling(1, N, K, kind if name in ("qkv", "gate_up") else None, bits)[1]
        base = {k: v for k, v in base.items() if k in ("block_n", "block_k", "num_warps")}
        for cap in caps:
            key = f"{name} maxnreg {cap}"
            try: r[key] = graph_us(lambda: run({name: dict(base, maxnreg=cap)}))
            except Exception as e: r[key] = repr(e)[:200]; print(key, r[key]); continue
            print(f"  {key}: {r[key]:.2f}", flush=True)
    r["table_again"] = graph_us(lambda: run({}))
    print(f"  table again {r['table_again']:.2f}", flush=True)
    del run; torch.cuda.empty_cache()
    (Path(args.out) / "gemv_maxnreg.json").write_text(json.dumps(res, indent=1))
