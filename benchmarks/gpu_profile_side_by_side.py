"""The GPU's kernel time over one run of the public workload, real vLLM or mini_vllm, on one GPU: how much work each
engine gives the GPU, and in which kernels, beside how long the run takes.

Each engine as `vllm_side_by_side.py` builds it with default settings (vLLM's engine core in this process,
`VLLM_ENABLE_V1_MULTIPROCESSING=0`, so that torch.profiler sees its kernels). Warm-up on 8 requests, then the
workload twice, the prefix cache emptied before each so that every prompt is computed: once timed, once under
torch.profiler (CUDA activity only). Prints one JSON object: output tok/s unprofiled, the profiled run's seconds, the
sum of kernel times (ms), that sum by kernel class (matrix products, attention, norms and activations, the rest) and
the 40 largest kernels (name, ms, calls). A shape of workload.SHAPES (the third argument, TinyLlama-1.1B's by
default), dummy bf16. From the repo root, vLLM installed as `vllm_h200.sh install` leaves it:
  PYTHONPATH=/tmp/vsite:/tmp/site:$PWD VLLM_USE_FLASHINFER_SAMPLER=0 python3 benchmarks/gpu_profile_side_by_side.py vllm 256
  PYTHONPATH=/tmp/site:$PWD python3 benchmarks/gpu_profile_side_by_side.py mini 256
  PYTHONPATH=/tmp/site:$PWD python3 benchmarks/gpu_profile_side_by_side.py mini-int8 256     (or mini-int4)
  PYTHONPATH=/tmp/site:$PWD python3 benchmarks/gpu_profile_side_by_side.py mini 256 llama3_8b
"""
import os, sys
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
import json, tempfile, time
from pathlib import Path
import torch
from torch.profiler import ProfilerActivity, profile
sys.path.insert(0, str(Path(__file__).resolve().parent)); sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from workload import SHAPES, public_workload, shape_config_dir  # noqa: E402


def engine(which: str, cfg):
    "A function that runs a list of (prompt ids, output length) to the end, and the engine."
    if which == "vllm":
        from vllm import LLM, SamplingParams
        llm = LLM(model=str(cfg), skip_tokenizer_init=True, load_format="dummy", dtype="bfloat16", seed=0)
        sp = lambda m: SamplingParams(temperature=0, max_tokens=m, ignore_eos=True, detokenize=False)
        return (lambda w: llm.generate([{"prompt_token_ids": p} for p, _ in w], [sp(m) for _, m in w],
                                       use_tqdm=False)), llm
    from mini_vllm import LLM, SamplingParams
    quant = which.split("-")[1] if "-" in which else None                # mini-int8, mini-int4: quantized weights
    llm = LLM(cfg, dtype="bfloat16", load_format="dummy", quantization=quant)
    sp = lambda m: SamplingParams(temperature=0, max_tokens=m, ignore_eos=True)
    return (lambda w: llm.generate([p for p, _ in w], [sp(m) for _, m in w], use_tqdm=False)), llm


CLASSES = (("attention", ("flashattn", "fmha", "paged_attention", "_items_kernel", "_decode_kernel",
                          "decode_partition", "_prefill_kernel")),     # cache writes count as "the rest"
           ("gemm", ("gemm", "gemv", "matmul", "mm_", "_mm", "cutlass", "sm90_xmma", "nvjet", "cublas", "splitk",
                     "linear", "dequant")),
           ("norm/rope/act", ("norm", "rope", "rotary", "silu", "act_and_mul", "swiglu", "gelu")),
           ("sampling", ("argmax", "sample", "topk", "softmax", "sort")),
           ("copy/other", ("",)))                  # in this order: FlashAttention's kernels are cutlass's too


def kernel_class(name: str) -> str:
    "A kernel's class by its name (the first class with a matching word): what the profile's split is over."
    n = name.lower()
    return next(c for c, words in CLASSES if any(w in n for w in words))


def main(which: str, n: int, shape: str = "tinyllama"):
    work = public_workload(n)
    run, llm = engine(which, shape_config_dir(Path(tempfile.mkdtemp()) / shape, shape))
    run(work[:8]); llm.reset_prefix_cache()
    torch.cuda.synchronize(); t = time.perf_counter(); run(work); torch.cuda.synchronize()
    plain = time.perf_counter() - t
    llm.reset_prefix_cache()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t = time.perf_counter(); run(work); torch.cuda.synchronize(); wall = time.perf_counter() - t
    rows = [(e.key, e.self_device_time_total / 1e3, e.count) for e in prof.key_averages() if e.self_device_time_total > 0]
    by_class = {}
    for k, ms, _ in rows: by_class[kernel_class(k)] = by_class.get(kernel_class(k), 0) + ms
    out = dict(engine=which, shape=shape, n=n, seconds_unprofiled=round(plain, 3),
               tok_s_unprofiled=round(sum(m for _, m in work) / plain), seconds_profiled=round(wall, 3),
               gpu_busy_ms=round(sum(r[1] for r in rows), 1),
               gpu_busy_fraction=round(sum(r[1] for r in rows) / 1e3 / wall, 3),
               ms_by_class={c: round(ms, 1) for c, ms in sorted(by_class.items(), key=lambda kv: -kv[1])},
               top=[(k[:90], round(ms, 2), c) for k, ms, c in sorted(rows, key=lambda r: -r[1])[:40]])
    print(json.dumps(out, indent=0))


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in ("vllm", "mini", "mini-int8", "mini-int4") \
            or sys.argv[3:] and sys.argv[3] not in SHAPES: sys.exit(__doc__)
    main(*sys.argv[1:2], int(sys.argv[2]), *sys.argv[3:])
