"""Structured output on a GPU: the masks through CUDA graphs, the overlapped loop and drafts.

A tiny random Llama (vocabulary 49,152) with SmolLM2's tokenizer (its files passed with
--tokenizer: tokenizer.json, tokenizer_config.json), in the engine's GPU defaults (bf16, Triton
kernels, CUDA graphs, the overlapped loop of chapter 04k), then with prompt lookup. Checked:
  valid       each schema below, greedy and sampled (n=3): every output parses, meets its schema
              (`jsonschema`) and ends by itself
  neighbours  unconstrained requests get the same tokens with constrained ones in their steps
              as alone; the engine with drafts gives the constrained requests the same tokens
Timed: 64 requests at once, half constrained, against the same 64 unconstrained (output tok/s),
and the host time `GrammarState.limit` takes per step, in the run and alone (`mask_alone`).
Writes OUT/structured_gpu.json.
  python3 benchmarks/structured_gpu.py --tokenizer DIR --out OUT
"""
import argparse, json, os, platform, shutil, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]     # the package, and structured_bench

SCHEMAS = {
    "record": {"type": "object", "required": ["id", "ok"], "properties": {
        "id": {"type": "integer", "minimum": 0, "maximum": 999}, "ok": {"type": "boolean"}}},
    "codes": {"type": "array", "minItems": 1, "maxItems": 3,
              "items": {"type": "string", "pattern": "^[A-Z]{2}[0-9]$"}},
    "choice": {"type": "object", "required": ["pick", "why"], "properties": {
        "pick": {"enum": ["a", "b", "c"]}, "why": {"type": "string", "maxLength": 6}}},
}


def meets(value, schema) -> bool:
    "Whether `value` meets `schema`, by jsonschema."
    import jsonschema
    try: jsonschema.validate(value, schema)
    except jsonschema.ValidationError: return False
    return True


def mask_alone(core, limit) -> dict:
    """Host ms of one mask of 32 rows of a (64, V) step, by `limit` (GrammarState.limit: a plain
    host bitmask, copied through the staging buffer) and the same with xgrammar's own
    `allocate_token_bitmask` (pinned memory), each while a matrix product still runs on the GPU."""
    import torch, xgrammar as xgr
    from mini_vllm.build import request_grammar
    from mini_vllm.structured import StructuredOutputsParams
    so = StructuredOutputsParams(json=SCHEMAS["record"])
    class Asking:                                     # what `limit` reads of a request
        def __init__(self):
            self.grammar = request_grammar(core.config, 49152, so, [2])
            self.output_token_ids = []
    reqs, rows = [Asking() for _ in range(64)], list(range(0, 64, 2))
    logits, big = torch.randn(64, 49152, device="cuda"), torch.randn(8192, 8192, device="cuda")
    def pinned():
        bm = xgr.allocate_token_bitmask(64, 49152)
        for i in rows: reqs[i].grammar.fill(bm, i, [])
        xgr.apply_token_bitmask_inplace(logits, bm.to("cuda", non_blocking=True), indices=rows)
    out = {}
    for name, f in (("limit", lambda: limit(logits, reqs, rows)), ("pinned_bitmask", pinned)):
        times = []
        for _ in range(12):
            torch.cuda.synchronize()
            big @ big                                  # milliseconds of GPU work queued first
            t = time.perf_counter()
            f()
            times.append(time.perf_counter() - t)
        torch.cuda.synchronize()
        out[name + "_host_ms"] = 1e3 * sorted(times[2:])[len(times[2:]) // 2]     # the median
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--out", default=".")
    a = p.parse_args()
    import torch
    from mini_vllm import LLM, SamplingParams
    from mini_vllm.loading import save_tiny_model
    folder = save_tiny_model(Path(tempfile.mkdtemp()) / "tiny", vocab_size=49152,
                             max_position_embeddings=2048)
    for f in Path(a.tokenizer).iterdir(): shutil.copy(f, folder / f.name)
    res = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
               commit=os.environ.get("MINI_VLLM_COMMIT") or subprocess.run(
                   ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                   cwd=ROOT).stdout.strip(), checks={})
    gen = lambda llm, ps, sp: llm.generate(ps, sp, use_tqdm=False)
    fenced = lambda s, **kw: SamplingParams(max_tokens=128, structured_outputs={"json": s},
                                            **{"temperature": 0, **kw})
    llm = LLM(str(folder), kv_cache_memory_bytes=2**28)
    core = llm.llm_engine.core
    res["engine"] = dict(core=type(core).__name__, runner=type(core.runner).__name__,
                         dtype=str(next(core.model.parameters()).dtype))
    prompts = [f"Record {i}:" for i in range(4)]
    valid = 0
    for name, s in SCHEMAS.items():
        for sp in (fenced(s), fenced(s, temperature=1.0, seed=3, n=3)):
            for o in gen(llm, prompts, sp):
                for c in o.outputs:
                    assert c.finish_reason == "stop", (name, c.text)
                    assert meets(json.loads(c.text), s), (name, c.text)
                    valid += 1
    res["checks"]["valid"] = valid
    free = [f"Story {i}: once" for i in range(6)]
    plain = SamplingParams(temperature=0, max_tokens=24)
    alone = [o.outputs[0].token_ids for o in gen(llm, free, plain)]
    mixed = free + [f"Item {i} as JSON:" for i in range(6)]
    params = [plain] * 6 + [fenced(SCHEMAS[n]) for n in SCHEMAS for _ in (0, 1)]
    ref = [o.outputs[0].token_ids for o in gen(llm, mixed, params)]
    assert ref[:6] == alone, "an unconstrained request changed beside constrained ones"
    res["checks"]["neighbours_same_tokens"] = 6
    spec = LLM(str(folder), kv_cache_memory_bytes=2**28, speculative_config={
        "method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1,
        "prompt_lookup_max": 3})
    got = [o.outputs[0].token_ids for o in gen(spec, mixed, params)]
    assert got[6:] == ref[6:], "drafts changed a constrained request's tokens"
    res["checks"]["drafts_same_tokens"] = 6
    res["checks"]["drafts"] = spec.stats().get("spec_decode_num_drafts", 0)
    spec.shutdown()

    from structured_bench import time_masks
    masks = [0.0, 0]
    limit = time_masks(masks)
    many = [f"Entry {i} of the log, as JSON:" for i in range(64)]
    names = list(SCHEMAS)
    for run in ("none", "half", "none", "half"):          # each twice: the first warms up
        sps = [fenced(SCHEMAS[names[i % 3]]) if run == "half" and i % 2 == 0
               else SamplingParams(temperature=0, max_tokens=128) for i in range(64)]
        masks[:] = [0.0, 0]
        torch.cuda.synchronize()
        t = time.perf_counter()
        outs = gen(llm, many, sps)
        seconds = time.perf_counter() - t
        tokens = sum(len(o.outputs[0].token_ids) for o in outs)
        res[run] = dict(seconds=seconds, tokens=tokens, tok_s=tokens / seconds,
                        mask_seconds=masks[0], mask_steps=masks[1])
    res["ratio_half"] = res["half"]["tok_s"] / res["none"]["tok_s"]
    res["mask_alone"] = mask_alone(core, limit)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "structured_gpu.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
