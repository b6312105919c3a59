"""Tensor parallelism (chapter 09) on two GPUs of one machine: what splitting a model costs and what it buys.

For each model shape (TinyLlama-1.1B, and Llama-3-8B, the size where splitting pays), dummy bf16 weights, the
Triton kernels with CUDA graphs, default engine settings otherwise, one engine per run (--runs): `tp1` (one GPU, its
default loop: one step ahead), `tp1_sync` (one GPU one step at a time, `async_scheduling=False`: the only loop of
several ranks, which follow rank 0 step by step) and `tp2` (two GPUs); for each:
  batch1   batch-1 decode ms/token: 128-token prompt, 512 tokens, greedy
  thru     output tok/s on the public workload (256 requests, prompt/output lengths U[100, 1024], EOS ignored)
  agree    bf16 greedy agreement of 2 ranks with 1: 16 prompts x 128 tokens, tokens equal before the first difference;
           only for `tinyllama_weights` (TinyLlama's shape with random weights saved once and loaded by both engines:
           with dummy weights each rank draws its own)
  memory   KV-cache capacity each engine found room for (tokens), and the weight bytes each GPU holds
Writes tp_bench.json into --out (rewritten after every measurement). Run from the repo root on a 2-GPU machine:
  python benchmarks/tp_bench.py --out $OUT [--models tinyllama,llama3_8b] [--sections batch1,thru,agree]
      [--runs tp1,tp1_sync,tp2]
"""
import argparse, gc, json, os, sys, tempfile, time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "benchmarks"))

from workload import LLAMA3_8B_CONFIG, TINYLLAMA_CONFIG, public_workload, tinyllama_config_dir, workload_stats  # noqa

MODELS = {"tinyllama": TINYLLAMA_CONFIG, "llama3_8b": LLAMA3_8B_CONFIG, "tinyllama_weights": TINYLLAMA_CONFIG}
RUNS = {"tp1": dict(tensor_parallel_size=1), "tp1_sync": dict(tensor_parallel_size=1, async_scheduling=False),
        "tp2": dict(tensor_parallel_size=2)}


def model_dir(name):
    "A model folder: config only (dummy weights), or for `tinyllama_weights` a checkpoint of random weights."
    path = Path(tempfile.mkdtemp()) / name
    if name != "tinyllama_weights": return tinyllama_config_dir(path, config=MODELS[name]), "dummy"
    from mini_vllm.loading import save_tiny_model
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "vocab_size", "max_position_embeddings")
    return save_tiny_model(path, "llama", seed=0, head_dim=64, **{k: TINYLLAMA_CONFIG[k] for k in keys}), "auto"
RESULTS: dict = {}


def engine(cfg_dir, load_format, **kw):
    from mini_vllm import LLM
    base = dict(dtype="bfloat16", load_format=load_format, attention_backend="triton", max_num_seqs=256,
                max_model_len=2048)
    return LLM(cfg_dir, **{**base, **kw})


def timed(fn):
    torch.cuda.synchronize(); t0 = time.perf_counter(); r = fn(); torch.cuda.synchronize()
    return time.perf_counter() - t0, r


