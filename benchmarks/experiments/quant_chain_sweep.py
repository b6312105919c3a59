"""Tilings of the small-batch GEMV (04i) for one token (or --rows), timed where the model runs them: 22 TinyLlama-shaped layers
(qkv with RoPE and the cache write, o + residual, gate/up with the norm and SwiGLU, down + residual; no attention)
recorded into one CUDA graph with PDL and replayed. Each shape's tiling is varied while the others keep the table's
(small_batch.GEMV_TILING / QUANT_TILING); then the best of each shape together. bf16, int8 and int4 weights (05,
symmetric, groups of 128). Writes quant_chain_sweep.json into --out. `--shape llama3_8b`: Llama-3-8B's layers instead
(8 of them by default, --layers), the tilings keyed by the shape as the model's table is (qkv, narrow for o, swiglu for
gate/up, deep for down), so that --tiling-out writes the best as gpu_bench.py's --quant-tiling. Run from the repo root
on a CUDA GPU:
  python benchmarks/experiments/quant_chain_sweep.py --out $OUT [--formats int8,int4,bf16] [--rows 2] [--table-only bf16]
"""
import argparse, itertools, json, os, sys, time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))     # the repo root
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # benchmarks/
from workload import shape_config  # noqa: E402
from mini_vllm.fast import small_batch as sb  # noqa: E402
from mini_vllm.loading import ModelConfig  # noqa: E402
from mini_vllm.model import rope_tables  # noqa: E402
from mini_vllm.quant.quantization import QuantLinear  # noqa: E402

DT = torch.bfloat16
KINDS = {"qkv": "qkv", "o": "narrow", "gate_up": "swiglu", "down": "deep"}   # the table's key of each shape


def use_shape(name: str, layers: int):
    "The chain's model: a shape of workload.SHAPES with Llama's layers (SHAPES, CFG), LAYERS of them."
    global SHAPES, LAYERS, CFG
    c = shape_config(name)
    H, D, I = c["hidden_size"], c["hidden_size"] // c["num_attention_heads"], c["intermediate_size"]
    CFG = ModelConfig("llama", c["vocab_size"], H, c["num_hidden_layers"], c["num_attention_heads"],
                      c["num_key_value_heads"], D, I, c["max_position_embeddings"], 1e-5)
    N = (c["num_attention_heads"] + 2 * c["num_key_value_heads"]) * D
    SHAPES, LAYERS = {"qkv": (N, H), "o": (H, H), "gate_up": (2 * I, H), "down": (H, I)}, layers


use_shape("tinyllama", 22)


def weights(fmt: str) -> list[dict]:
    "LAYERS layers of random weights in one format: {shape: (weight, the kernels' quantization arguments)}."
    out = []
    for _ in range(LAYERS):
        layer = {}
        for name, (N, K) in SHAPES.items():
            lin = torch.nn.Linear(K, N, bias=False, device="cuda", dtype=DT)
            torch.nn.init.normal_(lin.weight, std=0.02)
            if fmt == "bf16": layer[name] = (lin.weight.detach(), {})
            else:
                q = QuantLinear(lin, 8 if fmt == "int8" else 4, 128, True)
                layer[name] = (q.qweight, dict(scales=q.scales, zeros=q.zeros, group_size=q.group_size))
        out.append(layer)
    return out


