"""Structured output on this CPU, in one run: what a JSON schema costs, beside real vLLM.

SmolLM2-135M-Instruct (the book's default model, its transformers folder), 64 requests at once,
greedy, each prompt in the chat template as token ids: request i asks for schema i % 12 of
`data/structured_schemas.json` ("Reply in JSON. <task>"). Two runs per engine, the same prompts:
  unconstrained   no request constrained
  half            the even-numbered requests constrained by their schema (structured_outputs json,
                  compact JSON: xgrammar without free whitespace in both engines), the odd ones not
and `matched`: no request constrained, each one's output as long as it was in `half` (its
max_tokens that length, EOS ignored), so that the two runs differ only by the constraints and
not by how long each request runs (constrained texts end sooner, and a batch that thins out makes
fewer tokens a second on its own); then `all`: every request constrained, and `sampled`: the same at temperature 0.8, request i
seeded with i; the outputs of both are checked against their schemas with `jsonschema` (the
validity figures: greedy decoding of a small model can repeat itself inside a string until
max_tokens, sampling rarely does). Each run is timed from the first request queued to the last
token, output tok/s = output tokens / seconds; the first three runs go twice, in turn, and the second of
each counts (the first also pays for shapes the engine meets first); each engine runs in a process of its own, warmed up
with one unconstrained and one constrained request (a schema outside the set), one engine after the
other:
  mini_vllm   this book's engine, `LLM(kv_cache_memory_bytes=2**29)`, in its CPU default dtype
  vllm        real vLLM (benchmarks/setup_vllm_cpu.sh), its xgrammar back-end without free
              whitespace (its separators "," and ":", where mini_vllm writes ", " and ": "), the
              same dtype
mini_vllm's process also times the compile of each schema, first and again (`compile_grammar`),
and the time its steps spend filling and applying masks (`GrammarState.limit`), per run.
Writes benchmarks/results/structured_cpu.json; with --engines naming one engine, the other's
results already in that file stay (each engine's entry holds its commit). From the repo root, on a quiet machine:
  OMP_NUM_THREADS=2 .venv/bin/python benchmarks/structured_bench.py
"""
import argparse, json, os, platform, subprocess, sys, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RUNS = ("unconstrained", "half", "matched", "all", "sampled")
ORDER = ("unconstrained", "half", "matched", "unconstrained", "half", "matched", "all", "sampled")
WARM = {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}


def workload(tokenizer, n: int) -> tuple[list, list]:
    "n prompts as token ids, and the schema each one asks for."
    cases = json.loads((HERE / "data" / "structured_schemas.json").read_text())
    ids, schemas = [], []
    for i in range(n):
        c = cases[i % len(cases)]
        msgs = [{"role": "user", "content": f"Reply in JSON. {c['task']}"}]
        ids.append(tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True,
                                                 return_dict=False))
        schemas.append(c["schema"])
    return ids, schemas


