"The persistent layer kernel against 04i's kernels on a tiny Llama: hidden states and the K/V cache (CPU: TRITON_INTERPRET=1)."
import sys, time, tempfile, torch
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from mini_vllm.small_batch import use_small_batch_kernels
from mini_vllm.triton_kernels import use_triton_kernels, TritonPagedAttention
from mini_vllm.loading import save_tiny_model
from mini_vllm.model import load_model
from mini_vllm.paged_attention import AttentionMetadata, PagedKVCache
import persistent_layer as pd
DEV = "cuda" if torch.cuda.is_available() else "cpu"
import os
dt = getattr(torch, os.environ.get("PT_DTYPE", "bfloat16" if DEV == "cuda" else "float32"))
tmp = Path(tempfile.mkdtemp())
kw = dict(hidden_size=2048, intermediate_size=5632, num_attention_heads=32, num_key_value_heads=4, head_dim=64,
          num_hidden_layers=2, vocab_size=32000, max_position_embeddings=2048) if DEV == "cuda" else {}
for extra in ({}, dict(attention_bias=True, mlp_bias=True)):
    folder = save_tiny_model(tmp/f"w{len(extra)}", "llama", **kw, **extra)
    model = use_small_batch_kernels(use_triton_kernels(load_model(folder, dtype=str(dt).split(".")[1], device=DEV)))
    cfg = model.config
    bs = 16 if DEV == "cuda" else 4
    nblk = 19
    cache = PagedKVCache.allocate(cfg, 8 * nblk + 1, bs, dt, DEV)
    torch.manual_seed(0)
    cache.k.normal_(); cache.v.normal_()
    P = pd.PersistentLayers(model)
    for M in (1, 2):
        seq = torch.randint(1, nblk * bs, (M,)).tolist()
        meta = AttentionMetadata.build([1] * M, seq, [list(range(i * nblk, i * nblk + nblk)) for i in range(M)], bs, DEV)
        ids = torch.randint(0, cfg.vocab_size, (M,), device=DEV)
        k0, v0 = cache.k.clone(), cache.v.clone()
        ref = model.model(ids, meta.positions, TritonPagedAttention(cache, meta, max_seq_len=nblk * bs))
        k1, v1 = cache.k.clone(), cache.v.clone()
        cache.k.copy_(k0); cache.v.copy_(v0)
        h = model.model.embed_tokens(ids)
        P.forward(model, h, meta.positions, TritonPagedAttention(cache, meta), nblk * bs)
        out = model.model.norm(h)
        err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
        kerr = (cache.k - k1).abs().max().item()
        print(extra, "M", M, "rel err", err, "cache err", kerr, flush=True)
        assert err < (2e-2 if dt != torch.float32 else 1e-4) and kerr <= 1e-2 * k1.abs().max().item()
