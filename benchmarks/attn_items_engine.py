"""Chapter 04g1's work items in the engine, on and off: `LLM()` with its defaults (bf16 dummy weights, TinyLlama-1.1B
shape) with `triton_attention.ITEMS_CHUNK` set per engine (0: one program per context at full batches, as before the
items). Each setting is an engine of its own in this process, in the order given (repeat one to see the spread).
Output tok/s of the public workload (256 requests) and of 320 requests drawn the same way, after a warm-up on the
first 8; the greedy tokens of the first 32 requests compared with the first setting's. From the repo root, on a CUDA
GPU:
  python3 benchmarks/attn_items_engine.py --out $OUT/items_engine [--chunks 0,1024,0,1024]
"""
import argparse, gc, json, os, sys, tempfile, time
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent)); sys.path.insert(0, str(HERE))
import torch
import mini_vllm.fast.triton_attention as ta
from mini_vllm import LLM, SamplingParams


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    p.add_argument("--chunks", default="0,1024,0,1024")
    a = p.parse_args(argv)
    from workload import public_workload, tinyllama_config_dir
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    cfg = tinyllama_config_dir(Path(tempfile.mkdtemp()) / "tl")
    greedy = lambda n: SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
    rows, first = [], None
    for chunk in map(int, a.chunks.split(",")):
        ta.ITEMS_CHUNK = chunk
        llm = LLM(cfg, dtype="bfloat16", load_format="dummy")
        row = dict(items_chunk=chunk)
        for name, work in (("public", public_workload(256)), ("public320", public_workload(320))):
            llm.generate([q for q, _ in work[:8]], [greedy(n) for _, n in work[:8]], use_tqdm=False)
            torch.cuda.synchronize(); t0 = time.perf_counter()
            res = llm.generate([q for q, _ in work], [greedy(n) for _, n in work], use_tqdm=False)
            torch.cuda.synchronize(); dt = time.perf_counter() - t0
            row[name] = round(sum(n for _, n in work) / dt)
            if name == "public":
                toks = [r.outputs[0].token_ids for r in res[:32]]
                first = first or toks
                same = sum(x == y for a_, b_ in zip(first, toks) for x, y in zip(a_, b_))
                row["tokens_equal_to_first_setting"] = round(same / sum(len(t) for t in first), 4)
        rows.append(row)
        print(json.dumps(row), flush=True)
        (out / "attn_items_engine.json").write_text(json.dumps(dict(
            commit=os.environ.get("MINI_VLLM_COMMIT"), device=torch.cuda.get_device_name(0), rows=rows), indent=1))
        del llm; gc.collect(); torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
