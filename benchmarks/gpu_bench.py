"""Check and time mini_vllm on one GPU, in one run: kernels, correctness against transformers, throughput.

Sections (all by default; `--sections a,b` for some):
  env      GPU, versions, commit, command
  copy     device-to-device copy bandwidth (the ceiling for memory-bound kernels)
  kernels  every Triton kernel against its PyTorch reference at full TinyLlama shapes, in --dtype
  gemv     the small-batch GEMV kernels (04i) against cuBLAS: a tiling sweep, fused variants, errors
  attnbw   paged decode attention bandwidth: 256 requests x 1k context, against the copy bandwidth
  correct  greedy outputs against transformers: a tiny Llama (fp32) and TinyLlama-shape random weights (--dtype, ties
           reported; in float16 also with PDL off, the path of GPUs older than Hopper)
  thru     the public workload (256 requests, prompt/output lengths U[100, 1024], seed 0, EOS ignored), dummy weights,
           in each of the engine's two loops: `async` (one step ahead, 04k, the GPU default) and `sync` (one at a time)
  batch1   batch-1 decode ms/token, in both loops
  profile  kernel-time breakdown of decode steps (torch.profiler)
  quant    int8/int4 weight-only kernels (05) at TinyLlama's shapes: errors against the dequantized weights, and
           microseconds per product against bf16 (cuBLAS, the 04i GEMV) and the naive dequantize-then-matmul

`--dtype float16` runs kernels, gemv, attnbw, correct, thru, batch1 and profile in fp16 instead of bf16: the path
of GPUs without bf16 (a T4, sm_75), checked on a newer one. Writes `gpu_bench.json` (rewritten after every section,
with the dtype) and PNG plots into --out. `--quantization int8|int4` runs the engine sections (thru, batch1) with
quantized weights; `--shape llama3_8b` runs them on Llama-3-8B's shape instead of TinyLlama's. Run from the repo root:
  python benchmarks/gpu_bench.py --out $OUT [--dtype float16] [--quantization int8] [--shape llama3_8b]
"""
import argparse, hashlib, json, os, sys, tempfile, time, traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "benchmarks"))

from workload import LLAMA3_8B_CONFIG, public_workload, tinyllama_config_dir, workload_stats  # noqa: E402

RESULTS: dict = {}
DTYPE = torch.bfloat16                                              # --dtype: the model's and the kernels' dtype
TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 5e-3}             # relative error of a kernel against its reference
SHORT = {torch.bfloat16: "bf16", torch.float16: "fp16"}


def save(out: Path):
    (out / "gpu_bench.json").write_text(json.dumps(RESULTS, indent=2, default=str))


def bench_ms(fn, warmup=3, reps=20) -> float:
    "Median milliseconds of fn() over reps, timed with CUDA events after warm-up."
    for _ in range(warmup): fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def rel_err(a, b) -> float:
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


# --- sections -------------------------------------------------------------------------------------------------

def sec_env(args):
    import transformers, triton
    p = torch.cuda.get_device_properties(0)
    return dict(gpu=torch.cuda.get_device_name(0), sms=p.multi_processor_count, memory_gib=round(p.total_memory / 2**30, 1),
                capability=f"{p.major}.{p.minor}", torch=torch.__version__, triton=triton.__version__,
                transformers=transformers.__version__, python=sys.version.split()[0],
                dtype=str(DTYPE).split(".")[-1], pdl=_pdl_on(), commit=os.environ.get("MINI_VLLM_COMMIT", "unknown"),
                command=" ".join(sys.argv))


def _pdl_on() -> bool:
    "Whether the kernels launch with programmatic dependent launch here (Hopper and later)."
    from mini_vllm.fast import triton_kernels as tk
    return bool(tk.PDL and tk.pdl_supported())