def child(engine: str, a) -> dict:
    "One engine: warm up, then the three runs; texts, tokens, seconds."
    t0 = time.perf_counter()
    if engine == "vllm":
        import vllm
        from vllm import LLM, SamplingParams
        from vllm.sampling_params import StructuredOutputsParams
        llm = LLM(model=a.model, dtype=a.dtype, seed=0, max_model_len=2048,
                  gpu_memory_utilization=0.3, structured_outputs_config={
                      "backend": "xgrammar", "disable_any_whitespace": True})   # an engine setting
        so = lambda s: StructuredOutputsParams(json=s)
        ask = lambda ids, ps: llm.generate([{"prompt_token_ids": x} for x in ids], ps,
                                           use_tqdm=False)
        res = dict(version=vllm.__version__)
        tok = llm.get_tokenizer()
    else:
        import torch
        from mini_vllm import LLM, SamplingParams
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", os.cpu_count())))
        llm = LLM(a.model, dtype=a.dtype, kv_cache_memory_bytes=2**29)
        so = lambda s: {"json": s}
        ask = lambda ids, ps: llm.generate(ids, ps, use_tqdm=False)
        res = dict(threads=torch.get_num_threads(),
                   dtype=str(next(llm.llm_engine.core.model.parameters()).dtype))
        tok = llm.get_tokenizer()
    res["init_seconds"] = time.perf_counter() - t0
    prompts, schemas = workload(tok, a.num_requests)
    masks = [0.0, 0]                                    # seconds in apply_grammars, calls
    if engine == "mini_vllm":
        res["compile_ms"] = compile_times(a.model, tok, schemas)
        time_masks(masks)
    plain = SamplingParams(temperature=0, max_tokens=a.max_tokens)
    fenced = lambda s, **kw: SamplingParams(**{"temperature": 0, **kw}, max_tokens=a.max_tokens,
                                            structured_outputs=so(s))
    ask(prompts[:2], [plain, fenced(WARM)])                                     # warm-up
    for run in ORDER:
        ps = [fenced(s, temperature=0.8, seed=i) if run == "sampled" else
              fenced(s) if run == "all" or run == "half" and i % 2 == 0 else plain
              for i, s in enumerate(schemas)]
        if run == "matched":                     # each request as long as it was in `half`
            ps = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
                  for n in res["half"]["lengths"]]
        masks[:] = [0.0, 0]
        t = time.perf_counter()
        outs = ask(prompts, ps)
        seconds = time.perf_counter() - t
        cs = [o.outputs[0] for o in outs]
        first = res[run]["tok_s"] if run in res else None
        res[run] = dict(seconds=seconds, tokens=sum(len(c.token_ids) for c in cs),
                        lengths=[len(c.token_ids) for c in cs],
                        texts=[c.text for c in cs], finish=[c.finish_reason for c in cs],
                        constrained=[p is not plain for p in ps],
                        mask_seconds=masks[0], mask_steps=masks[1])
        res[run]["tok_s"] = res[run]["tokens"] / seconds
        if first is not None: res[run]["first_tok_s"] = first
    return res


def time_masks(masks: list):
    """From now on, add to `masks` ([seconds, calls]) what each `GrammarState.limit` takes (the
    runner's call at each step); the unwrapped `limit` is returned."""
    from mini_vllm.structured import GrammarState
    limit = GrammarState.limit
    def timed(*args):
        t = time.perf_counter()
        limit(*args)
        masks[0] += time.perf_counter() - t
        masks[1] += 1
    GrammarState.limit = timed
    return limit


def compile_times(model, tok, schemas) -> dict:
    "Each schema's compile, in ms: the first (a new schema) and the second (the cache's)."
    from mini_vllm.structured import StructuredOutputsParams, compile_grammar, grammar_compiler
    t = time.perf_counter()
    comp = grammar_compiler("bench", 49152, lambda: tok)      # the tokenizer's tables, once
    out = dict(compiler_ms=1e3 * (time.perf_counter() - t), first=[], again=[])
    seen = []
    for s in schemas:
        if s in seen: continue
        seen.append(s)
        for key in ("first", "again"):
            t = time.perf_counter()
            compile_grammar(comp, StructuredOutputsParams(json=s))
            out[key].append(1e3 * (time.perf_counter() - t))
    return out


def validity(r: dict, schemas: list) -> dict:
    "How many constrained outputs parse and meet their schema; how many ended by themselves."
    import jsonschema
    ok = stopped = n = 0
    for text, fin, c, s in zip(r["texts"], r["finish"], r["constrained"], schemas):
        if not c: continue
        n += 1
        stopped += fin == "stop"
        try: jsonschema.validate(json.loads(text), s); ok += 1
        except (ValueError, jsonschema.ValidationError): pass
    return dict(constrained=n, valid=ok, stopped=stopped)


