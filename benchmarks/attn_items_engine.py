"""Decode attention as work items (`attn_work_items.py`) in the engine: `LLM()` with its defaults (bf16 dummy weights,
TinyLlama-1.1B shape), with the decode attention of full-batch steps (requests x KV heads at least twice the
multiprocessors, where chapter 04g1 gives each context one program) replaced by the items kernel: the items built
on the device once a step (at the first layer) and read in every layer. A setting is `off` (the engine as it is) or
`items:CHUNK:PROGRAMS[:steal][:sort]` (PROGRAMS 0: one program per unit of the items' room, else a persistent grid;
`steal`: units taken from a shared counter, not every n-th; `sort`: the largest pieces first, `sortlen`: the
longest contexts first);
each setting is an engine of its own in this process, in the order given (repeat one to see the spread). Output
tok/s of the public workload (256 requests) and of the same draw with 320, after a warm-up on the first 8; the greedy
tokens of the first 32 requests compared with the first setting's. From the repo root, on a CUDA GPU:
  python3 benchmarks/attn_items_engine.py --out $OUT/items_engine [--settings off,items:1024:0:sort,off]
`--check` (a CPU, TRITON_INTERPRET=1): a tiny random Llama's greedy tokens with and without the items, 8 requests.
"""
import argparse, gc, json, os, sys, tempfile, time
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent)); sys.path.insert(0, str(HERE))
import torch
import mini_vllm.triton_attention as ta
from mini_vllm import LLM, SamplingParams
from mini_vllm.triton_kernels import num_sms
from attn_work_items import build_items, items_attention

_ATTEND = ta.TritonPagedAttention._attend
SETTING = None                       # (chunk, programs, steal) while the items replace full-batch decode attention
CALLS = [0]                          # layers whose decode attention went through the items


def _attend_items(self, layer, q, out, pdl=False):
    "04g1's _attend, with a full batch's decode attention done over work items built at the first layer."
    B, HKV = self.decode_reqs.shape[0], self.cache.k.shape[3]
    if SETTING is None or B * HKV < 2 * num_sms(): return _ATTEND(self, layer, q, out, pdl)
    chunk, programs, steal, sort = SETTING
    kc, vc, m, scale = self.cache.k[layer], self.cache.v[layer], self.meta, q.shape[-1] ** -0.5
    if layer == 0 or getattr(self, "_items", None) is None:        # once a step; every layer reads them
        self._items = build_items(m.seq_lens, self.decode_reqs, chunk, self.max_seq_len, sort=sort)
    items, n_items = self._items
    CALLS[0] += 1
    items_attention(out, q, kc, vc, m.block_tables, m.query_start_loc, items, scale, programs or items.shape[0] * HKV,
                    n_items=n_items,
                    num_rows=m.seq_lens.shape[0], steal=steal)
    ta.paged_prefill_attention(out, q, kc, vc, m.block_tables, m.seq_lens, m.query_start_loc, self.tiles, scale,
                               block_m=ta.BLOCK_M, block_n=ta.BLOCK_N)
    return out


ta.TritonPagedAttention._attend = _attend_items


def parse(setting: str):
    if setting == "off": return None
    _, chunk, programs, *flags = setting.split(":")
    sort = "size" if "sort" in flags else "length" if "sortlen" in flags else ""
    return int(chunk), int(programs), "steal" in flags, sort


def check():
    """The tiny model's greedy tokens without the items and with them (chunks of 16 tokens; 5 programs, units taken
    in turn or stolen; or the largest pieces first, a program per unit), on the interpreter."""
    global SETTING
    from mini_vllm.loading import save_tiny_model
    d = save_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    prompts = [[(7 * i + j) % 200 + 3 for j in range(5 + 9 * i)] for i in range(8)]
    sp = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    outs = []
    for s in (None, (16, 5, False, ""), (16, 5, True, ""), (16, 0, False, "size")):
        SETTING = s
        llm = LLM(d, dtype="float32", attention_backend="triton", block_size=16)
        outs.append([o.outputs[0].token_ids for o in llm.generate([dict(prompt_token_ids=p) for p in prompts], sp,
                                                                   use_tqdm=False)])
    SETTING = None
    assert CALLS[0] > 0, "no step went through the items"
    assert outs[0] == outs[1] == outs[2] == outs[3], "the items changed a greedy token"
    print(f"{len(prompts)} requests x 24 greedy tokens: identical with and without the items "
          f"({CALLS[0]} layers' decode attention through them)")


def main(argv=None):
    global SETTING
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    p.add_argument("--settings", default="off,items:1024:0:sort,items:512:0:sort,off,items:1024:0:sort")
    p.add_argument("--check", action="store_true")
    a = p.parse_args(argv)
    if a.check: return check()
    from workload import public_workload, tinyllama_config_dir
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    cfg = tinyllama_config_dir(Path(tempfile.mkdtemp()) / "tl")
    greedy = lambda n: SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
    rows, first = [], None
    for setting in a.settings.split(","):
        SETTING = parse(setting)
        llm = LLM(cfg, dtype="bfloat16", load_format="dummy")
        row = dict(setting=setting)
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
    SETTING = None


if __name__ == "__main__":
    main()
