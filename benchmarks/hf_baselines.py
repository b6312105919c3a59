"""Hugging Face transformers baselines on the public workload: batch-1 generate, static batch, continuous batching."""
import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workload import public_workload, tinyllama_config_dir, workload_stats  # noqa: E402

PAD_ID = 0  # TinyLlama's pad id; padded positions are masked out anyway


def sync(device):
    """Wait for queued GPU work so wall-clock timings are honest."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def build_model(device, tiny=False, dtype=torch.bfloat16, seed=0):
    """TinyLlama-1.1B-shaped (or tiny) LlamaForCausalLM with random weights, created directly on `device`."""
    with tempfile.TemporaryDirectory() as d:
        tinyllama_config_dir(d, tiny=tiny)
        cfg = AutoConfig.from_pretrained(d)
    torch.manual_seed(seed)
    with torch.device(device):  # initialise on the GPU: CPU init of 1.1B params takes far longer
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation="sdpa")
    return model.eval()


def result(name, requests, output_tokens, seconds, **extra):
    """One measurement as a flat dict."""
    return {"name": name, "requests": requests, "output_tokens": output_tokens, "seconds": round(seconds, 4),
            "output_tok_per_s": round(output_tokens / seconds, 2), **extra}


def _generate(model, prompts, new_tokens, device):
    """Greedy HF generate on left-padded prompts, exactly `new_tokens` new tokens per row (EOS suppressed)."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), PAD_ID, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), do_sample=False,
                         max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=PAD_ID)
    assert out.shape[1] == width + new_tokens, (out.shape, width, new_tokens)
    return out


def warmup_generate(model, device, batch=2, length=16):
    """A short generate so kernels, allocator and caches are warm before timing."""
    _generate(model, [list(range(3, 3 + length))] * batch, 4, device)
    sync(device)


@torch.inference_mode()
def run_batch1(model, workload, device, k=4):
    """(a) HF generate one request at a time for the first k requests."""
    warmup_generate(model, device, batch=1)
    reqs = workload[:k]
    sync(device)
    t0 = time.perf_counter()
    for prompt, out_len in reqs:
        _generate(model, [prompt], out_len, device)
    sync(device)
    seconds = time.perf_counter() - t0
    tokens = sum(o for _, o in reqs)
    return result("hf_generate_batch1", len(reqs), tokens, seconds, ms_per_token=round(1000 * seconds / tokens, 3),
                  note="ms_per_token includes each request's prefill")


