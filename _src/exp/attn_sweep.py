"""Batch-1 decode graph (H200): replay time against the context length for decode-attention partition lengths and
tilings; plus the LM head without PDL and argmax. JSON to $OUT/attn_sweep.json."""
import json, os, sys, time
from pathlib import Path
import torch
ROOT = Path.cwd(); sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_bench as gb
from mini_vllm import SamplingParams, triton_kernels as tk, small_batch as sb

out = Path(os.environ.get("OUT", ".")); res = {}
def save(): (out / "attn_sweep.json").write_text(json.dumps(res, indent=2))
llm = gb._engine(None, max_num_seqs=8)
prompt = torch.randint(0, 32000, (128,), generator=torch.Generator().manual_seed(1)).tolist()
llm.generate([prompt], SamplingParams(temperature=0, max_tokens=64, ignore_eos=True), use_tqdm=False)
r = llm.llm_engine.runner
def ctx(n):
    nb = -(-n // 16)
    r.bt[0].zero_(); r.bt[0, :nb] = torch.arange(1, nb + 1, device="cuda", dtype=torch.int32)
    r.seq_lens[0] = n; r.pos[0] = n - 1; r.slots[0] = r.bt[0, (n - 1) // 16] * 16 + (n - 1) % 16
def t(reps=300): return round(gb.back_to_back_ms(r.graphs[1], reps=reps) * 1e3, 1)
CTX = (1, 128, 384, 640, 1024, 2048)
orig_part, orig_tiling = tk.decode_partition, dict(tk.DECODE_TILING)
t0 = time.time()
for bn, w, st in ((64, 2, 4), (64, 4, 2), (128, 4, 3), (128, 4, 2), (128, 8, 2), (256, 8, 2), (256, 4, 2)):
    for part in (64, 128, 256, 512, 2048):
        if part < bn: continue
        key = f"bn{bn}_w{w}_s{st}_part{part}"
        try:
            tk.DECODE_TILING.update(block_n=bn, num_warps=w, num_stages=st)
            tk.decode_partition = lambda num_programs, max_seq_len, num_sms, block_n=64, p=part: min(p, max_seq_len)
            r._capture(1)
            res[key] = {n: (ctx(n), t())[1] for n in CTX}
        except Exception as e: res[key] = repr(e)[:300]
        print(key, res[key], f"{time.time() - t0:.0f}s", flush=True); save()
tk.decode_partition = orig_part; tk.DECODE_TILING.update(orig_tiling)
orig_logits = type(r.model).compute_logits
type(r.model).compute_logits = lambda self, h: sb.gemv(h.contiguous(), self.lm_head.weight, out_dtype=torch.float32, pdl=False)
r._capture(1); res["default_lm_head_no_pdl"] = {n: (ctx(n), t())[1] for n in CTX}
type(r.model).compute_logits = orig_logits
r._capture(1); res["default"] = {n: (ctx(n), t())[1] for n in CTX}
print(res["default_lm_head_no_pdl"], res["default"], flush=True); save()
