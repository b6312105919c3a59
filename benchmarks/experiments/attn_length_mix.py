"""Decode attention (chapter 04g1) for a full batch whose contexts differ in length, as in the public workload midway
(prompt U[100, 1024] plus a uniform share of an output U[100, 1024]), against the same number of tokens in equal
contexts: how much of the copy bandwidth each reaches, and whether the order in which the requests' programs start
matters (as drawn, longest first, shortest first), and contexts cut into partitions of 1,024, 512 or 256 tokens. 256 requests, TinyLlama's heads (32 query, 4 KV, 64 dims), bf16,
blocks of 16 in shuffled order; each call replayed back to back inside a CUDA graph sized, like the engine's, for
contexts up to 2,048. From the repo root, on a CUDA GPU:
  python3 benchmarks/experiments/attn_length_mix.py --out $OUT/attn_mix
"""
import argparse, json, os, sys
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent), str(HERE)]   # repo root, benchmarks/, here
import torch
from mini_vllm.fast import triton_attention as ta
from mini_vllm.loading import ModelConfig
from mini_vllm.paged_attention import AttentionMetadata, PagedKVCache
from gpu_bench import graph_us

H, HKV, D, BS, B, MAX_LEN = 32, 4, 64, 16, 256, 2048


def step(seq, g):
    "A paged decode step of contexts `seq`: cache, metadata, q, and the KV bytes it reads."
    nblocks = sum(-(-s // BS) for s in seq) + 8
    cfg = ModelConfig("llama", 10, H * D, 1, H, HKV, D, 8, 8192, 1e-5)
    cache = PagedKVCache.allocate(cfg, nblocks, BS, torch.bfloat16, "cuda")
    cache.k.normal_(generator=g); cache.v.normal_(generator=g)
    perm = torch.randperm(nblocks, generator=g, device="cuda").tolist()
    tables = [[perm.pop() for _ in range(-(-s // BS))] for s in seq]
    meta = AttentionMetadata.build([1] * len(seq), seq, tables, BS, "cuda")
    q = torch.randn(len(seq), H, D, generator=g, device="cuda").to(torch.bfloat16)
    return cache, meta, q, sum(seq) * HKV * D * 2 * 2


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    a = p.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    c = torch.Generator().manual_seed(0)
    prompt, output = torch.randint(100, 1025, (B,), generator=c), torch.randint(100, 1025, (B,), generator=c)
    mixed = (prompt + (torch.rand(B, generator=c) * output).long()).clamp(max=MAX_LEN).tolist()
    x = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")               # the copy bandwidth, for reference
    copy_gb_s = 2 * (1 << 27) / graph_us([lambda: x[: 1 << 27].copy_(x[1 << 27:])]) / 1e3   # read + written
    res = dict(commit=os.environ.get("MINI_VLLM_COMMIT"), device=torch.cuda.get_device_name(0),
               copy_gb_per_s=round(copy_gb_s), mean_context=sum(mixed) / B, rows=[])
    equal = [round(sum(mixed) / B)] * B
    for name, seq in (("mixed", mixed), ("equal", equal)):
        cache, meta, q, kv_bytes = step(seq, g)
        o = torch.empty_like(q)
        by_len = sorted(range(B), key=lambda i: -seq[i])
        orders = {"as drawn": list(range(B))} if name == "equal" else {
            "as drawn": list(range(B)), "longest first": by_len, "shortest first": by_len[::-1]}
        runs = [(order, reqs, None) for order, reqs in orders.items()]
        runs += [("as drawn", list(range(B)), cap) for cap in (1024, 512, 256)]   # contexts cut into partitions
        for order, reqs, cap in runs:
            r = torch.tensor(reqs, dtype=torch.int32, device="cuda")
            us = graph_us([lambda: ta.paged_decode_attention(o, q, cache.k[0], cache.v[0], meta.block_tables,
                                                             meta.seq_lens, meta.query_start_loc, r, 0.125, MAX_LEN,
                                                             partition=cap)] * 8)
            row = dict(contexts=name, order=order, partition=cap, us=round(us, 1), gb_per_s=round(kv_bytes / us / 1e3),
                       fraction_of_copy=round(kv_bytes / us / 1e3 / copy_gb_s, 3))
            res["rows"].append(row)
            print(json.dumps(row), flush=True)
        del cache
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    (out / "attn_length_mix.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