@torch.inference_mode()
def run_static(model, workload, device, batch_size=None):
    """(b) HF static batching: all requests in one generate (max output length for every row), halving on OOM."""
    warmup_generate(model, device)
    bs = batch_size or len(workload)
    ooms = []
    while True:
        try:
            sync(device)
            t0 = time.perf_counter()
            generated = 0
            for i in range(0, len(workload), bs):
                chunk = workload[i:i + bs]
                longest = max(o for _, o in chunk)
                _generate(model, [p for p, _ in chunk], longest, device)
                generated += len(chunk) * longest
            sync(device)
            seconds = time.perf_counter() - t0
            break
        except torch.OutOfMemoryError:
            ooms.append(bs)
            print(f"static batch of {bs} ran out of memory; retrying with {bs // 2}", flush=True)
            if bs == 1:
                raise
            bs //= 2
            torch.cuda.empty_cache()
    useful = sum(o for _, o in workload)
    return result("hf_static_batch", len(workload), useful, seconds, batch_size=bs,
                  num_batches=-(-len(workload) // bs), generated_tokens=generated, oom_batch_sizes=ooms,
                  note="each batch generates max(output_len) for every row; only sum(output_len) counted")


def _collect(manager, n, timeout=1800.0):
    """Take n finished results from the manager's shared queue (no request id: that path can return None)."""
    done, deadline = {}, time.monotonic() + timeout
    while len(done) < n:
        r = manager.get_result(timeout=1.0)
        if r is None:
            if not manager.is_running():
                raise RuntimeError(f"continuous batching thread stopped after {len(done)}/{n} results")
            if time.monotonic() > deadline:
                raise TimeoutError(f"continuous batching: {len(done)}/{n} results after {timeout} s")
            continue
        if r.error is not None:
            raise RuntimeError(f"request {r.request_id} failed: {r.error}")
        if r.is_finished():
            done[r.request_id] = r
    return done


def cb_config(cuda_graphs=True, num_blocks=None, max_batch_tokens=None):
    """A ContinuousBatchingConfig using only fields that exist in both transformers 5.17 and 5.24."""
    try:
        from transformers import ContinuousBatchingConfig
    except ImportError as e:
        raise RuntimeError(f"transformers {transformers.__version__} has no ContinuousBatchingConfig") from e
    fields = {f.name for f in dataclasses.fields(ContinuousBatchingConfig)}
    missing = {"use_cuda_graph", "num_blocks", "max_batch_tokens"} - fields
    if missing:
        raise RuntimeError(f"ContinuousBatchingConfig in transformers {transformers.__version__} lacks {missing}")
    kw = dict(use_cuda_graph=cuda_graphs, num_blocks=num_blocks, max_batch_tokens=max_batch_tokens)
    if "auto_switch_to_flash" in fields:  # >= 5.18 would otherwise swap sdpa for flash-attn when installed
        kw["auto_switch_to_flash"] = False
    return ContinuousBatchingConfig(**kw)


def run_continuous(model, workload, device, cuda_graphs=True, num_blocks=None, max_batch_tokens=None,
                   warmup_requests=4, timeout=1800.0):
    """(c) HF continuous batching (paged|sdpa) via init_continuous_batching, each request its own max_new_tokens."""
    if not hasattr(model, "init_continuous_batching"):
        raise RuntimeError(f"transformers {transformers.__version__} has no init_continuous_batching")
    # 5.17 needs the paged| prefix; 5.24 warns, strips it and runs plain sdpa on the paged cache
    model.set_attn_implementation("paged|sdpa")
    attn = model.config._attn_implementation
    gen_cfg = GenerationConfig(do_sample=False, max_new_tokens=max(o for _, o in workload),
                               bos_token_id=1, eos_token_id=2, pad_token_id=PAD_ID)
    cfg = cb_config(cuda_graphs, num_blocks, max_batch_tokens)
    manager = model.init_continuous_batching(generation_config=gen_cfg, continuous_batching_config=cfg)
    try:
        manager.warmup()  # captures the CUDA graphs (when on) before the clock starts
        manager.start()
        for i, (prompt, _) in enumerate(workload[:warmup_requests]):
            manager.add_request(prompt[:32], request_id=f"warmup_{i}", max_new_tokens=8, eos_token_id=-1)
        _collect(manager, min(warmup_requests, len(workload)), timeout)
        resolved = manager.continuous_batching_config
        sync(device)
        t0 = time.perf_counter()
        for i, (prompt, out_len) in enumerate(workload):  # eos_token_id=-1: EOS never stops a request
            manager.add_request(prompt, request_id=f"req_{i}", max_new_tokens=out_len, eos_token_id=-1)
        done = _collect(manager, len(workload), timeout)
        sync(device)
        seconds = time.perf_counter() - t0
    finally:
        manager.stop(block=True, timeout=30)
        model.set_attn_implementation("sdpa")
    got = [len(done[f"req_{i}"].generated_tokens) for i in range(len(workload))]
    want = [o for _, o in workload]
    tokens = sum(min(g, w) for g, w in zip(got, want))
    graphs = resolved.cuda_graph_booleans
    name = "hf_continuous_batching" + ("_cuda_graphs" if any(graphs) else "")
    return result(name, len(workload), tokens, seconds, attn_implementation=attn,
                  cuda_graphs_varlen_decode=list(graphs), async_batching=resolved.use_async_batching,
                  num_blocks=resolved.num_blocks, max_batch_tokens=resolved.max_batch_tokens,
                  max_requests_per_batch=resolved.max_requests_per_batch,
                  requests_short=sum(g < w for g, w in zip(got, want)),
                  requests_long=sum(g > w for g, w in zip(got, want)))


def print_table(results):
    """Short fixed-width summary of the measurements."""
    print(f"{'name':40} {'reqs':>5} {'out_tok':>8} {'sec':>9} {'tok/s':>10} {'ms/tok':>8}")
    for r in results:
        ms = r.get("ms_per_token")
        print(f"{r['name']:40} {r['requests']:>5} {r['output_tokens']:>8} {r['seconds']:>9.2f} "
              f"{r['output_tok_per_s']:>10.1f} {'' if ms is None else f'{ms:.2f}':>8}")


def environment(device):
    """Versions and hardware for the JSON header."""
    env = {"python": platform.python_version(), "torch": torch.__version__,
           "transformers": transformers.__version__, "device": str(device)}
    if torch.device(device).type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
    return env


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--num-requests", type=int, default=256)
    p.add_argument("--min-len", type=int, default=100, help="lower bound of prompt and output lengths")
    p.add_argument("--max-len", type=int, default=1024, help="upper bound of prompt and output lengths")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", default="a,b,c", help="comma list of a (batch-1), b (static), c (continuous)")
    p.add_argument("--tiny", action="store_true", help="tiny Llama instead of TinyLlama-1.1B (CPU smoke test)")
    p.add_argument("--k", type=int, default=4, help="requests run one at a time in mode a")
    p.add_argument("--static-batch-size", type=int, default=None, help="default: all requests in one batch")
    p.add_argument("--no-cuda-graphs", action="store_true", help="mode c without CUDA graphs")
    p.add_argument("--cb-num-blocks", type=int, default=None, help="default: auto on GPU, 16 on CPU")
    p.add_argument("--cb-max-batch-tokens", type=int, default=None, help="default: auto on GPU, 256 on CPU")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--out", default="hf_baselines.json")
    return p.parse_args(argv)


def main(argv=None):
    """Run the selected modes, write JSON to --out, print a table."""
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    modes = [m.strip() for m in args.only.split(",") if m.strip()]
    if bad := set(modes) - {"a", "b", "c"}:
        raise SystemExit(f"unknown modes {bad}")
    cpu = torch.device(args.device).type == "cpu"
    # On the CPU the cache sizing would otherwise claim most of the RAM
    num_blocks = args.cb_num_blocks or (16 if cpu else None)
    max_batch_tokens = args.cb_max_batch_tokens or (256 if cpu else None)

    workload = public_workload(args.num_requests, args.min_len, args.max_len, args.seed)
    t0 = time.perf_counter()
    model = build_model(args.device, tiny=args.tiny)
    sync(args.device)
    report = {"env": environment(args.device), "model": "tiny-llama" if args.tiny else "TinyLlama-1.1B (dummy bf16)",
              "model_init_s": round(time.perf_counter() - t0, 2), "args": vars(args),
              "workload": workload_stats(workload), "results": []}
    for m in modes:
        if m == "a":
            r = run_batch1(model, workload, args.device, k=args.k)
        elif m == "b":
            r = run_static(model, workload, args.device, batch_size=args.static_batch_size)
        else:
            r = run_continuous(model, workload, args.device, cuda_graphs=not args.no_cuda_graphs,
                               num_blocks=num_blocks, max_batch_tokens=max_batch_tokens)
        report["results"].append(r)
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")  # after each mode, so a crash keeps the rest
        print(f"[{m}] {r['name']}: {r['output_tok_per_s']} tok/s", flush=True)
    print_table(report["results"])
    print(f"wrote {args.out}")
    return report


if __name__ == "__main__":
    code = 0
    try:
        main()
    except SystemExit as e:  # --help (0), a bad argument (2), a bad mode (its message)
        if isinstance(e.code, str): print(e.code, file=sys.stderr)
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: B036 - report, then exit hard below
        import traceback
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # HF's continuous batching leaves a background thread that must not hang the run