def sec_copy(args):
    n = 2 * 2**30                                                   # 2 GiB of bf16, far past the 60 MB L2
    src = torch.randn(n // 2, dtype=torch.bfloat16, device="cuda"); dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src), reps=20)
    return dict(bytes_moved=2 * n, ms=ms, gb_per_s=2 * n / ms / 1e6)


def _random_step(B, ctx_lo, ctx_hi, q_len_of, H=32, HKV=4, D=64, bs=16, dtype=None, seed=0):
    "A random paged step on the GPU: contexts in shuffled blocks, q, new k/v, metadata."
    dtype = dtype or DTYPE
    from mini_vllm.loading import ModelConfig
    from mini_vllm.paged_attention import AttentionMetadata, PagedKVCache
    g = torch.Generator(device="cuda").manual_seed(seed)
    seq = torch.randint(ctx_lo, ctx_hi + 1, (B,), generator=g, device="cuda").tolist()
    ql = [min(q_len_of(i), s) for i, s in enumerate(seq)]
    nblocks = sum(-(-s // bs) for s in seq) + 8
    cfg = ModelConfig("llama", 10, H * D, 1, H, HKV, D, 8, 8192, 1e-5)
    cache = PagedKVCache.allocate(cfg, nblocks, bs, dtype, "cuda")
    cache.k.normal_(generator=g); cache.v.normal_(generator=g)
    perm = torch.randperm(nblocks, generator=g, device="cuda").tolist()
    tables = [[perm.pop() for _ in range(-(-s // bs))] for s in seq]
    meta = AttentionMetadata.build(ql, seq, tables, bs, "cuda")
    N = sum(ql)
    mk = lambda *s: torch.randn(*s, generator=g, device="cuda").to(dtype)
    return cache, meta, mk(N, H, D), mk(N, HKV, D), mk(N, HKV, D), seq, ql


def sec_kernels(args):
    from mini_vllm.fast import triton_attention as ta, triton_kernels as tk
    from mini_vllm.model import RMSNorm, apply_rope
    from mini_vllm.paged_attention import PagedKVCache, TorchPagedAttention
    out, dt, dev = {}, DTYPE, "cuda"
    x, r = torch.randn(512, 2048, dtype=dt, device=dev), torch.randn(512, 2048, dtype=dt, device=dev)
    norm = RMSNorm(2048, 1e-5).to(dev, dt); norm.weight.data.normal_()
    y, nr = tk.rms_norm(x, norm.weight, 1e-5, residual=r)
    out["rms_norm"] = max(rel_err(y, norm(x + r)), rel_err(nr, x + r))
    gu = torch.randn(512, 2 * 5632, dtype=dt, device=dev)
    g_, u_ = gu.chunk(2, -1)
    out["silu_and_mul"] = rel_err(tk.silu_and_mul(gu), torch.nn.functional.silu(g_) * u_)
    H, HKV, D, N = 32, 4, 64, 300
    qkv = torch.randn(N, (H + 2 * HKV) * D, dtype=dt, device=dev)
    ang = torch.randint(0, 2048, (N,), device=dev)[:, None].float() * (1.0 / 10000 ** (torch.arange(0, D, 2, device=dev).float() / D))
    cos, sin = torch.cat([ang.cos()] * 2, -1).to(dt), torch.cat([ang.sin()] * 2, -1).to(dt)
    slots = torch.randperm(4096, device=dev)[:N]
    kc, vc = torch.zeros(256, 16, HKV, D, dtype=dt, device=dev), torch.zeros(256, 16, HKV, D, dtype=dt, device=dev)
    q_ref = apply_rope(qkv[:, :H * D].view(N, H, D), cos, sin); k_ref = apply_rope(qkv[:, H * D:(H + HKV) * D].view(N, HKV, D), cos, sin)
    tk.rope_and_write_kv(qkv, cos, sin, slots, kc, vc, H, HKV, D)
    out["rope_and_write_kv"] = max(rel_err(qkv[:, :H * D].view(N, H, D), q_ref), rel_err(kc.view(-1, HKV, D)[slots], k_ref))
    for name, (B, lo, hi, qlen) in {"decode_attention": (256, 1, 2048, lambda i: 1),
                                    "decode_attention_split": (3, 1, 2048, lambda i: 1),       # partitions, merged
                                    "prefill_attention": (12, 100, 1500, lambda i: 700 if i % 3 else 1),
                                    "chunk_after_prefix": (8, 600, 2000, lambda i: 257)}.items():
        for Hq, Hk in [(32, 4), (9, 3)]:
            cache, meta, q, k, v, seq, ql = _random_step(B, lo, hi, qlen, H=Hq, HKV=Hk)
            ref = TorchPagedAttention(PagedKVCache(cache.k.clone(), cache.v.clone()), meta)(0, q, k, v)
            attn = ta.TritonPagedAttention(cache, meta)
            got = attn(0, q, k, v)
            out[f"{name}_H{Hq}_KV{Hk}"] = rel_err(got, ref)
            if name.startswith("decode"):                                   # again, launched with PDL (cache written)
                out[f"{name}_H{Hq}_KV{Hk}_pdl"] = rel_err(attn._attend(0, q, torch.empty_like(q), pdl=True), ref)
    tol = TOLERANCE[dt]
    out.update(dtype=SHORT[dt], tolerance=tol, max_rel_err=max(out.values()))
    out["ok"] = out["max_rel_err"] < tol
    return out


def back_to_back_ms(fn, reps=30) -> float:
    "Milliseconds per call of fn() launched reps times back to back between two CUDA events (launch gaps hidden)."
    fn(); torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps): fn()
    b.record(); b.synchronize()
    return a.elapsed_time(b) / reps


def sec_attnbw(args):
    "Decode attention bandwidth at 256 requests: sweep the tiling, keep the best for the engine runs that follow."
    from mini_vllm.fast import triton_attention as ta
    copy_bw = RESULTS.get("copy", {}).get("gb_per_s")
    cache, meta, q, k, v, seq, ql = _random_step(256, 1024, 1024, lambda i: 1)
    kv_bytes = sum(seq) * 4 * 64 * 2 * 2                                  # K and V, 2 bytes each, 4 KV heads of 64
    o, reqs = torch.empty_like(q), torch.arange(256, dtype=torch.int32, device="cuda")
    call = lambda max_len, **kw: (lambda: ta.paged_decode_attention(o, q, cache.k[0], cache.v[0], meta.block_tables, meta.seq_lens,
                                                                    meta.query_start_loc, reqs, 0.125, max_len, **kw))
    sweep = []
    for block_n in (32, 64, 128):
        for num_warps in (2, 4, 8):
            for num_stages in (2, 3, 4):
                try: ms = back_to_back_ms(call(1024, block_n=block_n, num_warps=num_warps, num_stages=num_stages))
                except Exception as e: ms = float("nan"); print("config failed", block_n, num_warps, num_stages, repr(e)[:200])
                sweep.append(dict(block_n=block_n, num_warps=num_warps, num_stages=num_stages, ms=ms, gb_per_s=kv_bytes / ms / 1e6))
    best = max((c for c in sweep if c["ms"] == c["ms"]), key=lambda c: c["gb_per_s"])
    ta.DECODE_TILING.update(block_n=best["block_n"], num_warps=best["num_warps"], num_stages=best["num_stages"])
    res = dict(sweep=sweep, best=best, copy_gb_per_s=copy_bw)
    for name, ctx, max_len in [("ctx1024", 1024, 1024), ("ctx1024_graph_max2048", 1024, 2048), ("ctx2048", 2048, 2048)]:
        if ctx != 1024: cache, meta, q, k, v, seq, ql = _random_step(256, ctx, ctx, lambda i: 1); o = torch.empty_like(q)
        kvb = sum(seq) * 4 * 64 * 2 * 2
        ms = back_to_back_ms(call(max_len))
        res[name] = dict(ms=ms, kv_bytes=kvb, gb_per_s=kvb / ms / 1e6, fraction_of_copy=kvb / ms / 1e6 / copy_bw if copy_bw else None)
    return res


def graph_us(calls) -> float:
    "Microseconds per call when the calls are recorded into one CUDA graph and replayed: the cost inside a decode graph."
    for c in calls: c()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls: c()
    return bench_ms(g.replay, warmup=2, reps=10) * 1e3 / len(calls)


GEMV_SHAPES = {"qkv": (2560, 2048), "o": (2048, 2048), "gate_up": (11264, 2048), "down": (2048, 5632), "lm_head": (32000, 2048)}


def sec_gemv(args):
    """Small-batch GEMV (04i) against cuBLAS at TinyLlama's shapes, bf16, inside CUDA graphs, each call on its own
    copy of the weights (so that they stream from HBM, not from the 60 MB L2): a tiling sweep, the fused variants,
    and their errors against the unfused path."""
    from mini_vllm.fast import small_batch as sb
    from mini_vllm.fast import triton_attention as ta, triton_kernels as tk
    from mini_vllm.loading import ModelConfig
    from mini_vllm.model import rope_tables
    dt, dev, res = DTYPE, "cuda", {}
    def configs(M):
        "Tilings to try for M rows: the fp32 products (M x BLOCK_N x BLOCK_K) at most 64 registers a thread."
        return [dict(block_n=bn, block_k=bk, num_warps=nw, num_stages=ns) for bn in (4, 8, 16, 32)
                for bk in (64, 128, 256, 512, 1024, 2048) for nw in (4, 8) for ns in ((1, 3) if M == 1 else (3,))
                if 512 <= M * bn * bk <= 2048 * nw and (M in (1, 8) or bn <= 8)]
    for M in ((1, 2, 4, 8) if args.gemv_sweep else (1, 2)):
        res[M] = {}
        for name, (N, K) in GEMV_SHAPES.items():
            copies = max(8, min(48, (400 << 20) // (N * K * 2)))
            ws = [torch.randn(N, K, dtype=dt, device=dev) * 0.02 for _ in range(copies)]
            x, y = torch.randn(M, K, dtype=dt, device=dev), torch.empty(M, N, dtype=dt, device=dev)
            nbytes = N * K * 2
            r = dict(cublas_us=graph_us([lambda w=w: torch.mm(x, w.t(), out=y) for w in ws]))
            r["triton_us"] = graph_us([lambda w=w: sb.gemv(x, w, out=y, pdl=True) for w in ws])   # as the model launches them
            r.update(tb_per_s=nbytes / r["triton_us"] / 1e6, cublas_tb_per_s=nbytes / r["cublas_us"] / 1e6)
            if args.gemv_sweep:
                sweep = []
                for c in configs(M):
                    try: us = graph_us([lambda w=w: sb.gemv(x, w, out=y, pdl=True, **c) for w in ws])
                    except Exception as e: print("  config failed", M, name, c, repr(e)[:160]); continue
                    sweep.append(dict(c, us=us))
                r.update(best=min(sweep, key=lambda c: c["us"]), sweep=sweep)
            res[M][name] = r
            print(f"  M={M} {name:8s} " + " ".join(f"{k} {v:.2f}" for k, v in r.items() if not isinstance(v, (list, dict))), flush=True)
            del ws
    # the fused variants at M=1 and 4, default tiling, against the unfused kernels
    H, HKV, D, C, I = 32, 4, 64, 2048, 5632
    cos, sin = (t.to(dev) for t in rope_tables(ModelConfig("llama", 10, C, 1, H, HKV, D, 8, 2048, 1e-5)))
    fused = {}
    for M in (1, 2):
        mk = lambda *s: torch.randn(*s, dtype=dt, device=dev)
        h, nw, wqkv, wo, wgu, wd = mk(M, C), mk(C), mk((H + 2 * HKV) * D, C) * 0.02, mk(C, C) * 0.02, mk(2 * I, C) * 0.02, mk(C, I) * 0.02
        pos, slots = torch.randint(0, 2048, (M,), device=dev), torch.randperm(1024, device=dev)[:M]
        kc, vc = torch.zeros(64, 16, HKV, D, dtype=dt, device=dev), torch.zeros(64, 16, HKV, D, dtype=dt, device=dev)
        kc2, vc2 = kc.clone(), vc.clone()
        ref = tk.rms_norm(h, nw, 1e-5) @ wqkv.T
        tk.rope_and_write_kv(ref, cos[pos], sin[pos], slots, kc2, vc2, H, HKV, D)
        got = sb.qkv_rope_write(h, nw, 1e-5, wqkv, None, cos, sin, pos, slots, kc, vc, H, HKV, D)
        e = dict(qkv_rope=max(rel_err(got, ref), rel_err(kc, kc2), rel_err(vc, vc2)))
        o = mk(M, C); r1 = h.clone(); sb.gemv(o, wo, residual=r1, out=r1); e["o_residual"] = rel_err(r1, h + o @ wo.T)
        e["gate_up_norm_silu"] = rel_err(sb.gemv(h, wgu, norm_weight=nw, eps=1e-5, silu_out=True),
                                         tk.silu_and_mul(tk.rms_norm(h, nw, 1e-5) @ wgu.T))
        a = mk(M, I); r2 = h.clone(); sb.gemv(a, wd, residual=r2, out=r2)
        e["down_residual"] = rel_err(r2, h + a @ wd.T)
        n_cp = 16
        wq_s = [wqkv.clone() for _ in range(n_cp)]
        t = dict(qkv_rope_us=graph_us([lambda w=w: sb.qkv_rope_write(h, nw, 1e-5, w, None, cos, sin, pos, slots, kc, vc, H, HKV, D, pdl=True) for w in wq_s]),
                 unfused_qkv_us=graph_us([lambda w=w: tk.rope_and_write_kv(tk.rms_norm(h, nw, 1e-5) @ w.T, cos[pos], sin[pos], slots, kc2, vc2, H, HKV, D) for w in wq_s]))
        del wq_s
        wg_s = [wgu.clone() for _ in range(6)]
        t.update(gate_up_fused_us=graph_us([lambda w=w: sb.gemv(h, w, norm_weight=nw, eps=1e-5, silu_out=True, pdl=True) for w in wg_s]),
                 unfused_gate_up_us=graph_us([lambda w=w: tk.silu_and_mul(tk.rms_norm(h, nw, 1e-5) @ w.T) for w in wg_s]))
        del wg_s
        fused[M] = dict(rel_err=e, **t)
        print(f"  fused M={M}: {fused[M]}", flush=True)
    res["fused"] = fused
    # decode attention of one request (the batch-1 graph sizes it for max_model_len 2048): partition size
    attn = {}
    for ctx in (400, 2000):
        cache, meta, q, k, v, seq, ql = _random_step(1, ctx, ctx, lambda i: 1)
        o, reqs = torch.empty_like(q), torch.zeros(1, dtype=torch.int32, device=dev)
        for part in (64, 128, 256, 512, None):
            call = lambda part=part: ta.paged_decode_attention(o, q, cache.k[0], cache.v[0], meta.block_tables, meta.seq_lens,
                                                               meta.query_start_loc, reqs, 0.125, 2048, partition=part)
            attn[f"ctx{ctx}_part{part or 'auto'}_us"] = graph_us([call] * 22)
    res["attention_batch1"] = attn
    print(f"  attention, batch 1: {attn}", flush=True)
    res["ok"] = all(v < TOLERANCE[dt] for f in fused.values() for v in f["rel_err"].values())
    return res


def _tie_report(ref_model, prompt, ours, theirs):
    "First divergence of two greedy continuations, and transformers' top-2 logit gap there."
    i = next((j for j, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
    if i is None: return dict(match=len(ours), diverged_at=None)
    with torch.inference_mode():
        ids = torch.tensor([prompt + theirs[:i]], device="cuda")
        top = ref_model(ids).logits[0, -1].float().topk(2).values
    gap = (top[0] - top[1]).item()
    return dict(match=i, diverged_at=i, top2_gap=gap)


def _count_device_steps(llm) -> list | None:
    "A counter, [n], of the steps the overlapped core launched from the device alone (04h's `advance`); else None."
    core, n = llm.llm_engine.core, [0]
    advance = getattr(core, "advance", None)
    if advance is None: return None                                 # one step at a time: every step is the host's

    def counted(last, out):
        step = advance(last, out)
        n[0] += step is not None
        return step
    core.advance = counted
    return n


def _loop(llm) -> dict:
    "Which loop an engine runs: async_scheduling and its core's class."
    e = llm.llm_engine
    return dict(async_scheduling=e.config.async_scheduling, core=type(e.core).__name__)


def sec_correct(args):
    from transformers import AutoModelForCausalLM
    from mini_vllm import LLM, SamplingParams
    from mini_vllm.decode import hf_greedy
    from mini_vllm.loading import save_tiny_model
    res, tmp = {}, Path(tempfile.mkdtemp())
    g = torch.Generator().manual_seed(0)
    # 1. a tiny random Llama in fp32: exact equality expected
    folder = save_tiny_model(tmp / "tiny", "llama")
    ref = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to("cuda").eval()
    prompts = [torch.randint(3, 512, (int(n),), generator=g).tolist() for n in torch.randint(2, 60, (12,), generator=g)]
    prompts += [torch.randint(3, 512, (n,), generator=g).tolist() for n in (16, 32, 48, 64)]  # round trips end on block boundaries
    theirs = [hf_greedy(ref, p, 100) for p in prompts]
    for label, max_num_seqs, one_ahead in (("tiny_llama_fp32", 16, True),           # buckets 16 / 1, 2, 4
                                           ("tiny_llama_fp32_small_batches", 3, True),
                                           ("tiny_llama_fp32_sync", 16, False)):     # the other loop
        llm = LLM(folder, dtype="float32", attention_backend="triton", max_model_len=256, max_num_seqs=max_num_seqs,
                  async_scheduling=one_ahead)
        device_steps = _count_device_steps(llm)
        outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=100, ignore_eos=True), use_tqdm=False)
        same = [o.outputs[0].token_ids == t for o, t in zip(outs, theirs)]
        res[label] = dict(prompts=len(prompts), tokens=100, identical=sum(same), max_num_seqs=max_num_seqs,
                          **_loop(llm), device_steps=device_steps and device_steps[0],
                          model_ops=type(llm.llm_engine.core.model.model.ops).__name__)
        del llm; torch.cuda.empty_cache()
    del ref
    # 2. TinyLlama-shape random weights in --dtype, through the GPU engine (CUDA graphs, one step ahead)
    cfg_dir = tinyllama_config_dir(tmp / "tinyllama")
    from transformers import AutoConfig
    from mini_vllm.fast import triton_kernels as tk
    torch.manual_seed(0)
    ref = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(cfg_dir), dtype=DTYPE).to("cuda").eval()
    ref.save_pretrained(tmp / "tinyllama_w")
    prompts = [torch.randint(3, 32000, (int(n),), generator=g).tolist() for n in torch.randint(10, 300, (8,), generator=g)]
    theirs = [hf_greedy(ref, p, 64) for p in prompts]
    pdl_default, pdl_here = tk.PDL, bool(tk.PDL and tk.pdl_supported())
    runs = [("", pdl_here)] + ([("_no_pdl", False)] if DTYPE == torch.float16 and pdl_here else [])
    try:
        for suffix, pdl in runs:                                    # fp16 also as a GPU without PDL runs it (sm_75)
            tk.PDL = pdl                                            # read at capture: the graphs record one path
            llm = LLM(tmp / "tinyllama_w", dtype=SHORT[DTYPE], attention_backend="triton", max_model_len=1024,
                      max_num_seqs=32)
            outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=64, ignore_eos=True), use_tqdm=False)
            reports = [_tie_report(ref, p, o.outputs[0].token_ids, t) for p, o, t in zip(prompts, outs, theirs)]
            gaps = [r["top2_gap"] for r in reports if r["diverged_at"] is not None]
            res[f"tinyllama_{SHORT[DTYPE]}{suffix}"] = dict(
                prompts=len(prompts), tokens=64, reports=reports, pdl=bool(pdl),
                identical=sum(r["diverged_at"] is None for r in reports), max_gap_at_divergence=max(gaps, default=None))
            del llm; torch.cuda.empty_cache()
    finally: tk.PDL = pdl_default
    del ref; torch.cuda.empty_cache()
    return res


def _engine(args, **kw):
    from mini_vllm import LLM
    cfg_dir = tinyllama_config_dir(Path(tempfile.mkdtemp()) / args.shape,
                                   config=LLAMA3_8B_CONFIG if args.shape == "llama3_8b" else None)
    base = dict(dtype=SHORT[DTYPE], load_format="dummy", attention_backend="triton", max_num_seqs=256, max_model_len=2048,
                quantization=args.quantization)
    return LLM(cfg_dir, **{**base, **kw})


LOOPS = {"async": True, "sync": False}     # async_scheduling: one step ahead (04k, the GPU default), one at a time


def variant_kwargs(label: str) -> dict:
    """The engine arguments of a `thru` variant: `async` or `sync` (the loop), then optionally `_b<N>` (a step's token
    budget, max_num_batched_tokens); `default`: LLM's own defaults (as many sequences as it chooses)."""
    if label == "default": return dict(max_num_seqs=None)
    loop, *rest = label.split("_")
    if loop not in LOOPS or any(not (r[:1] == "b" and r[1:].isdigit()) for r in rest):
        raise ValueError(f"thru variant {label!r}: async or sync, then optionally _b<tokens>; or default")
    return dict(async_scheduling=LOOPS[loop], **{"max_num_batched_tokens": int(r[1:]) for r in rest})


def sec_thru(args):
    from mini_vllm import SamplingParams
    work = public_workload(n=args.num_requests)
    res = {"workload": workload_stats(work)}
    prompts = [p for p, _ in work]
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for _, n in work]
    for label in args.thru_variants.split(","):                     # e.g. async, sync or async_b8192
        kw = variant_kwargs(label)
        t0 = time.perf_counter(); llm = _engine(args, **kw); t_init = time.perf_counter() - t0
        device_steps = _count_device_steps(llm)
        llm.generate(prompts[:8], params[:8], use_tqdm=False)                      # warm-up: every kernel compiled
        import triton
        compiled = []                            # kernels Triton specializes (compiles or loads from its cache) while timed
        triton.knobs.runtime.jit_cache_hook = lambda *, repr, **_: compiled.append(repr.split("[")[0])
        torch.cuda.synchronize(); t0 = time.perf_counter()
        try: outs = llm.generate(prompts, params, use_tqdm=False)
        finally: triton.knobs.runtime.jit_cache_hook = None
        torch.cuda.synchronize(); dt = time.perf_counter() - t0
        n_out = sum(len(o.outputs[0].token_ids) for o in outs)
        assert n_out == sum(n for _, n in work), "every request must produce exactly its output length"
        s = llm.stats()
        key = label if label not in res else f"{label}_run{sum(k.startswith(label) for k in res) + 1}"   # a repeated variant
        res[key] = dict(kw=kw, seconds=dt, output_tokens=n_out, output_tok_per_s=n_out / dt, init_seconds=t_init,
                        quantization=args.quantization, weight_bytes=llm.llm_engine.core.weight_bytes,
                        total_tok_per_s=(n_out + res["workload"]["prompt_tokens"]) / dt,
                        num_preemptions=s["num_preemptions"], kv_blocks_total=s["kv_blocks_total"],
                        compiles_in_timed_run=compiled, **_loop(llm),
                        device_steps=device_steps and device_steps[0])           # warm-up's and timed run's
        print(f"  {label}: {n_out / dt:,.0f} output tok/s ({dt:.2f} s), {len(compiled)} compiles while timed", flush=True)
        del llm; import gc; gc.collect(); torch.cuda.empty_cache()
    return res


def _gaps(prof) -> dict:
    "GPU busy time and idle gaps between kernels, from a profile's device events (microseconds)."
    ev = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.end > e.time_range.start)
    busy, gaps, end = 0.0, [], None
    for a, b in ev:
        if end is not None and a > end: gaps.append(a - end)
        busy += max(0.0, b - max(a, end or a)); end = b if end is None else max(end, b)
    return dict(kernels=len(ev), span_us=(end - ev[0][0]) if ev else 0, busy_us=busy,
                gaps_under_2us=sum(g for g in gaps if g < 2), gaps_2_to_20us=sum(g for g in gaps if 2 <= g < 20),
                gaps_over_20us=sum(g for g in gaps if g >= 20), num_gaps_over_20us=sum(g >= 20 for g in gaps))


def sec_batch1(args):
    """Batch-1 decode ms/token (with --batch1-size B, B requests together and ms a step): 128-token prompts, 512
    tokens, greedy. Variants (BATCH1_VARIANTS): the small-batch kernels (04i) one step ahead (the default), the same
    one step at a time (`async_scheduling=False`: every step prepared on the host), the same without programmatic
    dependent launch, and cuBLAS with the unfused kernels (GEMV_MAX_M = 0); each with a graph-only timing and a
    profile."""
    from torch.profiler import ProfilerActivity, profile
    from mini_vllm import SamplingParams
    from mini_vllm.fast import small_batch as sb, triton_kernels as tk
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, 32000, (128,), generator=g).tolist() for _ in range(args.batch1_size)]
    out, default_max_m, default_pdl = {}, sb.GEMV_MAX_M, tk.PDL
    try:
        for label in args.batch1_variants.split(","):
            max_m, pdl, one_ahead = BATCH1_VARIANTS[label]
            sb.GEMV_MAX_M = default_max_m if max_m is None else max_m      # read at capture: the graphs record one path
            tk.PDL = default_pdl if pdl is None else pdl
            llm = _engine(args, max_num_seqs=8, async_scheduling=one_ahead)
            device_steps = _count_device_steps(llm)
            run = lambda n: llm.generate(prompts, SamplingParams(temperature=0, max_tokens=n, ignore_eos=True), use_tqdm=False)
            run(64)
            run(1)                                                  # the prompt again, now from the prefix cache
            t = {}
            for n in (1, 513):
                torch.cuda.synchronize(); t0 = time.perf_counter(); res = run(n); torch.cuda.synchronize(); t[n] = time.perf_counter() - t0
            tokens = [list(r.outputs[0].token_ids) for r in res]
            core = llm.llm_engine.core
            bucket = min(b for b in core.runner.graphs if b >= len(prompts))     # the decode graph these rows replay
            graph_ms = back_to_back_ms(core.runner.graphs[bucket], reps=200)   # one forward, from the GPU's queue
            with profile(activities=[ProfilerActivity.CUDA]) as prof: run(65)
            (Path(args.out) / f"profile_batch1_{label}.txt").write_text(prof.key_averages().table(sort_by="cuda_time_total", row_limit=30))
            try: gaps = {k: v / 65 if k.endswith("us") else v for k, v in _gaps(prof).items()}
            except Exception as e: gaps = dict(error=repr(e))
            out[label] = dict(prompt_tokens=128, decode_tokens=512, requests=len(prompts),
                              ms_per_token=(t[513] - t[1]) / 512 * 1e3,                  # a step: a token each
                              prefill_plus_first_token_ms=t[1] * 1e3, **_loop(llm),
                              graph_replay_ms=graph_ms, model_ops=type(core.model.model.ops).__name__,
                              quantization=args.quantization, weight_bytes=core.weight_bytes,
                              tokens_sha1=hashlib.sha1(json.dumps(tokens).encode()).hexdigest(),
                              device_steps=device_steps and device_steps[0],
                              gpu_ms_per_token_profiled=sum(e.self_device_time_total for e in prof.key_averages()) / 1e3 / 65,
                              per_token_from_profile=gaps)
            print(f"  {label}: {out[label]['ms_per_token']:.3f} ms/token, graph {graph_ms:.3f} ms, gaps {gaps}", flush=True)
            del llm, core; import gc; gc.collect(); torch.cuda.empty_cache()
    finally:                                                        # as they were, whatever happened
        sb.GEMV_MAX_M, tk.PDL = default_max_m, default_pdl
    return out


BATCH1_VARIANTS = {                      # label: (GEMV_MAX_M, PDL, async_scheduling); None: the package's own
    "small_batch": (None, None, True), "small_batch_sync": (None, None, False),
    "small_batch_no_pdl": (None, False, True), "cublas": (0, False, True)}


def sec_profile(args):
    from torch.profiler import ProfilerActivity, profile
    from mini_vllm import SamplingParams
    llm = _engine(args, async_scheduling=LOOPS[args.profile_loop])
    work = public_workload(n=256)
    prompts = [p for p, _ in work]
    llm.generate(prompts[:8], SamplingParams(max_tokens=4), use_tqdm=False)
    eng = llm.llm_engine
    sched = eng.core.scheduler
    for p in prompts: eng.add_request(p, SamplingParams(temperature=0, max_tokens=1024, ignore_eos=True))
    torch.cuda.synchronize(); t0 = time.perf_counter(); n = 0
    while sched.waiting or any(r.num_computed_tokens < r.num_prompt_tokens for r in sched.running): eng.step(); n += 1
    torch.cuda.synchronize(); prefill_s = time.perf_counter() - t0
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(4): eng.step()
        torch.cuda.synchronize(); dt = time.perf_counter() - t0
    (Path(args.out) / "profile.txt").write_text(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25))
    totals = {}
    for e in prof.key_averages():
        t = getattr(e, "self_device_time_total", 0)
        if t <= 0: continue
        kind = ("attention" if "decode" in e.key or "prefill" in e.key or "merge" in e.key else
                "gemm" if "gemm" in e.key.lower() or "nvjet" in e.key or "cutlass" in e.key.lower() or "sm90" in e.key else "other")
        totals[kind] = totals.get(kind, 0) + t / 1e3
    return dict(prefill_all_256_seconds=prefill_s, prefill_steps=n, profiled_engine_steps=4, **_loop(llm),
                wall_ms=dt * 1e3, batch=len(sched.running), gpu_ms_by_kind=totals)


