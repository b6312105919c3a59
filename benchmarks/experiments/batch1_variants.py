"""Batch-1 decode with one part of the step changed or left out, one engine per variant (TinyLlama's shape, dummy
bf16 weights, 128-token prompt then 512 greedy tokens, best of three; and the decode graph's replay time). Leaving
a part out (decode attention) measures what it costs inside the step, where kernels overlap through PDL; the other
variants change the decode attention's partition and tiles, the qkv GEMV's tiles, and the weights (int8 with
04i's tiling table before and after its per-shape int8 entries, int4). Writes batch1_variants.json into --out.
Run from the repo root on a CUDA GPU:
  python benchmarks/experiments/batch1_variants.py --out $OUT [--only "bf16,int8"]
"""
import argparse, gc, json, os, sys, tempfile, time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent), str(HERE)]   # repo root, benchmarks/, here
from gpu_bench import back_to_back_ms  # noqa: E402
from workload import tinyllama_config_dir  # noqa: E402
from mini_vllm import LLM, SamplingParams  # noqa: E402
from mini_vllm.fast import small_batch as sb, triton_attention as ta  # noqa: E402

ORIG = dict(attend=ta.paged_decode_attention, partition=ta.decode_partition, decode=dict(ta.DECODE_TILING),
            gemv=dict(sb.GEMV_TILING), quant=dict(sb.QUANT_TILING))


def restore():
    ta.paged_decode_attention, ta.decode_partition = ORIG["attend"], ORIG["partition"]
    for table, saved in ((ta.DECODE_TILING, ORIG["decode"]), (sb.GEMV_TILING, ORIG["gemv"]),
                         (sb.QUANT_TILING, ORIG["quant"])):
        table.clear(); table.update(saved)


def no_attention(): ta.paged_decode_attention = lambda *a, **k: None
def partition(tokens): return lambda: setattr(ta, "decode_partition", lambda *a, **k: tokens)
def decode_tiles(**t): return lambda: ta.DECODE_TILING.update(t)
def qkv_tiles(): sb.GEMV_TILING[(1, "qkv")] = dict(block_n=4, block_k=1024, num_warps=4)
def int8_uniform():                      # the table before it had int8 entries of its own for one row
    for kind in ("narrow", "wide", "deep", "swiglu", "qkv"):
        sb.QUANT_TILING[(8, 1, kind)] = dict(ORIG["quant"][(8, 2, kind)])
def small_tiles(): decode_tiles(block_n=32)(); partition(32)()


VARIANTS = [("bf16", None, lambda: None), ("bf16 no decode attention", None, no_attention),
            ("bf16 partition 128", None, partition(128)), ("bf16 partition 256", None, partition(256)),
            ("bf16 partition 2048", None, partition(2048)), ("bf16 attention 32-token tiles", None, small_tiles),
            ("bf16 attention 4 warps", None, decode_tiles(num_warps=4)), ("bf16 qkv 4x1024", None, qkv_tiles),
            ("int8", "int8", lambda: None), ("int8 uniform tiles", "int8", int8_uniform),
            ("int4", "int4", lambda: None)]


def measure(cfg_dir, prompt, quantization, setup) -> dict:
    restore(); setup()
    llm = LLM(cfg_dir, dtype="bfloat16", load_format="dummy", max_num_seqs=8, max_model_len=2048,
              quantization=quantization)        # one step ahead (its recorded runs had 32-step windows, now gone)
    run = lambda n: llm.generate([prompt], SamplingParams(temperature=0, max_tokens=n, ignore_eos=True), use_tqdm=False)
    run(64); run(1)
    best = float("inf")
    for _ in range(3):
        t = {}
        for n in (1, 513):
            torch.cuda.synchronize(); t0 = time.perf_counter(); run(n); torch.cuda.synchronize()
            t[n] = time.perf_counter() - t0
        best = min(best, (t[513] - t[1]) / 512 * 1e3)
    graph = back_to_back_ms(llm.llm_engine.core.runner.graphs[1], reps=200)
    del llm; gc.collect(); torch.cuda.empty_cache()
    return dict(ms_per_token=best, graph_ms=graph)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    p.add_argument("--only", default=None, help="comma-separated labels (default: all)")
    args = p.parse_args()
    out = Path(args.out); out.mkdir(parents=True, exist_ok=True)
    cfg_dir = tinyllama_config_dir(Path(tempfile.mkdtemp()) / "tinyllama")
    prompt = torch.randint(0, 32000, (128,), generator=torch.Generator().manual_seed(1)).tolist()
    res = {"env": {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "command": " ".join(sys.argv),
                   "commit": os.environ.get("MINI_VLLM_COMMIT", "unknown")}, "variants": {}}
    only = set(args.only.split(",")) if args.only else None
    try:
        for label, quantization, setup in VARIANTS:
            if only and label not in only: continue
            r = res["variants"][label] = measure(cfg_dir, prompt, quantization, setup)
            print(f"{label:32s} {r['ms_per_token']:.4f} ms/token, graph {r['graph_ms']:.4f} ms", flush=True)
            (out / "batch1_variants.json").write_text(json.dumps(res, indent=1))
    finally: restore()


if __name__ == "__main__":
    main()