def measure(name, cfg_dir, load_format, run, sections, args) -> dict:
    from mini_vllm import SamplingParams
    res = {}
    t0 = time.perf_counter()
    llm = engine(cfg_dir, load_format, **RUNS[run])
    eng = llm.llm_engine
    res["init_seconds"] = time.perf_counter() - t0
    core = eng.core
    res["memory"] = dict(kv_cache_tokens=core.kv.num_blocks * core.kv.block_size, weight_bytes_rank0=core.weight_bytes,
                         runner=type(core.runner).__name__, core=type(core).__name__,
                         async_scheduling=eng.config.async_scheduling)
    try:
        g = torch.Generator().manual_seed(1)
        if "batch1" in sections:
            prompt = torch.randint(0, 32000, (128,), generator=g).tolist()
            run = lambda n: llm.generate([prompt], SamplingParams(temperature=0, max_tokens=n, ignore_eos=True),
                                         use_tqdm=False)
            run(64); run(1)                                            # warm-up; the prompt then comes from the cache
            t1, _ = timed(lambda: run(1))
            t513, _ = timed(lambda: run(513))
            res["batch1"] = dict(ms_per_token=(t513 - t1) / 512 * 1e3, prefill_plus_first_token_ms=t1 * 1e3)
            print(f"  {name} {run}: batch 1 {res['batch1']['ms_per_token']:.3f} ms/token", flush=True)
        if "agree" in sections and load_format != "dummy":               # dummy weights: each rank draws its own
            prompts = [torch.randint(0, 32000, (64,), generator=g).tolist() for _ in range(16)]
            outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=128, ignore_eos=True), use_tqdm=False)
            res["agree_tokens"] = [o.outputs[0].token_ids for o in outs]
        if "thru" in sections:
            work = public_workload(n=args.num_requests)
            prompts, params = [p for p, _ in work], [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
                                                     for _, n in work]
            llm.generate(prompts[:8], params[:8], use_tqdm=False)      # warm-up: every kernel compiled
            dt, outs = timed(lambda: llm.generate(prompts, params, use_tqdm=False))
            n_out = sum(len(o.outputs[0].token_ids) for o in outs)
            assert n_out == sum(n for _, n in work), "every request must produce exactly its output length"
            res["thru"] = dict(workload=workload_stats(work), seconds=dt, output_tokens=n_out,
                               output_tok_per_s=n_out / dt, num_preemptions=llm.stats()["num_preemptions"])
            print(f"  {name} {run}: {n_out / dt:,.0f} output tok/s ({dt:.2f} s)", flush=True)
    finally:
        llm.shutdown()
        del llm, eng, core; gc.collect(); torch.cuda.empty_cache()
    return res


def agreement(a, b) -> dict:
    "Tokens equal before each pair's first difference, over all pairs."
    same = [next((i for i, (x, y) in enumerate(zip(p, q)) if x != y), len(p)) for p, q in zip(a, b)]
    return dict(sequences=len(a), tokens_each=len(a[0]), identical_sequences=sum(s == len(p) for s, p in zip(same, a)),
                prefix_tokens_equal=sum(same), tokens=sum(map(len, a)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    p.add_argument("--models", default="tinyllama,llama3_8b")
    p.add_argument("--sections", default="batch1,agree,thru")
    p.add_argument("--num-requests", type=int, default=256)
    p.add_argument("--runs", default=",".join(RUNS), help=f"engines per model, in order, from {','.join(RUNS)}")
    args = p.parse_args(argv)
    if bad := [r for r in args.runs.split(",") if r not in RUNS]: p.error(f"unknown --runs {bad}")
    out = Path(args.out); out.mkdir(parents=True, exist_ok=True)
    sections = set(args.sections.split(","))
    RESULTS["env"] = dict(gpus=[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
                          torch=torch.__version__, commit=os.environ.get("MINI_VLLM_COMMIT", "unknown"),
                          command=" ".join(sys.argv), nccl=".".join(map(str, torch.cuda.nccl.version())),
                          NCCL_NVLS_ENABLE=os.environ.get("NCCL_NVLS_ENABLE"))
    for name in args.models.split(","):
        cfg_dir, load_format = model_dir(name)
        RESULTS[name] = {}
        for run in args.runs.split(","):
            try: RESULTS[name][run] = measure(name, cfg_dir, load_format, run, sections, args)
            except Exception as e:
                import traceback; traceback.print_exc()
                RESULTS[name][run] = dict(error=f"{type(e).__name__}: {e}")
            (out / "tp_bench.json").write_text(json.dumps(RESULTS, indent=1))
        tokens = {run: r.pop("agree_tokens") for run, r in RESULTS[name].items() if "agree_tokens" in r}
        one = tokens.get("tp1", tokens.get("tp1_sync"))                 # greedy tokens: the loop changes none
        if one is not None and "tp2" in tokens:
            RESULTS[name]["agreement_tp2_vs_tp1"] = agreement(one, tokens["tp2"])
            print(f"  {name}: agreement {RESULTS[name]['agreement_tp2_vs_tp1']}", flush=True)
        (out / "tp_bench.json").write_text(json.dumps(RESULTS, indent=1))


if __name__ == "__main__":
    main()
