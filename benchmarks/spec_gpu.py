"""Speculative decoding (chapter 10) on a GPU, in one run, through CUDA graphs (the GPU default):

  correct  a tiny random Llama in fp32: greedy with prompt lookup, a noisy draft model and the target
           as its own draft, equal to transformers token for token; the most rows a decode graph
           replayed for a step with drafts; a seeded sampled request repeats
  cost     TinyLlama-1.1B's shape (random weights, bf16) and SmolLM2-135M's: one request's forward
           over 1, 2, 3, 5, 9, 17 and 33 tokens after a 300-token context, laid out as the runner
           lays out drafts (a decode row each), graphs replayed: what checking k drafts costs; with
           04i's fused kernels up to 2 rows (the default) and up to 8
  smol     SmolLM2-135M-Instruct (the book's default model, from --gguf), bf16: the grounded and
           plain workloads of spec_decode_bench.py one request at a time, greedy: ms per output
           token without drafts (a step ahead, and one step at a time) and with prompt lookup (also
           with the fused kernels up to 8 rows, k = 4 and 7), acceptance, text equal to the run
           without; then where a speculating step's time goes

Writes spec_gpu.json into --out. Run from the repo root on a machine with a GPU:
  python3 benchmarks/spec_gpu.py --out /tmp/spec [--gguf SmolLM2-135M-Instruct.Q4_1.gguf]
"""
import argparse, contextlib, json, os, random, sys, tempfile, time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent)); sys.path.insert(0, str(HERE))

from mini_vllm import LLM, SamplingParams  # noqa: E402
from mini_vllm.paged_attention import AttentionMetadata  # noqa: E402
from workload import shape_config_dir, tinyllama_config_dir  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"       # the CPU only to try the script out
sync = torch.cuda.synchronize if DEV == "cuda" else (lambda: None)


@contextlib.contextmanager
def gemv_max_m(m: int):
    """Steps of up to m tokens through 04i's fused kernels (GEMV_MAX_M, 2 by default) for the engines
    built inside: their graphs are captured then, and a request alone never leaves them."""
    from mini_vllm.fast import small_batch
    old, small_batch.GEMV_MAX_M = small_batch.GEMV_MAX_M, m
    try: yield
    finally: small_batch.GEMV_MAX_M = old


def count_rows(runner) -> list[int]:
    "The row counts of the decode graphs `runner` replays, as a list that fills as it runs."
    rows = []
    if runner.graphs is not None:
        hold = runner.graphs._hold
        runner.graphs._hold = lambda n: rows.append(n) or hold(n)
    return rows


def sec_correct(tmp: Path) -> dict:
    from transformers import AutoModelForCausalLM
    from mini_vllm.decode import hf_greedy
    from mini_vllm.loading import save_tiny_model
    target = save_tiny_model(tmp / "target", seed=0, vocab_size=64)
    hf = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
    with torch.no_grad():
        for w in hf.parameters(): w.add_(torch.randn_like(w) * 0.05)
    hf.save_pretrained(tmp / "noisy")
    hf = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).to(DEV)
    random.seed(0)
    prompts = [[random.randrange(3, 64) for _ in range(random.randrange(5, 61))] for _ in range(8)]
    lengths = [20 + 4 * i for i in range(8)]
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in lengths]
    want = [hf_greedy(hf, p, n) for p, n in zip(prompts, lengths)]
    specs = {"ngram": dict(method="ngram", num_speculative_tokens=4, prompt_lookup_min=1,
                           prompt_lookup_max=3),
             "noisy draft": dict(model=str(tmp / "noisy"), num_speculative_tokens=3),
             "self draft": dict(model=str(target), num_speculative_tokens=5)}
    res = {}
    for name, spec in specs.items():
        for setting, kw in {"roomy": {}, "preempting": dict(num_kv_blocks=30, block_size=4,
                                                              max_model_len=110)}.items():
            llm = LLM(str(target), dtype="float32", kv_cache_memory_bytes=2**24,
                      speculative_config=dict(spec, disable_by_batch_size=None), **kw)
            rows = count_rows(llm.llm_engine.core.runner)
            got = [o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)]
            r, s = llm.llm_engine.core.runner, llm.stats()
            res[f"{name}, {setting}"] = dict(
                equal=got == want, prompts_equal=sum(g == w for g, w in zip(got, want)),
                graphs=r.graphs is not None, most_rows=max(rows, default=0),
                drafts=s["spec_decode_num_draft_tokens"], acceptance=s["spec_decode_acceptance_rate"],
                preemptions=s["num_preemptions"], blocks_back=s["kv_blocks_free"] == s["kv_blocks_total"])
            print(name, setting, res[f"{name}, {setting}"], flush=True)
            del llm
    seeded = SamplingParams(temperature=0.8, max_tokens=24, seed=7, n=2)
    llm = LLM(str(target), dtype="float32", speculative_config=specs["noisy draft"])
    runs = [[c.token_ids for c in llm.generate(prompts[:2], seeded, use_tqdm=False)[0].outputs]
            for _ in range(2)]
    res["seeded_repeats"] = runs[0] == runs[1]
    return res


