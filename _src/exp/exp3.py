"""H200: the batch-1 decode graph under GEMV tilings (in the model, not in chains), the LM head through cuBLAS, and
the decode kernel resetting its counter with a plain store. Graph replay us at contexts 384 and 640; JSON to $OUT."""
import json, os, sys, time
from pathlib import Path
import torch
ROOT = Path.cwd(); sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_bench as gb
from mini_vllm import SamplingParams, triton_kernels as tk, small_batch as sb

out = Path(os.environ.get("OUT", ".")); res = {}
def save(): (out / "exp3.json").write_text(json.dumps(res, indent=2))
llm = gb._engine(None, max_num_seqs=8)
prompt = torch.randint(0, 32000, (128,), generator=torch.Generator().manual_seed(1)).tolist()
llm.generate([prompt], SamplingParams(temperature=0, max_tokens=64, ignore_eos=True), use_tqdm=False)
r = llm.llm_engine.runner
def ctx(n):
    nb = -(-n // 16)
    r.bt[0].zero_(); r.bt[0, :nb] = torch.arange(1, nb + 1, device="cuda", dtype=torch.int32)
    r.seq_lens[0] = n; r.pos[0] = n - 1; r.slots[0] = r.bt[0, (n - 1) // 16] * 16 + (n - 1) % 16
def t(reps=300): return round(gb.back_to_back_ms(r.graphs[1], reps=reps) * 1e3, 1)
def measure(key):
    try:
        r._capture(1); res[key] = [(ctx(n), t())[1] for n in (384, 640)]
    except Exception as e: res[key] = repr(e)[:300]
    print(key, res[key], flush=True); save()

measure("base_1"); measure("base_2")
T0 = {k: dict(v) for k, v in sb.GEMV_TILING.items()}
cands = {"narrow": [dict(block_n=4, block_k=2048, num_warps=8), dict(block_n=2, block_k=2048, num_warps=4),
                    dict(block_n=8, block_k=2048, num_warps=8), dict(block_n=4, block_k=2048, num_warps=4),
                    dict(block_n=2, block_k=1024, num_warps=4)],
         "swiglu": [dict(block_n=4, block_k=2048, num_warps=8), dict(block_n=2, block_k=2048, num_warps=4),
                    dict(block_n=2, block_k=2048, num_warps=8), dict(block_n=8, block_k=1024, num_warps=8)],
         "deep": [dict(block_n=2, block_k=2048, num_warps=4), dict(block_n=2, block_k=8192, num_warps=8),
                  dict(block_n=4, block_k=4096, num_warps=8), dict(block_n=1, block_k=8192, num_warps=8)],
         "wide": [dict(block_n=8, block_k=128, num_warps=4), dict(block_n=16, block_k=64, num_warps=4),
                  dict(block_n=4, block_k=256, num_warps=4), dict(block_n=8, block_k=256, num_warps=8),
                  dict(block_n=4, block_k=2048, num_warps=8)]}
for kind, cs in cands.items():
    for c in cs:
        sb.GEMV_TILING[(1, kind)] = c
        measure(f"{kind}_bn{c['block_n']}_bk{c['block_k']}_w{c['num_warps']}")
    sb.GEMV_TILING[(1, kind)] = T0[(1, kind)]
measure("base_3")
orig_logits = type(r.model).compute_logits
type(r.model).compute_logits = lambda self, h: torch.mm(h, self.lm_head.weight.t()).float()
measure("lm_head_cublas")
type(r.model).compute_logits = orig_logits
tk.DECODE_TILING.update(block_n=128, num_warps=8, num_stages=1)
orig_part = tk.decode_partition
tk.decode_partition = lambda num_programs, max_seq_len, num_sms, block_n=64: max(block_n, orig_part(num_programs, max_seq_len, num_sms, block_n))
measure("attn_bn128_w8_s1")
tk.DECODE_TILING.update(block_n=64, num_warps=2, num_stages=4); tk.decode_partition = orig_part
src = Path(tk.__file__).read_text()
assert "tl.atomic_xchg(count_ptr + b * HKV + kvh, 0)" in src
ns = {}
import importlib.util, tempfile
p = Path(tempfile.mkdtemp()) / "tk_store_reset.py"
p.write_text(src.replace("tl.atomic_xchg(count_ptr + b * HKV + kvh, 0)", "tl.store(count_ptr + b * HKV + kvh, 0)").replace("from .", "from mini_vllm."))
spec = importlib.util.spec_from_file_location("tk_store_reset", p); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
orig_kernel = tk._decode_kernel
tk._decode_kernel = m._decode_kernel
cache, meta, q, k, v, seq, ql = gb._random_step(3, 1, 2048, lambda i: 1)
from mini_vllm.paged_attention import PagedKVCache, TorchPagedAttention
ref = TorchPagedAttention(PagedKVCache(cache.k.clone(), cache.v.clone()), meta)(0, q, k, v)
res["store_reset_err"] = [gb.rel_err(tk.TritonPagedAttention(cache, meta)(0, q, k, v), ref) for _ in range(3)]
measure("attn_store_reset")
tk._decode_kernel = orig_kernel
measure("base_4")
