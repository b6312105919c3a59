# Measured against HEAD 5551416's kernel: make _src/exp/tk_head.py with `git show 5551416:mini_vllm/triton_kernels.py > _src/exp/tk_head.py`.
"""H200: decode attention at 256 requests x 1k context, bandwidth: HEAD's kernel, this tree's with and without the
ONE_PART constexpr. Median of 5 x 100 back-to-back launches."""
import json, os, sys, importlib.util, tempfile
from pathlib import Path
import torch
ROOT = Path.cwd(); sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_bench as gb
from mini_vllm import triton_kernels as tk
def load(name, text):
    p = Path(tempfile.mkdtemp()) / f"{name}.py"; p.write_text(text.replace("from .", "from mini_vllm."))
    spec = importlib.util.spec_from_file_location(name, p); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
src = Path(tk.__file__).read_text()
mods = {"head": load("tk_head", (ROOT / "_src/exp/tk_head.py").read_text()), "new": tk,
        "new_no_onepart": load("tk_noone", src.replace("ONE_PART=parts == 1,", "ONE_PART=False,"))}
cache, meta, q, k, v, seq, ql = gb._random_step(256, 1024, 1024, lambda i: 1)
kvb = sum(seq) * 4 * 64 * 2 * 2
o, reqs = torch.empty_like(q), torch.arange(256, dtype=torch.int32, device="cuda")
res = {}
for rep in range(2):
    for name, m in mods.items():
        for bn, w, st in ((64, 2, 4), (128, 2, 3), (64, 4, 2), (128, 2, 4)):
            f = lambda: m.paged_decode_attention(o, q, cache.k[0], cache.v[0], meta.block_tables, meta.seq_lens, meta.query_start_loc,
                                                 reqs, 0.125, 1024, block_n=bn, num_warps=w, num_stages=st)
            ms = sorted(gb.back_to_back_ms(f, reps=100) for _ in range(5))[2]
            res.setdefault(f"{name}_bn{bn}_w{w}_s{st}", []).append(round(kvb / ms / 1e6))
print(json.dumps(res)); (Path(os.environ["OUT"]) / "bw.json").write_text(json.dumps(res))
