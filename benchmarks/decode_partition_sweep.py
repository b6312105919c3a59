"""Decode attention's partition length and tiling (chapter 04g1) in the engine, on the offline workloads: `LLM()`
with its defaults (bf16 dummy weights, TinyLlama-1.1B shape), its `decode_partition` capped at each length asked for,
so that a long context is walked by several programs (merged by the last to finish) instead of one; `whole` is the
rule as it is (a whole context per program once requests x KV heads fill the GPU twice). A setting may also change
DECODE_TILING's entries: `whole:num_warps=4:block_n=32`. Each setting is an engine of its own in this process, in
the order given (repeat one to see the spread); output tok/s of the public workload (256 requests) and of the same
draw with 320 requests, after a warm-up on the first 8. Full batches now go through 04g1's work items; the sweep
switches them off (`ITEMS_CHUNK = 0`), so that the partition rule is what it measures. From the repo root, on a CUDA
GPU:
  python3 benchmarks/decode_partition_sweep.py --out $OUT/partition [--caps whole,512,whole,512,1024,256]
"""
import argparse, gc, json, os, sys, tempfile, time
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent)); sys.path.insert(0, str(HERE))
import torch
import mini_vllm.fast.triton_attention as ta
from mini_vllm import LLM, SamplingParams
from workload import public_workload, tinyllama_config_dir


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--caps", default="whole,512,whole,512,1024,256")
    a = p.parse_args(argv)
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    cfg = tinyllama_config_dir(Path(tempfile.mkdtemp()) / "tl")
    rule, tiling, rows = ta.decode_partition, dict(ta.DECODE_TILING), []
    ta.ITEMS_CHUNK = 0
    greedy = lambda n: SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
    for setting in a.caps.split(","):
        cap, *over = setting.split(":")
        ta.DECODE_TILING = {**tiling, **{k: int(v) for k, v in (o.split("=") for o in over)}}
        ta.decode_partition = rule if cap == "whole" else (
            lambda n, L, sms, bn=64, c=int(cap): min(rule(n, L, sms, bn), c))
        llm = LLM(cfg, dtype="bfloat16", load_format="dummy")
        row = dict(cap=cap, tiling=ta.DECODE_TILING)
        for name, work in (("public", public_workload(256)), ("public320", public_workload(320))):
            llm.generate([q for q, _ in work[:8]], [greedy(n) for _, n in work[:8]], use_tqdm=False)
            torch.cuda.synchronize(); t0 = time.perf_counter()
            llm.generate([q for q, _ in work], [greedy(n) for _, n in work], use_tqdm=False)
            torch.cuda.synchronize(); dt = time.perf_counter() - t0
            row[name] = round(sum(n for _, n in work) / dt)
        rows.append(row)
        print(json.dumps(row), flush=True)
        (out / "decode_partition_sweep.json").write_text(json.dumps(dict(
            commit=os.environ.get("MINI_VLLM_COMMIT"), device=torch.cuda.get_device_name(0), rows=rows), indent=1))
        del llm; gc.collect(); torch.cuda.empty_cache()
    ta.decode_partition, ta.DECODE_TILING = rule, tiling


if __name__ == "__main__":
    main()