def sec_cost(tmp: Path) -> dict:
    """One request after 300 tokens, TinyLlama's and SmolLM2's shapes: ms per forward over n tokens
    laid out as decode rows (as `SpecRunner.flatten` does with graphs), graphs replayed."""
    res = {}
    for shape, max_m in (("tinyllama", 2), ("tinyllama", 8), ("smollm2_135m", 2),
                         ("smollm2_135m", 8)):
        cfg = shape_config_dir(tmp / shape, shape) if shape != "tinyllama" else \
            tinyllama_config_dir(tmp / shape)
        with gemv_max_m(max_m):
            llm = LLM(str(cfg), dtype="bfloat16", load_format="dummy", max_model_len=2048,
                      speculative_config=dict(method="ngram", num_speculative_tokens=32))
        core, key = llm.llm_engine.core, f"{shape}, fused to {max_m} rows"
        core.add_request("r", list(range(1000, 1300)), SamplingParams(temperature=0, max_tokens=64))
        core.step()
        req, res[key] = core.scheduler.running[0], {}
        core.kv.allocate_slots(req, 33)
        c, table = req.num_computed_tokens, core.kv.block_table("r")
        with torch.inference_mode():
            for n in (1, 2, 3, 5, 9, 17, 33):
                meta = AttentionMetadata.build([1] * n, list(range(c + 1, c + n + 1)), [table] * n,
                                               core.kv.block_size, DEV)
                ids = torch.arange(n, device=DEV) + 5
                rows = torch.arange(n, device=DEV)
                for _ in range(3): core.runner.logits(ids, meta, rows)
                sync()
                t = time.perf_counter()
                for _ in range(50): core.runner.logits(ids, meta, rows)
                sync()
                res[key][n] = (time.perf_counter() - t) / 50 * 1000
        print("cost", key, {n: round(ms, 3) for n, ms in res[key].items()}, flush=True)
        core.finish([("r", "abort", None)])
        del llm, core
        if DEV == "cuda": torch.cuda.empty_cache()
    return res


def step_times(llm, prompts, max_tokens: int) -> dict:
    """Where a speculating engine's steps go, the prompts run again one at a time: ms per step in
    scheduling, proposing, laying out, the forward (to the GPU's end), verifying, the rest."""
    from collections import Counter
    core, acc = llm.llm_engine.core, Counter()
    r = core.runner
    def timed(obj, name, synced=False):
        f = getattr(obj, name)
        def g(*a, **kw):
            t = time.perf_counter()
            v = f(*a, **kw)
            if synced: sync()
            acc[name] += time.perf_counter() - t
            return v
        setattr(obj, name, g)
    for obj, name in ((core, "step"), (core.scheduler, "schedule"), (r.proposer, "propose"),
                      (r, "flatten"), (r, "verify"), (core.scheduler, "update")):
        timed(obj, name)
    timed(r, "logits", synced=True)
    steps = count_rows(r)
    calls = Counter()
    step = core.step
    core.step = lambda: calls.update(["step"]) or step()
    p = SamplingParams(temperature=0, max_tokens=max_tokens)
    for ids in prompts:
        llm.reset_prefix_cache()
        llm.generate([ids], p, use_tqdm=False)
    n = calls["step"]
    out = {k: v / n * 1000 for k, v in acc.items()}
    out["rest"] = out["step"] - sum(v for k, v in out.items() if k != "step")
    return dict(steps=n, ms_per_step=out, rows_replayed=sum(steps))


