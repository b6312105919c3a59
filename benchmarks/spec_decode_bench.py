"""Speculative decoding on this CPU (chapter 10): SmolLM2-135M, greedy.

1. One request at a time, each workload (`data/spec_grounded.jsonl`: code edits and answers from a
   passage; `data/spec_plain.jsonl`: open-ended prompts): output tok/s without speculation and with
   each speculative config, acceptance rate, and whether every text equals the one without.
2. Batches of 1 to 64 concurrent requests: tok/s without speculation, with it always on, and with
   its default off switch (`disable_by_batch_size`).

Writes benchmarks/results/spec_decode_cpu.json (chapter 10 reads it). Run it from the repo root on a
quiet machine:  OMP_NUM_THREADS=2 python benchmarks/spec_decode_bench.py
"""
import argparse, json, os, platform, subprocess, sys, tempfile, time
from pathlib import Path

import torch

from mini_vllm import LLM, SamplingParams
from mini_vllm.loading import resolve_model_path
from mini_vllm.spec_decode import SpeculativeConfig, cut_draft, few_row_layouts

HERE = Path(__file__).parent


def load_prompts(tok, name: str) -> list[list[int]]:
    "A workload's prompts, each in the model's chat template, as token ids."
    rows = [json.loads(line) for line in open(HERE / "data" / name, encoding="utf-8")]
    texts = [tok.apply_chat_template([{"role": "user", "content": r["prompt"]}],
                                     add_generation_prompt=True, tokenize=False) for r in rows]
    return [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


def one_at_a_time(engines: dict, prompts, max_tokens: int) -> dict:
    """Each prompt alone, greedy, on each engine in turn (so that a change in the machine's load
    touches them alike): output tokens, seconds, texts, and the spec counters' change."""
    p = SamplingParams(temperature=0, max_tokens=max_tokens)
    before = {name: llm.stats() for name, llm in engines.items()}
    res = {name: dict(tokens=0, seconds=0.0, texts=[]) for name in engines}
    for ids in prompts:
        for name, llm in engines.items():
            llm.reset_prefix_cache()                    # every engine computes every prompt
            t = time.perf_counter()
            out = llm.generate([ids], p, use_tqdm=False)[0].outputs[0]
            r = res[name]
            r["seconds"] += time.perf_counter() - t
            r["tokens"] += len(out.token_ids)
            r["texts"].append(out.text)
    for name, llm in engines.items():
        r, s = res[name], llm.stats()
        r["tok_s"] = r["tokens"] / r["seconds"]
        r.update({k: s[k] - before[name][k] for k in s if k.startswith("spec_decode_num")})
    return res


def concurrent(llm, prompts, n: int, max_tokens: int) -> dict:
    "n requests at once (the prompts repeated), greedy, EOS ignored: output tok/s."
    batch = [prompts[i % len(prompts)] for i in range(n)]
    p = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    llm.reset_prefix_cache()
    t = time.perf_counter()
    outs = llm.generate(batch, p, use_tqdm=False)
    dt = time.perf_counter() - t
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    return dict(n=n, tokens=tokens, seconds=dt, tok_s=tokens / dt,
                token_ids=[o.outputs[0].token_ids for o in outs])


def engine(spec, **kw):
    return LLM(speculative_config=spec, kv_cache_memory_bytes=2**29, **kw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, nargs="+", default=[4, 8], help="num_speculative_tokens")
    ap.add_argument("--lookup", type=int, nargs=2, default=[2, 4], metavar=("MIN", "MAX"),
                    help="prompt_lookup_min and prompt_lookup_max")
    ap.add_argument("--fixed", action="store_true",
                    help="also each k with a fixed draft length (no `double_kept` cap)")
    ap.add_argument("--draft-layers", type=int, nargs="*", default=[],
                    help="draft models cut from SmolLM2 (cut_draft): their numbers of layers")
    ap.add_argument("--draft-k", type=int, default=4, help="num_speculative_tokens of the drafts")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4, 8, 16, 64])
    ap.add_argument("--batch-max-tokens", type=int, default=64)
    ap.add_argument("--skip-batches", action="store_true")
    ap.add_argument("--workloads", nargs="+", default=["grounded", "plain"])
    ap.add_argument("--out", default=str(HERE / "results" / "spec_decode_cpu.json"))
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", os.cpu_count())))
    ngram = lambda k, **kw: dict(method="ngram", num_speculative_tokens=k,
                                 prompt_lookup_min=args.lookup[0], prompt_lookup_max=args.lookup[1],
                                 **kw)
    res = dict(command=" ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
               machine=dict(cpu=platform.processor() or platform.machine(),
                            cores=os.cpu_count(), threads=torch.get_num_threads(),
                            load_before=os.getloadavg()),
               commit=subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True).stdout.strip(),
               model="SmolLM2-135M-Instruct", one_at_a_time={}, batches={},
               configs={})
    base = engine(None)
    tok = base.get_tokenizer()
    workloads = {w: load_prompts(tok, f"spec_{w}.jsonl") for w in ("grounded", "plain")}
    runs = {w: workloads[w] for w in args.workloads}
    base.generate([workloads["plain"][0]], SamplingParams(max_tokens=8), use_tqdm=False)  # warm
    configs = {"none": None, "none, layouts": None}
    for k in args.k:
        configs[f"ngram k={k}"] = ngram(k)
        if args.fixed: configs[f"ngram k={k}, fixed"] = ngram(k)
    tmp = Path(tempfile.mkdtemp())
    for n in args.draft_layers:
        configs[f"draft {n} layers"] = dict(method="draft_model", num_speculative_tokens=args.draft_k,
                                            model=str(cut_draft(resolve_model_path(None),
                                                                tmp / f"draft{n}", n)))
    engines = {name: base if name == "none" else engine(spec) for name, spec in configs.items()}
    for name, llm in engines.items():
        if name.endswith(", fixed"): llm.llm_engine.core.runner.lookahead = lambda kept: None
    few_row_layouts(engines["none, layouts"].llm_engine.core.model)   # a speculating engine's
    res["configs"] = {name: spec and {k: v for k, v in spec.items() if k != "model"}
                      for name, spec in configs.items()}
    for llm in engines.values():
        llm.generate([workloads["plain"][0]], SamplingParams(max_tokens=8), use_tqdm=False)
    for w, prompts in runs.items():
        rows = one_at_a_time(engines, prompts, args.max_tokens)
        ref = rows["none"]
        for name, r in rows.items():
            if name != "none":
                r["same_text"] = r["texts"] == ref["texts"]
                r["speedup"] = r["tok_s"] / ref["tok_s"]
                r["speedup_same_layouts"] = r["tok_s"] / rows["none, layouts"]["tok_s"]
            if configs[name] is not None:
                r["acceptance_rate"] = r["spec_decode_num_accepted_tokens"] / max(
                    r["spec_decode_num_draft_tokens"], 1)
                r["mean_accepted_length"] = 1 + r["spec_decode_num_accepted_tokens"] / max(
                    r["spec_decode_num_drafts"], 1)
            print(f"{w:9s} {name:10s} {r['tok_s']:6.1f} tok/s "
                  + (f"x{r['speedup']:.2f} acceptance {r['acceptance_rate']:.2f} "
                     f"tokens/step {r['mean_accepted_length']:.2f} same text {r['same_text']}"
                     if configs[name] is not None else ""), flush=True)
        res["one_at_a_time"][w] = rows
    for name, llm in engines.items():
        if llm is not base: llm.shutdown()
    del engines
    if not args.skip_batches:
        k = args.k[0]
        default_off = SpeculativeConfig(**ngram(k)).disable_by_batch_size
        layouts = engine(None)
        few_row_layouts(layouts.llm_engine.core.model)
        engines = {"none": base, "none, layouts": layouts,
                   "always": engine(ngram(k, disable_by_batch_size=None)),
                   f"off at {default_off}": engine(ngram(k))}
        prompts = workloads["grounded"] + workloads["plain"]
        for n in args.batches:
            row = {name: concurrent(llm, prompts, n, args.batch_max_tokens)
                   for name, llm in engines.items()}
            same = all(r["token_ids"] == row["none"]["token_ids"] for r in row.values())
            for r in row.values(): del r["token_ids"]
            res["batches"][n] = dict(same_tokens=same, **row)
            rates = "  ".join(f"{name} {r['tok_s']:6.1f}" for name, r in row.items())
            print(f"batch {n:3d} {rates}  same tokens {same}", flush=True)
        res["batch_config"] = dict(k=k, disable_by_batch_size=default_off,
                                   max_tokens=args.batch_max_tokens)
    res["machine"]["load_after"] = os.getloadavg()
    for w in res["one_at_a_time"].values():
        for r in w.values(): r.pop("texts")
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print("wrote", args.out)
    os._exit(0)


if __name__ == "__main__":
    main()