class Layers:
    "The model's small-batch calls for one token through every layer, each shape's tiling overridable."
    def __init__(self, ws, rows=1):
        H = CFG.hidden_size
        self.ws, self.nw = ws, torch.ones(H, device="cuda", dtype=DT)
        self.cos, self.sin = (t.cuda() for t in rope_tables(CFG))
        self.kc = torch.zeros(64, 16, CFG.num_kv_heads, CFG.head_dim, device="cuda", dtype=DT)
        self.vc, self.zero = self.kc.clone(), torch.zeros(rows, dtype=torch.long, device="cuda")
        self.slots = torch.arange(rows, device="cuda")
        self.h = torch.randn(rows, H, device="cuda", dtype=DT) * 0.1

    def __call__(self, over: dict):
        t, h, nw = lambda n: over.get(n, {}), self.h, self.nw
        tq = dict(t("qkv"), **({"block_h": max(1, t("qkv")["block_n"] // 2)} if "block_n" in t("qkv") else {}))
        for layer in self.ws:
            (wq, kq), (wo, ko), (wg, kg), (wd, kd) = (layer[n] for n in SHAPES)
            qkv = sb.qkv_rope_write(h, nw, 1e-5, wq, None, self.cos, self.sin, self.zero, self.slots, self.kc, self.vc,
                                    CFG.num_heads, CFG.num_kv_heads, CFG.head_dim, pdl=True, **kq, **tq)
            sb.gemv(qkv[:, :CFG.hidden_size], wo, residual=h, out=h, pdl=True, **ko, **t("o"))
            g = sb.gemv(h, wg, silu_out=True, norm_weight=nw, pdl=True, **kg, **t("gate_up"))
            sb.gemv(g, wd, residual=h, out=h, pdl=True, **kd, **t("down"))


def graph_us(fn, reps=30, rounds=3) -> float:
    "Microseconds per layer: fn recorded into a CUDA graph, replayed reps times, best of rounds."
    fn(); torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g): fn()
    for _ in range(3): g.replay()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps): g.replay()
        b.record(); b.synchronize()
        best = min(best, a.elapsed_time(b) / reps)
    return best * 1e3 / LAYERS


def configs(name: str, rows: int = 1, warps=(4, 8), block_k=None, block_n=None):
    "Rows per program (gate/up: pairs), chunk of weights, warps: smaller chunks for more input rows."
    K = SHAPES[name][1]
    block_k = block_k or ((1024, 2048, 8192) if rows == 1 else (256, 512, 1024, 2048))
    for bn, bk, warps in itertools.product(block_n or (1, 2, 4, 8), block_k, warps):
        if (name == "qkv" and bn < 2) or bk > 2 * K: continue
        yield dict(block_n=bn, block_k=bk, num_warps=warps)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    p.add_argument("--formats", default="int8,int4,bf16")
    p.add_argument("--rows", type=int, default=1, help="tokens a step (the model's small path takes up to GEMV_MAX_M)")
    p.add_argument("--table-only", default="", help="formats timed with the table's tilings only")
    p.add_argument("--warps", default="4,8", help="warps a program, tried for every shape")
    p.add_argument("--block-k", default="", help="chunks of weights tried (default: by --rows)")
    p.add_argument("--block-n", default="", help="rows a program tried (default: 1, 2, 4, 8)")
    p.add_argument("--shape", default="tinyllama", help="a model shape of workload.SHAPES with Llama's layers")
    p.add_argument("--layers", type=int, default=None, help="layers in the chain (default: 22, 8 past TinyLlama's)")
    p.add_argument("--tiling-out", default="", help="write the last swept format's best as gpu_bench's --quant-tiling")
    p.add_argument("--shapes", default=",".join(SHAPES), help="the layer's shapes swept (the others keep the table's)")
    args = p.parse_args()
    use_shape(args.shape, args.layers or (22 if args.shape == "tinyllama" else 8))
    out = Path(args.out); out.mkdir(parents=True, exist_ok=True)
    res = {"env": {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "command": " ".join(sys.argv),
                   "commit": os.environ.get("MINI_VLLM_COMMIT", "unknown")}}
    torch.manual_seed(0)
    for fmt in args.formats.split(","):
        run = Layers(weights(fmt), args.rows)
        r = res[fmt] = {"table": graph_us(lambda: run({})), "best": {}}
        print(f"{fmt}, {args.rows} rows: the table's tilings {r['table']:.2f} us a layer", flush=True)
        if fmt in args.table_only.split(","):
            (out / "quant_chain_sweep.json").write_text(json.dumps(res, indent=1))
            continue
        for name in args.shapes.split(","):
            for c in configs(name, args.rows, [int(w) for w in args.warps.split(",")],
                               [int(b) for b in args.block_k.split(",") if b],
                               [int(b) for b in args.block_n.split(",") if b]):
                key = f"{name} bn{c['block_n']} bk{c['block_k']} w{c['num_warps']}"
                try: r[key] = graph_us(lambda: run({name: c}))
                except Exception as e: r[key] = repr(e)[:200]; continue
                if not r["best"].get(name) or r[key] < r[r["best"][name]["key"]]: r["best"][name] = dict(key=key, **c)
            print(f"  {name}: best {r['best'][name]['key']} {r[r['best'][name]['key']]:.2f}", flush=True)
            (out / "quant_chain_sweep.json").write_text(json.dumps(res, indent=1))    # a run cut short keeps it
        best = {n: {k: v for k, v in b.items() if k != "key"} for n, b in r["best"].items()}
        r["best_together"], r["table_again"] = graph_us(lambda: run(best)), graph_us(lambda: run({}))
        print(f"  the best of each shape together {r['best_together']:.2f}; the table again {r['table_again']:.2f}")
        (out / "quant_chain_sweep.json").write_text(json.dumps(res, indent=1))
        if args.tiling_out and fmt in ("int8", "int4"):            # gpu_bench's --quant-tiling: "bits,rows,kind"
            m = 1 << (args.rows - 1).bit_length()
            Path(args.tiling_out).write_text(json.dumps(
                {f"{fmt[3]},{m},{KINDS[n]}": dict(b, num_stages=1) for n, b in best.items()}))
        del run; torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
