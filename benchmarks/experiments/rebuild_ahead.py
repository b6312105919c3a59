"""A full decode batch's 22 layers at TinyLlama's shape with the quantized weights rebuilt *ahead*, on a second CUDA
stream, while the previous products and the decode attention run: does rebuilding (memory-bound) hide behind cuBLAS's
products (compute-bound at a few hundred rows) and beside attention, where the same rebuild in line costs ~38 us a
layer?

Each layer: q,k,v product, 04g1's decode attention (256 requests, the public workload's mixed contexts, one cache for
all layers), o, gate/up, down; inputs fixed (no data flows between layers: only the kernels' costs). The whole step
recorded into one CUDA graph and replayed. Ways:
  bf16        cuBLAS on bf16 weights
  kernels     int8 / int4 as TritonQuantLinear runs these rows today (qmm_tma, qmm, or rebuild in line)
  inline      every product rebuilt in line, then cuBLAS
  ahead<d>    each product's weight rebuilt on a side stream into one of d+1 slots, d products ahead
The products' outputs are checked against cuBLAS on the dequantized weight once, outside the graph.
  python3 benchmarks/experiments/rebuild_ahead.py --out $OUT/rebuild_ahead.json [--ms 256,128] [--depths 1,2,3]
"""
import argparse, json, os, sys
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent), str(HERE)]   # repo root, benchmarks/, here
import torch
import torch.nn.functional as F
from gpu_bench import bench_ms  # noqa: E402
from attn_length_mix import step as attention_step, B, MAX_LEN  # noqa: E402
from mini_vllm.quant import quant_kernels as qk  # noqa: E402
from mini_vllm.fast import triton_attention as ta  # noqa: E402

SHAPES = {"qkv": (2560, 2048), "o": (2048, 2048), "gate_up": (11264, 2048), "down": (2048, 5632)}
LAYERS = 22


def rebuild_into(out, l, dtype):
    "Chapter 05b's rebuild of layer `l`'s weight, written into `out` (N, K)."
    return qk.rebuild(l.qweight, l.scales, l.zeros, l.group_size, dtype, out=out)


class Ahead:
    "Weights rebuilt `depth` products ahead on a side stream, into depth + 1 slots; `linear(i, x)` is product i."
    def __init__(self, layers, depth, dtype):
        self.layers, self.depth, self.dtype = layers, depth, dtype
        n = max(l.out_features * l.in_features for l in layers)
        self.slots = [torch.empty(n, dtype=dtype, device="cuda") for _ in range(depth + 1)]
        self.side = torch.cuda.Stream()
        self.ready = [torch.cuda.Event() for _ in self.slots]
        self.free = [torch.cuda.Event() for _ in self.slots]

    def _issue(self, j):
        s, l = j % len(self.slots), self.layers[j]
        with torch.cuda.stream(self.side):
            if j >= len(self.slots): self.side.wait_event(self.free[s])   # product j - depth - 1 is done with it
            rebuild_into(self.slots[s][: l.out_features * l.in_features].view(l.out_features, l.in_features), l,
                         self.dtype)
            self.ready[s].record(self.side)

    def start(self):
        self.side.wait_stream(torch.cuda.current_stream())
        for j in range(min(self.depth, len(self.layers))): self._issue(j)

    def linear(self, i, x):
        if i + self.depth < len(self.layers): self._issue(i + self.depth)
        s, l, main = i % len(self.slots), self.layers[i], torch.cuda.current_stream()
        main.wait_event(self.ready[s])
        y = F.linear(x, self.slots[s][: l.out_features * l.in_features].view(l.out_features, l.in_features))
        self.free[s].record(main)
        return y

    def finish(self): torch.cuda.current_stream().wait_stream(self.side)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--ms", default="256")
    p.add_argument("--depths", default="1,2,3")
    p.add_argument("--bits", default="8,4")
    a = p.parse_args()
    dt, g = torch.bfloat16, torch.Generator(device="cuda").manual_seed(0)
    torch.manual_seed(0)
    c = torch.Generator().manual_seed(0)                          # the public workload's contexts midway
    prompt, output = torch.randint(100, 1025, (B,), generator=c), torch.randint(100, 1025, (B,), generator=c)
    mixed = (prompt + (torch.rand(B, generator=c) * output).long()).clamp(max=MAX_LEN).tolist()
    cache, meta, q, kv_bytes = attention_step(mixed, g)
    o_attn, reqs = torch.empty_like(q), torch.arange(B, dtype=torch.int32, device="cuda")
    attention = lambda: ta.paged_decode_attention(o_attn, q, cache.k[0], cache.v[0], meta.block_tables, meta.seq_lens,
                                                  meta.query_start_loc, reqs, 0.125, MAX_LEN)
    res = dict(commit=os.environ.get("MINI_VLLM_COMMIT"), gpu=torch.cuda.get_device_name(), layers=LAYERS,
               mean_context=sum(mixed) / B, ms={}, errors={})
    for bits in (int(b) for b in a.bits.split(",")):
        mods = [qk.TritonQuantLinear(torch.nn.Linear(K, N, bias=False, device="cuda", dtype=dt), bits, 128)
                for _ in range(LAYERS) for N, K in SHAPES.values()]
        for M in (int(m) for m in a.ms.split(",")):
            xs = {K: torch.randn(M, K, device="cuda", dtype=dt) for K in (2048, 5632)}
            order = [mods[4 * i + j] for i in range(LAYERS) for j in range(4)]
            if bits == 8:                                          # bf16 once, from int8's dequantized weights
                ws = [l.dequantize(dt) for l in order]
                ways = {"bf16": lambda i, l: F.linear(xs[l.in_features], ws[i])}
            else: ways = {}
            ways["kernels"] = lambda i, l: l(xs[l.in_features])
            tmp = torch.empty(max(l.out_features * l.in_features for l in order), dtype=dt, device="cuda")
            ways["inline"] = lambda i, l: F.linear(xs[l.in_features], rebuild_into(
                tmp[: l.out_features * l.in_features].view(l.out_features, l.in_features), l, dt))
            aheads = {f"ahead{d}": Ahead(order, int(d), dt) for d in a.depths.split(",")}
            row = res["ms"].setdefault(f"int{bits},M={M}", {})
            for name in ["attention only", *ways, *aheads]:
                ah = aheads.get(name)
                def step_fn():
                    if ah: ah.start()
                    outs = []
                    for i, l in enumerate(order):
                        outs.append(ah.linear(i, xs[l.in_features]) if ah else
                                    None if name == "attention only" else ways[name](i, l))
                        if i % 4 == 0: attention()
                    if ah: ah.finish()
                    return outs
                try:
                    outs = step_fn(); torch.cuda.synchronize()
                    if name != "attention only":
                        for i in (0, 1, 2, 3, len(order) - 1):             # every shape, and the last product
                            l = order[i]
                            ref = F.linear(xs[l.in_features], l.dequantize(dt)).float()
                            err = ((outs[i].float() - ref).abs().max() / ref.abs().max()).item()
                            if err > 2e-2: raise AssertionError(f"product {i}: relative error {err:.3g}")
                    del outs
                    gr = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(gr): step_fn()
                    row[name] = round(bench_ms(gr.replay, warmup=3, reps=20), 4)
                    del gr
                except Exception as e: res["errors"][f"int{bits},M={M},{name}"] = repr(e)[-400:]
                print(json.dumps({f"int{bits},M={M},{name}": row.get(name)}), flush=True)
            del aheads, tmp
            if bits == 8: del ws
        del mods
        torch.cuda.empty_cache()
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))


if __name__ == "__main__": main()