def sec_smol(gguf: Path, tmp: Path, ks: list[int], max_tokens: int) -> dict:
    from mini_vllm.loading import convert_gguf
    from spec_decode_bench import load_prompts, one_at_a_time
    t = time.perf_counter()
    folder = convert_gguf(gguf, tmp / "smollm2")
    res = dict(convert_seconds=time.perf_counter() - t, dtype="bfloat16", max_tokens=max_tokens)
    ngram = lambda k: dict(method="ngram", num_speculative_tokens=k, prompt_lookup_min=2,
                           prompt_lookup_max=4)
    configs = {"none": (None, 2, {}), "none, one step": (None, 2, dict(async_scheduling=False)),
               **{f"ngram k={k}": (ngram(k), 2, {}) for k in ks},
               **{f"ngram k={k}, fused to 8 rows": (ngram(k), 8, {}) for k in (4, 7)}}
    engines = {}
    for name, (spec, max_m, kw) in configs.items():
        with gemv_max_m(max_m):
            engines[name] = LLM(str(folder), dtype="bfloat16", speculative_config=spec,
                                kv_cache_memory_bytes=2**30, **kw)
    tok = engines["none"].get_tokenizer()
    warm = [load_prompts(tok, f"spec_{w}.jsonl")[0] for w in ("grounded", "plain")]
    for llm in engines.values():               # every kernel compiled before the timed prompts
        llm.generate(warm, SamplingParams(temperature=0, max_tokens=max_tokens), use_tqdm=False)
    for w in ("grounded", "plain"):
        prompts = load_prompts(tok, f"spec_{w}.jsonl")
        rows = one_at_a_time(engines, prompts, max_tokens)    # the host has the tokens: work done
        for name, r in rows.items():
            r["ms_per_token"] = r["seconds"] / r["tokens"] * 1000
            if r.get("spec_decode_num_draft_tokens"):
                r["acceptance_rate"] = r["spec_decode_num_accepted_tokens"] / r[
                    "spec_decode_num_draft_tokens"]
                r["mean_accepted_length"] = 1 + r["spec_decode_num_accepted_tokens"] / r[
                    "spec_decode_num_drafts"]
            r["same_text"] = r["texts"] == rows["none"]["texts"]
            r["same_prompts"] = sum(a == b for a, b in zip(r["texts"], rows["none"]["texts"]))
            r["speedup"] = r["tok_s"] / rows["none"]["tok_s"]
            print(f"{w:9s} {name:18s} {r['ms_per_token']:7.3f} ms/token x{r['speedup']:.2f} "
                  f"acceptance {r.get('acceptance_rate', 0):.2f} "
                  f"same {r['same_prompts']}/{len(prompts)}", flush=True)
        for r in rows.values(): r.pop("texts")
        res[w] = rows
    prompts = load_prompts(tok, "spec_grounded.jsonl")
    for name, (spec, _, _) in configs.items():
        if spec is None: continue
        res.setdefault("steps", {})[name] = t = step_times(engines[name], prompts, max_tokens)
        print("steps", name, t["steps"], {n: round(v, 3) for n, v in t["ms_per_step"].items()},
              flush=True)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--sections", default="correct,cost,smol")
    ap.add_argument("--gguf", default=None, help="SmolLM2's GGUF file (smol is skipped without it)")
    ap.add_argument("--k", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--max-tokens", type=int, default=128)
    args = ap.parse_args()
    out = Path(args.out); out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp())
    res = dict(command=" ".join(["benchmarks/spec_gpu.py"] + sys.argv[1:]),
               commit=os.environ.get("MINI_VLLM_COMMIT", "unknown"),
               device=torch.cuda.get_device_name(0) if DEV == "cuda" else DEV, torch=torch.__version__)
    for s in args.sections.split(","):
        t = time.perf_counter()
        try:
            if s == "correct": res[s] = sec_correct(tmp)
            elif s == "cost": res[s] = sec_cost(tmp)
            elif s == "smol" and args.gguf: res[s] = sec_smol(Path(args.gguf), tmp, args.k,
                                                            args.max_tokens)
        except Exception as e:                     # one section's failure keeps the others' results
            import traceback; traceback.print_exc()
            res[s] = dict(error=repr(e))
        res.setdefault("seconds", {})[s] = time.perf_counter() - t
        (out / "spec_gpu.json").write_text(json.dumps(res, indent=1) + "\n")
    print("wrote", out / "spec_gpu.json")


if __name__ == "__main__":
    main()
