"""Batch-1 decode graph on an H200: where does the time go? Replays the bucket-1 graph with a realistic context and
re-captures it with parts switched off. Also times argmax candidates. Writes JSON to $OUT/ablate.json."""
import json, os, sys, time
from pathlib import Path
import torch
ROOT = Path.cwd(); sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_bench as gb
from mini_vllm import SamplingParams, triton_kernels as tk, small_batch as sb
from mini_vllm.triton_kernels import triton, tl

out = Path(os.environ.get("OUT", ".")); res = {}
def save(): (out / "ablate.json").write_text(json.dumps(res, indent=2))
llm = gb._engine(None, max_num_seqs=8)
g = torch.Generator().manual_seed(1)
prompt = torch.randint(0, 32000, (128,), generator=g).tolist()
llm.generate([prompt], SamplingParams(temperature=0, max_tokens=64, ignore_eos=True), use_tqdm=False)
r = llm.llm_engine.runner
def ctx(n):
    nb = -(-n // 16)
    r.bt[0].zero_(); r.bt[0, :nb] = torch.arange(1, nb + 1, device="cuda", dtype=torch.int32)
    r.seq_lens[0] = n; r.pos[0] = n - 1; r.slots[0] = r.bt[0, (n - 1) // 16] * 16 + (n - 1) % 16
def t(reps=400): return gb.back_to_back_ms(r.graphs[1], reps=reps) * 1e3
for n in (1, 128, 384, 640, 1024, 2048):
    ctx(n); res[f"full_ctx{n}_us"] = t()
print(res, flush=True); save()
ctx(384)
orig_attend, orig_logits, pdl0 = tk.TritonPagedAttention._attend, type(r.model).compute_logits, tk.PDL
variants = {
    "attn_no_pdl": lambda: setattr(tk.TritonPagedAttention, "_attend", lambda self, l, q, o, pdl=False: orig_attend(self, l, q, o, False)),
    "attn_skipped": lambda: setattr(tk.TritonPagedAttention, "_attend", lambda self, l, q, o, pdl=False: o),
    "lm_head_skipped": lambda: setattr(type(r.model), "compute_logits", lambda self, h: r.out[:h.shape[0]]),
    "no_pdl_at_all": lambda: setattr(tk, "PDL", False),
}
for name, patch in variants.items():
    try:
        patch(); r._capture(1); res[f"{name}_ctx384_us"] = t()
    except Exception as e: res[name] = repr(e)
    finally:
        tk.TritonPagedAttention._attend, tk.PDL = orig_attend, pdl0
        type(r.model).compute_logits = orig_logits
    print(name, res.get(f"{name}_ctx384_us"), flush=True); save()
r._capture(1); res["full_again_ctx384_us"] = t()

# argmax of one row of 32000 fp32 logits
x = torch.randn(1, 32000, device="cuda")
@triton.jit
def _argmax1(x_ptr, out_ptr, V, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + tl.program_id(0) * V + i, mask=i < V, other=float("-inf"))
    tl.store(out_ptr + tl.program_id(0), tl.argmax(v, 0))
o = torch.empty(1, dtype=torch.int32, device="cuda")
for w in (4, 8, 16, 32):
    try:
        res[f"argmax_triton_1prog_w{w}_us"] = gb.graph_us([lambda: _argmax1[(1,)](x, o, 32000, BLOCK=32768, num_warps=w)] * 20)
        assert o.item() == x.argmax().item()
    except Exception as e: res[f"argmax_triton_1prog_w{w}"] = repr(e)[:300]
res["argmax_torch_us"] = gb.graph_us([lambda: x.argmax(-1)] * 20)
res["max_torch_us"] = gb.graph_us([lambda: x.max(-1)] * 20)
print(res, flush=True); save()
