"""H200: the decode kernel without its pre-wait key/value prefetch (block-table pages still read before the wait):
graph replay at contexts 128/384/640 and engine batch-1 ms/token, against the tree's kernel, alternating."""
import json, os, sys, time, importlib.util, tempfile
from pathlib import Path
import torch
ROOT = Path.cwd(); sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_bench as gb
from mini_vllm import SamplingParams, triton_kernels as tk
src = Path(tk.__file__).read_text()
a, b = "n < tl.minimum(end, seq_len - 1), D)", "new = n == seq_len - 1"
assert a in src and b in src
p = Path(tempfile.mkdtemp()) / "tk_nopref.py"
p.write_text(src.replace(a, "n < 0, D)").replace(b, "new = n < end").replace("from .", "from mini_vllm."))
spec = importlib.util.spec_from_file_location("tk_nopref", p); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
kernels = {"prefetch": tk._decode_kernel, "no_prefetch": m._decode_kernel}
out = Path(os.environ.get("OUT", ".")); res = {}
llm = gb._engine(None, max_num_seqs=8)
prompt = torch.randint(0, 32000, (128,), generator=torch.Generator().manual_seed(1)).tolist()
run = lambda n: llm.generate([prompt], SamplingParams(temperature=0, max_tokens=n, ignore_eos=True), use_tqdm=False)
r = llm.llm_engine.runner
def ctx(n):
    nb = -(-n // 16)
    r.bt[0].zero_(); r.bt[0, :nb] = torch.arange(1, nb + 1, device="cuda", dtype=torch.int32)
    r.seq_lens[0] = n; r.pos[0] = n - 1; r.slots[0] = r.bt[0, (n - 1) // 16] * 16 + (n - 1) % 16
for rep in range(2):
    for name, k in kernels.items():
        tk._decode_kernel = k; r._capture(1); run(64)
        t = {}
        for n in (1, 513):
            torch.cuda.synchronize(); t0 = time.perf_counter(); o = run(n); torch.cuda.synchronize(); t[n] = time.perf_counter() - t0
        res.setdefault(f"{name}_engine_us_per_token", []).append(round((t[513] - t[1]) / 512 * 1e6, 1))
        res.setdefault(f"{name}_graph_us", []).append([(ctx(c), round(gb.back_to_back_ms(r.graphs[1], reps=300) * 1e3, 1))[1] for c in (128, 384, 640)])
        res.setdefault(f"{name}_tokens", []).append(o[0].outputs[0].token_ids[:6])
        print(name, {k2: v[-1] for k2, v in res.items() if k2.startswith(name)}, flush=True)
(out / "nopref.json").write_text(json.dumps(res, indent=1))
