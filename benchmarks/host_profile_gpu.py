"""cProfile of `LLM(..., async_scheduling=True).generate` on the public workload (default 256 requests, or argv[1]) on a
CUDA GPU: the host side of the overlapped loop (chapter 04k), how many steps took the device path and the host path,
the top functions by own and by cumulative time. TinyLlama-1.1B shape, dummy bf16 weights. From the repo root:
  PYTHONPATH=/tmp/site python3 benchmarks/host_profile_gpu.py [320]
"""
import cProfile, pstats, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, "benchmarks")
import torch
from mini_vllm import LLM, SamplingParams
from workload import public_workload, tinyllama_config_dir
cfg = tinyllama_config_dir(Path(tempfile.mkdtemp()) / "tl")
llm = LLM(cfg, dtype="bfloat16", load_format="dummy", attention_backend="triton", max_num_seqs=256, max_model_len=2048,
          max_num_batched_tokens=16384, async_scheduling=True)
work = public_workload(n=int(sys.argv[1]) if len(sys.argv) > 1 else 256)
prompts = [p for p, _ in work]; params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for _, n in work]
llm.generate(prompts[:8], params[:8], use_tqdm=False)
torch.cuda.synchronize(); t0 = time.perf_counter(); llm.generate(prompts, params, use_tqdm=False); torch.cuda.synchronize()
print("unprofiled s", time.perf_counter() - t0)
eng = llm.llm_engine
import mini_vllm.fast.overlap as ov
counts = {"device": 0, "host": 0}
orig = ov._rows_of
def rows_of(out, last):
    r = orig(out, last); counts["device" if r is not None else "host"] += 1; return r
ov._rows_of = rows_of
pr = cProfile.Profile(); pr.enable(); llm.generate(prompts, params, use_tqdm=False); torch.cuda.synchronize(); pr.disable()
print("steps", counts)
pstats.Stats(pr).sort_stats("tottime").print_stats(22)
pstats.Stats(pr).sort_stats("cumtime").print_stats(22)
