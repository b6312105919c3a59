"""Decode-graph buckets (chapter 04h) in the engine, on the offline workloads: `LLM()` with its defaults (bf16 dummy
weights, TinyLlama-1.1B shape) and its buckets chosen three ways: `fastest` (every multiple of 8, timed once
captured, those that a larger one beats dropped: the default), `every8` (every multiple of 8, none dropped),
`every16` (1, 2, 4, 8, then every 16, none dropped: the buckets before). Each setting is an engine of its own in
this process, in the order given (repeat one to see the spread); output tok/s of the public workload (256 requests)
and of the same draw with 320 requests, after a warm-up on the first 8, and the batch sizes of the steps that replayed
a decode graph. From the repo root, on a CUDA GPU:
  python3 benchmarks/bucket_ab.py --out $OUT/buckets [--settings fastest,every16,every8,fastest,every16]
"""
import argparse, collections, gc, json, os, sys, tempfile, time
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent)); sys.path.insert(0, str(HERE))
import torch
import mini_vllm.cuda_graphs as cg
from mini_vllm import LLM, SamplingParams
from workload import public_workload, tinyllama_config_dir

EVERY16 = lambda B: sorted({b for b in [1, 2, 4, 8, *range(16, B + 16, 16)] if b < B} | {B})
SETTINGS = dict(fastest=(cg.graph_buckets, cg.fastest_buckets), every8=(cg.graph_buckets, sorted),
                every16=(EVERY16, sorted))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--settings", default="fastest,every16,every8,fastest,every16")
    a = p.parse_args(argv)
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    cfg = tinyllama_config_dir(Path(tempfile.mkdtemp()) / "tl")
    greedy = lambda n: SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
    rows, orig = [], (cg.graph_buckets, cg.fastest_buckets)
    try:
        for setting in a.settings.split(","):
            cg.graph_buckets, cg.fastest_buckets = SETTINGS[setting]
            t0 = time.perf_counter()
            llm = LLM(cfg, dtype="bfloat16", load_format="dummy")
            runner = llm.llm_engine.runner
            row = dict(setting=setting, startup_s=round(time.perf_counter() - t0, 1), buckets=runner.buckets,
                       replay_us={b: round(t, 1) for b, t in runner.replay_us.items()})
            sizes = collections.Counter()                  # (batch, bucket) of every decode replay
            def counting(g, b):
                def replay():
                    sizes[((runner.replayed or (b,))[0], b)] += 1
                    return g()
                return replay
            runner.graphs = {b: counting(g, b) for b, g in runner.graphs.items()}
            for name, work in (("public", public_workload(256)), ("public320", public_workload(320))):
                llm.generate([q for q, _ in work[:8]], [greedy(n) for _, n in work[:8]], use_tqdm=False)
                sizes.clear()
                torch.cuda.synchronize(); t0 = time.perf_counter()
                llm.generate([q for q, _ in work], [greedy(n) for _, n in work], use_tqdm=False)
                torch.cuda.synchronize(); dt = time.perf_counter() - t0
                row[name] = round(sum(n for _, n in work) / dt)
                row[name + "_padding_rows"] = sum((b - n) * c for (n, b), c in sizes.items())
                by_bucket = collections.Counter()
                for (n, b), c in sizes.items(): by_bucket[b] += c
                row[name + "_replays_by_bucket"] = dict(sorted(by_bucket.items()))
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if not k.endswith("bucket") and k != "replay_us"}), flush=True)
            (out / "bucket_ab.json").write_text(json.dumps(dict(
                commit=os.environ.get("MINI_VLLM_COMMIT"), device=torch.cuda.get_device_name(0), rows=rows), indent=1))
            del llm, runner; gc.collect(); torch.cuda.empty_cache()
    finally:
        cg.graph_buckets, cg.fastest_buckets = orig


if __name__ == "__main__":
    main()