def run_child(engine, python, a, out: Path) -> dict:
    "One engine in a process of its own (spec_vllm_cpu's `run_isolated`); its JSON, or its error."
    from spec_vllm_cpu import run_isolated
    tag = f"_structured_{engine}.{os.getpid()}"
    dest = out / f"{tag}.json"
    cmd = [python, str(Path(__file__).resolve()), "--child", engine, "--model", a.model,
           "--dtype", a.dtype, "--max-tokens", str(a.max_tokens),
           "--num-requests", str(a.num_requests), "--child-out", str(dest)]
    return run_isolated(cmd, engine, dest, out / f"{tag}.log", a.timeout)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(HERE / "results" / "structured_cpu.json"))
    p.add_argument("--vllm-python", default=str(ROOT / ".venv-vllm" / "bin" / "python"))
    p.add_argument("--engines", default="mini_vllm,vllm")
    p.add_argument("--num-requests", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--dtype", default="auto", help="auto: mini_vllm's default on a CPU, for both")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--child"); p.add_argument("--model"); p.add_argument("--child-out")
    a = p.parse_args(argv)
    if a.child:                                   # inside one engine's process
        Path(a.child_out).write_text(json.dumps(child(a.child, a)))
        os._exit(0)                               # vLLM leaves threads behind
    import torch, transformers
    sys.path[:0] = [str(ROOT), str(HERE)]          # the package, and spec_vllm_cpu beside this file
    from mini_vllm.loading import load_tokenizer, resolve_model_path
    a.model = a.model or str(resolve_model_path(None))
    if a.dtype == "auto":                         # mini_vllm's default on a CPU, named for vLLM
        from mini_vllm.loading import load_config
        from mini_vllm.model import resolve_dtype
        dt = resolve_dtype("auto", load_config(a.model), torch.device("cpu"))
        a.dtype = str(dt).removeprefix("torch.")
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=ROOT).stdout.strip()
    _, schemas = workload(load_tokenizer(a.model), a.num_requests)
    res = dict(command=" ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), commit=commit,
               machine=f"{platform.machine()}, {os.cpu_count()} cores",
               torch=torch.__version__, transformers=transformers.__version__,
               num_requests=a.num_requests, max_tokens=a.max_tokens, dtype=a.dtype, engines={})
    if out.exists():                              # the engines not run now keep their results
        res["engines"] = json.loads(out.read_text()).get("engines", {})
    for engine in a.engines.split(","):
        python = a.vllm_python if engine == "vllm" else sys.executable
        print(f"{engine} ...", flush=True)
        r = res["engines"][engine] = run_child(engine, python, a, out.parent)
        r.update(commit=commit, command=res["command"])
        if "error" in r: print(f"{engine} failed: {r['error']}\n{r['log_tail']}"); continue
        r["ratio_half"] = r["half"]["tok_s"] / r["unconstrained"]["tok_s"]
        r["ratio_matched"] = r["half"]["tok_s"] / r["matched"]["tok_s"]
        for run in ("half", "all", "sampled"): r[run]["validity"] = validity(r[run], schemas)
    out.write_text(json.dumps(res, indent=1))
    print(f"\n{'engine':10s} {'run':14s} {'tok/s':>7s} {'tokens':>7s} {'seconds':>8s} "
          f"{'valid':>7s} {'stopped':>8s}")
    for engine, r in res["engines"].items():
        if "error" in r: continue
        for run in RUNS:
            x, v = r[run], r[run].get("validity")
            val = f"{v['valid']}/{v['constrained']}" if v else ""
            stop = f"{v['stopped']}/{v['constrained']}" if v else ""
            again = f"  (first: {x['first_tok_s']:.1f})" if "first_tok_s" in x else ""
            print(f"{engine:10s} {run:14s} {x['tok_s']:7.1f} {x['tokens']:7d} {x['seconds']:8.1f} "
                  f"{val:>7s} {stop:>8s}{again}")
        print(f"{engine:10s} half / unconstrained: {r['ratio_half']:.3f}x; half / matched "
              f"lengths: {r['ratio_matched']:.3f}x")
        if r["half"]["mask_steps"]:
            h = r["half"]
            print(f"{engine:10s} half: masks {1e3 * h['mask_seconds']:.0f} ms in {h['mask_steps']}"
                  f" steps ({100 * h['mask_seconds'] / h['seconds']:.2f}% of {h['seconds']:.1f} s)")
        if "compile_ms" in r:
            c = r["compile_ms"]
            print(f"compile: tokenizer tables {c['compiler_ms']:.0f} ms once; a new schema "
                  f"{min(c['first']):.1f}-{max(c['first']):.1f} ms, again "
                  f"{max(c['again']):.2f} ms at most")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
