"""Decode attention for a full batch of uneven contexts: chapter 04g1's work items (each context in equal pieces of at
most a chunk, the longest contexts first, a program per (piece, KV head), the list built on the device) against its
kernel with one program per context, as `TritonPagedAttention` launched both before the items. Same contexts as
`attn_length_mix.py` (256 requests, the public workload's midway lengths, mean ~830 tokens, and equal ones),
TinyLlama's heads, bf16, pages in shuffled order, each call replayed inside a CUDA graph sized for contexts up to
2,048 tokens; the items' building kernel timed alone and together with the attention, as the engine runs it once a
step. The variants tried on the way (items built on the host, persistent grids taking units in turn or from a shared
counter, the largest pieces first) are in `git show a6fc73c:benchmarks/attn_work_items.py`. From the repo root, on
a CUDA GPU:
  python3 benchmarks/experiments/attn_work_items.py --out $OUT/items [--chunks 512,1024,2048]
"""
import argparse, json, os, sys
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent), str(HERE)]   # repo root, benchmarks/, here
import torch
from mini_vllm.fast import triton_attention as ta
from attn_length_mix import B, MAX_LEN, step
from gpu_bench import graph_us


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    p.add_argument("--chunks", default="512,1024,2048")
    a = p.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    c = torch.Generator().manual_seed(0)
    prompt, output = torch.randint(100, 1025, (B,), generator=c), torch.randint(100, 1025, (B,), generator=c)
    mixed = (prompt + (torch.rand(B, generator=c) * output).long()).clamp(max=MAX_LEN).tolist()
    x = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")
    copy_gb_s = 2 * (1 << 27) / graph_us([lambda: x[: 1 << 27].copy_(x[1 << 27:])]) / 1e3
    res = dict(commit=os.environ.get("MINI_VLLM_COMMIT"), device=torch.cuda.get_device_name(0),
               copy_gb_per_s=round(copy_gb_s), mean_context=sum(mixed) / B, rows=[])
    for name, seq in (("mixed", mixed), ("equal", [round(sum(mixed) / B)] * B)):
        cache, meta, q, kv_bytes = step(seq, g)
        want, o = torch.empty_like(q), torch.empty_like(q)
        r = torch.arange(B, dtype=torch.int32, device="cuda")
        kc, vc, bt, qsl = cache.k[0], cache.v[0], meta.block_tables, meta.query_start_loc
        whole = lambda: ta.paged_decode_attention(want, q, kc, vc, bt, meta.seq_lens, qsl, r, 0.125, MAX_LEN)
        whole(); torch.cuda.synchronize()
        runs = [("one program a context", None, graph_us([whole] * 8))]
        for chunk in map(int, a.chunks.split(",")):
            items = ta.build_items(meta.seq_lens, r, MAX_LEN, chunk)
            call = lambda: ta.items_decode_attention(o, q, kc, vc, bt, qsl, *items, 0.125)
            o.zero_(); call(); torch.cuda.synchronize()
            err = ((o.float() - want.float()).norm() / want.float().norm()).item()
            assert err < 1e-2, (name, chunk, err)
            build = lambda: ta.build_items(meta.seq_lens, r, MAX_LEN, chunk)
            runs += [(f"work items ({items[1].item()})", chunk, graph_us([call] * 8)),
                     ("building the items", chunk, graph_us([build])),
                     ("built, then read by 22 layers, per layer", chunk,
                      graph_us([build] + [call] * 22) * 23 / 22)]
        for kind, chunk, us in runs:
            row = dict(contexts=name, kernel=kind, chunk=chunk, us=round(us, 1),
                       fraction_of_copy=round(kv_bytes / us / 1e3 / copy_gb_s, 3))
            res["rows"].append(row)
            print(json.dumps(row), flush=True)
        del cache
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    (out / "attn_work_items.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
