"""H200: in-model GEMV tiling sweep, qkv and o separately, on top of narrow=(4,2048,4), wide=(4,2048,8)."""
import json, os, sys, functools
from pathlib import Path
import torch
ROOT = Path.cwd(); sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_bench as gb
from mini_vllm import SamplingParams, triton_kernels as tk, small_batch as sb

out = Path(os.environ.get("OUT", ".")); res = {}
def save(): (out / "exp4.json").write_text(json.dumps(res, indent=2))
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
measure("head_default")
sb.GEMV_TILING[(1, "narrow")] = dict(block_n=4, block_k=2048, num_warps=4)
sb.GEMV_TILING[(1, "wide")] = dict(block_n=4, block_k=2048, num_warps=8)
measure("base_a"); measure("base_b")
C = lambda bn, bk, w: dict(block_n=bn, block_k=bk, num_warps=w)
orig_qkv = sb.qkv_rope_write
for c in (C(4, 2048, 4), C(2, 1024, 4), C(4, 1024, 4), C(2, 2048, 2), C(4, 2048, 2), C(8, 2048, 4), C(2, 2048, 4), C(4, 1024, 2)):
    sb.qkv_rope_write = functools.partial(orig_qkv, **c)
    measure(f"qkv_bn{c['block_n']}_bk{c['block_k']}_w{c['num_warps']}")
sb.qkv_rope_write = functools.partial(orig_qkv, **C(4, 2048, 4))
for c in (C(2, 1024, 4), C(4, 1024, 4), C(2, 2048, 2), C(4, 2048, 2), C(8, 2048, 4), C(2, 2048, 4), C(4, 1024, 2), C(2, 1024, 2)):
    sb.GEMV_TILING[(1, "narrow")] = c
    measure(f"o_bn{c['block_n']}_bk{c['block_k']}_w{c['num_warps']}")
sb.GEMV_TILING[(1, "narrow")] = C(4, 2048, 4)
for c in (C(2, 2048, 4), C(4, 2048, 4), C(8, 2048, 8), C(4, 1024, 4), C(8, 1024, 8), C(2, 2048, 8)):
    sb.GEMV_TILING[(1, "wide")] = c
    measure(f"wide_bn{c['block_n']}_bk{c['block_k']}_w{c['num_warps']}")
sb.GEMV_TILING[(1, "wide")] = C(4, 2048, 8)
for c in (C(4, 1024, 4), C(8, 1024, 8), C(2, 4096, 4), C(4, 2048, 8)):
    sb.GEMV_TILING[(1, "deep")] = c
    measure(f"deep_bn{c['block_n']}_bk{c['block_k']}_w{c['num_warps']}")
sb.GEMV_TILING[(1, "deep")] = C(4, 2048, 4)
for c in (C(4, 1024, 2), C(2, 1024, 2), C(2, 1024, 4), C(4, 512, 4)):
    sb.GEMV_TILING[(1, "swiglu")] = c
    measure(f"swiglu_bn{c['block_n']}_bk{c['block_k']}_w{c['num_warps']}")