def _quant_copies(lin, n: int) -> dict:
    "n independent copies of a bf16 layer in each format, so that timed calls stream their weights from HBM."
    from mini_vllm.quant.quantization import QuantLinear
    out = {"bf16": [lin.weight.detach().clone() for _ in range(n)]}
    for fmt, bits, sym in (("int8", 8, True), ("int4", 4, True), ("int4_asym", 4, False)):
        q = QuantLinear(lin, bits, 128, sym)
        out[fmt] = [(q.qweight.clone(), dict(scales=q.scales.clone(), zeros=None if q.zeros is None else q.zeros.clone(),
                                             group_size=q.group_size)) for _ in range(n)]
        out[fmt + "_layer"] = q
    return out


def sec_quant(args):
    """Weight-only int8/int4 (05) at TinyLlama's shapes, in --dtype: each kernel's error against the dequantized weight,
    and microseconds per product inside CUDA graphs, every call on its own copy of the weights (about 256 MB of bf16
    per shape, so that they stream from HBM, not from L2): cuBLAS bf16, the bf16 GEMV (04i), the naive
    dequantize-then-matmul (05a's forward on a GPU), the int8/int4 GEMV up to QGEMV_MAX_M rows, qmm beyond."""
    from mini_vllm.quant.quant_kernels import QGEMV_MAX_M, qmm
    from mini_vllm.fast.small_batch import gemv
    res, dt = {"errors": {}, "us": {}, "bytes": {}}, DTYPE
    torch.manual_seed(0)
    for name, (N, K) in GEMV_SHAPES.items():
        if name == "lm_head": continue
        lin = torch.nn.Linear(K, N, bias=False, device="cuda", dtype=dt)
        torch.nn.init.normal_(lin.weight, std=0.02)
        n = max(2, (256 << 20) // (N * K * 2))
        cp = _quant_copies(lin, n)
        res["bytes"][name] = {f: sum(t.nbytes for t in (cp[f + "_layer"].qweight, cp[f + "_layer"].scales)) +
                              (cp[f + "_layer"].zeros.nbytes if cp[f + "_layer"].zeros is not None else 0)
                              for f in ("int8", "int4", "int4_asym")} | {"bf16": N * K * dt.itemsize}
        for M in (1, 2, 8, 16, 64, 256, 2048):
            x = torch.randn(M, K, device="cuda", dtype=dt)
            prod = gemv if M <= QGEMV_MAX_M else qmm
            for f in ("int8", "int4", "int4_asym"):
                ql = cp[f + "_layer"]
                ref = x.float() @ ql.dequantize(torch.float32).T
                res["errors"][f"{name}_{f}_M{M}"] = rel_err(prod(x, ql.qweight, **cp[f][0][1]), ref)
            calls = {"cublas_bf16": [lambda w=w: torch.nn.functional.linear(x, w) for w in cp["bf16"]]}
            if M <= 8: calls["gemv_bf16"] = [lambda w=w: gemv(x, w) for w in cp["bf16"]]
            if M <= 8: calls["naive_int4"] = [lambda: torch.nn.functional.linear(x, cp["int4_layer"].dequantize(dt))] * 4
            for f in ("int8", "int4", "int4_asym"):
                calls[f] = [lambda w=w, kw=kw: prod(x, w, **kw) for w, kw in cp[f]]
            res["us"][f"{name}_M{M}"] = {k: graph_us(c) for k, c in calls.items()}
            print(f"  {name} M={M}: " + ", ".join(f"{k} {v:.1f}" for k, v in res["us"][f"{name}_M{M}"].items()), flush=True)
        del cp; torch.cuda.empty_cache()
    worst = max(res["errors"].values())
    res["max_error"], res["passed"] = worst, worst < TOLERANCE[dt]
    return res


SECTIONS = dict(env=sec_env, copy=sec_copy, kernels=sec_kernels, gemv=sec_gemv, attnbw=sec_attnbw, correct=sec_correct,
                thru=sec_thru, batch1=sec_batch1, profile=sec_profile, quant=sec_quant)


def plots(out: Path):
    import matplotlib; matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    if "thru" in RESULTS:
        labels = [k for k in RESULTS["thru"] if k != "workload" and isinstance(RESULTS["thru"][k], dict)]
        plt.figure(figsize=(6, 3)); plt.bar(labels, [RESULTS["thru"][k]["output_tok_per_s"] for k in labels])
        plt.ylabel("output tok/s"); plt.title(f"mini_vllm, public workload, {RESULTS.get('env', {}).get('gpu', '')}")
        plt.tight_layout(); plt.savefig(out / "throughput.png", dpi=120); plt.close()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    p.add_argument("--sections", default=",".join(SECTIONS))
    p.add_argument("--num-requests", type=int, default=256)
    p.add_argument("--thru-variants", default="async,sync",
                   help="engine variants to time: async (one step ahead) or sync (one at a time), optionally with "
                        "_b<tokens> (the step's token budget); 'default': LLM's defaults (as many sequences as it "
                        "chooses)")
    p.add_argument("--profile-loop", default="async", choices=tuple(LOOPS), help="the profile section's loop")
    p.add_argument("--gemv-sweep", action="store_true", help="gemv section: also sweep the tilings (M = 1, 2, 4, 8)")
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"), help="the model's and kernels' dtype")
    p.add_argument("--quantization", default=None, choices=("int8", "int4"), help="weights of the engine sections")
    p.add_argument("--shape", default="tinyllama", choices=("tinyllama", "llama3_8b"),
                   help="the engine sections' model: TinyLlama-1.1B's shape, or Llama-3-8B's (dummy weights either way)")
    p.add_argument("--batch1-size", type=int, default=1, help="batch1 section: requests decoded together (1, 2, ...)")
    p.add_argument("--batch1-variants", default=",".join(BATCH1_VARIANTS), help=f"from {','.join(BATCH1_VARIANTS)}")
    p.add_argument("--quant-tiling", default=None, help='JSON {"bits,rows,kind": tiling} over small_batch.QUANT_TILING')
    p.add_argument("--int4-grid", default=None, help="GROUP,sym|asym: int4's groups and grid (default 128,sym, as "
                   "quantize_model; 64,asym is what LLM(quantization='int4') calibrates on real weights, 05c)")
    p.add_argument("--quant-lm-head", action="store_true", help="--quantization's format for the LM head too "
                   "(quantize_model's lm_head=True; by default it stays in the model's dtype)")
    p.add_argument("--mma-warps", default=None, help='JSON {"N": warps}: 05b2/05b3 tensor-core products of N '
                   "outputs take these warps a strip (at most 8 past 8 rows) instead of mma_warps'")
    p.add_argument("--qmm-tma-rows", default=None, help="LO,HI over quant_kernels.QMM_TMA_ROWS (0,0: never through TMA)")
    p.add_argument("--byte-split-rows", default=None,
                   help='over quant_kernels.BYTE_SPLIT_ROWS: LO,HI for every kind, or JSON {"kind": [LO, HI]} for '
                        'some (wide, deep, narrow); 0,0 with --no-norm-split: no int8 layer through byte_split_mm')
    p.add_argument("--no-gated-split", action="store_true",
                   help="int8's down projection splits silu_and_mul's output in a kernel of its own instead of "
                        "applying SwiGLU's gate as it splits (quant_kernels.ByteSplitMLP as 04g's MLP)")
    p.add_argument("--no-norm-split", action="store_true",
                   help="int8: no norm splits the next layer's inputs (quant_kernels.ByteSplitRMSNorm as 04g's norm)")
    p.add_argument("--dequant-min-m", type=int, default=None,
                   help="over quant_kernels.DEQUANT_MIN_M and DEQUANT_MIN_M_WIDE, both formats: rows from which a layer rebuilds its weight for cuBLAS")
    p.add_argument("--qmm-tiling", default=None, help='JSON {"rows": {key: value}} over the entries of quant_kernels.QMM_TILING')
    args = p.parse_args(argv)
    for label in args.thru_variants.split(","):                     # a wrong name fails now, not minutes in
        try: variant_kwargs(label)
        except ValueError as e: p.error(str(e))
    if bad := [v for v in args.batch1_variants.split(",") if v not in BATCH1_VARIANTS]:
        p.error(f"unknown --batch1-variants {bad}: choose from {','.join(BATCH1_VARIANTS)}")
    unknown = [s for s in args.sections.split(",") if s not in SECTIONS]
    if unknown: p.error(f"unknown --sections {unknown}: choose from {','.join(SECTIONS)}")
    global DTYPE
    DTYPE = getattr(torch, args.dtype)
    RESULTS["dtype"], RESULTS["quantization"], RESULTS["shape"] = args.dtype, args.quantization, args.shape
    if args.quant_tiling:                                           # a variant of 04i's tilings for quantized weights
        from mini_vllm.fast import small_batch as sb
        for key, t in json.loads(args.quant_tiling).items():
            bits, m, kind = key.split(",")
            sb.QUANT_TILING[(int(bits), int(m), kind)] = t
        RESULTS["quant_tiling"] = json.loads(args.quant_tiling)
    if args.mma_warps:                                              # int4_mma and int8_mma read it when called
        from mini_vllm.quant import int4_mma as i4, int8_mma as i8
        plain_warps, table = i4.mma_warps, {int(n): w for n, w in json.loads(args.mma_warps).items()}
        i4.mma_warps = i8.mma_warps = lambda N, K, g, M: (min(table[N], 16 if M <= 8 else 8) if N in table
                                                          else plain_warps(N, K, g, M))
        RESULTS["mma_warps"] = table
    if args.int4_grid:                                              # every quantize_model call of the engines
        from mini_vllm.quant import quantization as qz
        group, grid = args.int4_grid.split(",")
        if grid not in ("sym", "asym"): p.error("--int4-grid: GROUP,sym or GROUP,asym")
        if args.quantization != "int4": p.error("--int4-grid goes with --quantization int4")
        plain_grid = qz.quantize_model
        qz.quantize_model = lambda *a, **kw: plain_grid(*a, **{**kw, "group_size": int(group),
                                                               "symmetric": grid == "sym"})
        RESULTS["int4_grid"] = args.int4_grid
    if args.quant_lm_head:                                          # every quantize_model call of the engines
        from mini_vllm.quant import quantization as qz
        plain = qz.quantize_model
        qz.quantize_model = lambda *a, **kw: plain(*a, **{**kw, "lm_head": True})
        RESULTS["quant_lm_head"] = True
    if args.qmm_tma_rows:                                           # chapter 05's int8 products through TMA: which rows
        from mini_vllm.quant import quant_kernels as qk
        qk.QMM_TMA_ROWS = tuple(int(v) for v in args.qmm_tma_rows.split(","))
        RESULTS["qmm_tma_rows"] = qk.QMM_TMA_ROWS
    if args.byte_split_rows:                                        # chapter 05's int8 tensor cores: which rows
        from mini_vllm.quant import quant_kernels as qk
        v = args.byte_split_rows
        over = json.loads(v) if v.startswith("{") else {k: [int(r) for r in v.split(",")] for k in qk.BYTE_SPLIT_ROWS}
        qk.BYTE_SPLIT_ROWS = {**qk.BYTE_SPLIT_ROWS, **{k: tuple(r) for k, r in over.items()}}
        RESULTS["byte_split_rows"] = qk.BYTE_SPLIT_ROWS
    if args.no_gated_split:                                         # the gate by silu_and_mul, then the split
        from mini_vllm.quant import quant_kernels as qk
        qk.ByteSplitMLP.forward = qk.LlamaMLP.forward
        RESULTS["gated_split"] = False
    if args.no_norm_split:                                          # chapter 05's norms that split: left out
        from mini_vllm.quant import quant_kernels as qk
        qk.ByteSplitRMSNorm.forward = qk.RMSNorm.forward
        RESULTS["norm_split"] = False
    if args.dequant_min_m is not None:                              # chapter 05's prompts: weight rebuilt from these rows
        from mini_vllm.quant import quant_kernels as qk
        qk.DEQUANT_MIN_M = qk.DEQUANT_MIN_M_WIDE = {8: args.dequant_min_m, 4: args.dequant_min_m}
        RESULTS["dequant_min_m"] = args.dequant_min_m
    if args.qmm_tiling:                                             # a variant of chapter 05's qmm tilings
        from mini_vllm.quant import quant_kernels as qk
        over = {int(k) if k != "None" else None: v for k, v in json.loads(args.qmm_tiling).items()}
        qk.QMM_TILING[:] = [(top, {**t, **over.get(top, {})}) for top, t in qk.QMM_TILING]
        RESULTS["qmm_tiling"] = json.loads(args.qmm_tiling)
    out = Path(args.out); out.mkdir(parents=True, exist_ok=True)
    for name in args.sections.split(","):
        t0 = time.perf_counter()
        try: RESULTS[name] = SECTIONS[name](args)
        except Exception as e:
            RESULTS[name] = dict(error=repr(e), traceback=traceback.format_exc())
            print(traceback.format_exc(), flush=True)
        print(f"[{name}] {time.perf_counter() - t0:.1f}s {json.dumps(RESULTS[name], default=str)[:600]}", flush=True)
        save(out)
    try: plots(out)
    except Exception: print(traceback.format_exc())
    save(out)


if __name__ == "__main__":
    main()
    os._exit(0)
