"""`LLM()` with its defaults but `max_num_seqs`, on the public workload (256 requests) and draws of more requests
from its distribution (320 by default): output tok/s for each setting, one engine per setting in the order given, in
one process, and how long each engine took to build. As `vllm_side_by_side.py` times them: a warm-up on 8 requests,
then the workloads in the order given (draws of different sizes share no prompt). TinyLlama-1.1B shape, dummy bf16.
From the repo root:
  PYTHONPATH=/tmp/site:$PWD python3 benchmarks/experiments/max_num_seqs_sweep.py --seqs 512,256,512 [--workloads 256,320,640]
"""
import argparse, json, sys, tempfile, time
from pathlib import Path
import torch
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent), str(HERE)]   # repo root, benchmarks/, here
from workload import public_workload, tinyllama_config_dir  # noqa: E402
from mini_vllm import LLM, SamplingParams  # noqa: E402


def main(seqs: list[int], sizes: list[int]):
    cfg = tinyllama_config_dir(Path(tempfile.mkdtemp()) / "tl")
    greedy = lambda n: SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
    res = {}
    for s in seqs:
        t = time.perf_counter()
        llm = LLM(cfg, dtype="bfloat16", load_format="dummy", max_num_seqs=s)
        res.setdefault(f"seqs{s}_build_s", []).append(round(time.perf_counter() - t, 1))
        first = public_workload(256)[:8]
        llm.generate([p for p, _ in first], [greedy(n) for _, n in first], use_tqdm=False)
        for n in sizes:
            work = public_workload(n)
            torch.cuda.synchronize(); t = time.perf_counter()
            llm.generate([p for p, _ in work], [greedy(m) for _, m in work], use_tqdm=False); torch.cuda.synchronize()
            res.setdefault(f"seqs{s}_n{n}", []).append(round(sum(m for _, m in work) / (time.perf_counter() - t)))
            print(s, n, res[f"seqs{s}_n{n}"][-1], flush=True)
        del llm; torch.cuda.empty_cache()
    print(json.dumps(res))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seqs", default="512,256,512", help="max_num_seqs of each engine, in order")
    p.add_argument("--workloads", default="256,320", help="requests of each workload, in order")
    a = p.parse_args()
    main([int(x) for x in a.seqs.split(",")], [int(x) for x in a.workloads.split(",")])
