"""GPU runs behind benchmarks/README.md's persistent-kernel and fused gate_up tiling rows (results in $OUT/persist.json).

    PYTHONPATH=$PWD STAGES=test,layers,gu,engine VARIANTS='{"base": {}}' python3 benchmarks/experiments/persistent_bench.py

Stages: test (persistent_check.py in fp32 and bf16), layers (22 TinyLlama-shape layers in a CUDA graph: 04i's kernels
against each persistent-kernel variant in VARIANTS, a JSON dict of name -> PersistentLayers tiling; "timed": true adds
per-phase clock stamps), gu (the fused gate_up + SwiGLU tiling sweep), engine (batch-1 ms/token through LLM with
ENGINE_VARIANT against 04i's kernels).
"""
import os, sys, json, time, tempfile, subprocess, torch
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent)); sys.path.insert(0, str(Path(__file__).parent.parent))
OUT = Path(os.environ.get("OUT", "/tmp/out")); OUT.mkdir(exist_ok=True, parents=True)
logf = open(OUT / "persist_log.txt", "a")
def P(*a):
    print(*a, flush=True); print(*a, file=logf, flush=True)
res = json.loads((OUT / "persist.json").read_text()) if (OUT / "persist.json").exists() else {}
def save(): (OUT / "persist.json").write_text(json.dumps(res, indent=1))
T0 = time.time()
stages = os.environ.get("STAGES", "test,layers,engine").split(",")
if "test" in stages:
    for dt in ("float32", "bfloat16"):
        r = subprocess.run([sys.executable, str(Path(__file__).parent / "persistent_check.py")], env={**os.environ, "PT_DTYPE": dt}, capture_output=True, text=True, timeout=300)
        P(f"test {dt}: rc {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        res[f"test_{dt}"] = r.returncode
    save()
import persistent_layer as pd
from mini_vllm.small_batch import use_small_batch_kernels
from mini_vllm.triton_kernels import use_triton_kernels, TritonPagedAttention
from mini_vllm.model import load_model
from mini_vllm.paged_attention import AttentionMetadata, PagedKVCache
from workload import tinyllama_config_dir
import gpu_bench as gb

def graph_ms(fn, reps=100):
    fn(); torch.cuda.synchronize()
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s): fn()
    torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g): fn()
    for _ in range(5): g.replay()
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(reps): g.replay()
    torch.cuda.synchronize(); return (time.perf_counter() - t) / reps * 1e3

VARIANTS = json.loads(os.environ.get("VARIANTS", '{"base": {}}'))
if "layers" in stages:
    cfgdir = tinyllama_config_dir(Path(tempfile.mkdtemp()) / "tl")
    model = use_small_batch_kernels(use_triton_kernels(load_model(cfgdir, dtype="bfloat16", device="cuda", load_format="dummy")))
    m = model.model
    cache = PagedKVCache.allocate(model.config, 300, 16, torch.bfloat16, "cuda")
    cache.k.normal_(); cache.v.normal_()
    for M in (1, 2):
        ctx = [600, 900][:M]
        meta = AttentionMetadata.build([1] * M, ctx, [list(range(i * 64, i * 64 + 64)) for i in range(M)], 16, "cuda")
        ids = torch.randint(0, 32000, (M,), device="cuda")
        attn = TritonPagedAttention(cache, meta, max_seq_len=2048)
        small = lambda: m(ids, meta.positions, attn)
        ref = small().float()
        res[f"M{M}_small_batch_ms"] = graph_ms(small)
        P(f"M={M} small-batch layers+norm: {res[f'M{M}_small_batch_ms']:.4f} ms")
        save()
        for name, v in VARIANTS.items():
            if M == 2 and name not in os.environ.get("M2_VARIANTS", "base").split(","): continue
            if time.time() - T0 > float(os.environ.get("BUDGET", 400)): P("budget over"); break
            try:
                PL = pd.PersistentLayers(m, **v)
                def fn():
                    h = m.embed_tokens(ids); PL.forward_model(m, h, meta.positions, attn, 2048); return m.norm(h)
                t = time.time(); o = fn().float(); torch.cuda.synchronize(); tc = time.time() - t
                err = ((o - ref).norm() / ref.norm()).item()
                ms = graph_ms(fn)
                res[f"M{M}_{name}"] = dict(ms=ms, rel_err=err, compile_s=tc, tiling=v)
                if v.get("timed"):
                    tm = PL.times.double().cpu()                        # (layers, 12, [clock, globaltimer])
                    d = (tm[:, 1:, :] - tm[:, :-1, :]).mean(0)           # per interval, mean over layers
                    names = ["qkv", "bar1", "attn", "bar2", "merge", "bar3", "o", "bar4", "gate_up", "bar5", "down"]
                    res[f"M{M}_{name}"]["phases_cycles"] = dict(zip(names, d[:, 0].tolist()))
                    res[f"M{M}_{name}"]["phases_ns"] = dict(zip(names, d[:, 1].tolist()))
                    P("   cycles: " + " ".join(f"{n}={c:.0f}" for n, c in zip(names, d[:, 0].tolist())))
                    P("   ns:     " + " ".join(f"{n}={c:.0f}" for n, c in zip(names, d[:, 1].tolist())))
                    P(f"   layer span: {(tm[:, 11, 1] - tm[:, 0, 1]).mean():.0f} ns; sm clock {torch.cuda.get_device_properties(0).clock_rate if hasattr(torch.cuda.get_device_properties(0), 'clock_rate') else '?'} kHz")
                P(f"M={M} {name}: {ms:.4f} ms, rel err {err:.2e} (first call {tc:.1f}s)")
            except Exception as e:
                P(f"M={M} {name}: FAILED {e!r}"[:2000]); res[f"M{M}_{name}"] = repr(e)[:500]
            save()
    del model, m, cache; torch.cuda.empty_cache()
if "gu" in stages:                  # fused gate_up + SwiGLU tilings, each call on its own weight copy
    from mini_vllm.small_batch import gemv
    for M in (1, 2):
        x = torch.randn(M, 2048, device="cuda", dtype=torch.bfloat16); nw = torch.rand(2048, device="cuda", dtype=torch.bfloat16)
        ws = [torch.randn(11264, 2048, device="cuda", dtype=torch.bfloat16) for _ in range(8)]
        for bn in (2, 4):
            for bk in (256, 512, 1024, 2048):
                for nw_ in (4, 8):
                    try:
                        us = gb.graph_us([lambda w=w: gemv(x, w, norm_weight=nw, silu_out=True, block_n=bn, block_k=bk, num_warps=nw_) for w in ws])
                        res[f"gu_M{M}_bn{bn}_bk{bk}_w{nw_}"] = us
                    except Exception as e: P(f"gu {bn} {bk} {nw_}: {e!r}"[:300])
        best = sorted((v, k) for k, v in res.items() if k.startswith(f"gu_M{M}_"))[:5]
        P(f"gate_up fused M={M} best: {best}")
        save()
if "engine" in stages:
    import mini_vllm.small_batch as sb
    from mini_vllm import SamplingParams
    best = os.environ.get("ENGINE_VARIANT", "base")
    orig = sb.use_small_batch_kernels
    def use(model):
        model = orig(model)
        if type(model.model) is sb.SmallBatchLlamaModel:
            model.model.__class__ = pd.PersistentLlamaModel; pd.PersistentLlamaModel.tiling = VARIANTS.get(best, {})
        return model
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, 32000, (128,), generator=g).tolist()
    class A: pass
    toks = {}
    for label in ("persistent", "small_batch"):
        sb.use_small_batch_kernels = use if label == "persistent" else orig
        llm = gb._engine(A(), max_num_seqs=8)
        run = lambda n: llm.generate([prompt], SamplingParams(temperature=0, max_tokens=n, ignore_eos=True), use_tqdm=False)
        run(64); t = {}
        for n in (1, 513):
            torch.cuda.synchronize(); t0 = time.perf_counter(); o = run(n); torch.cuda.synchronize(); t[n] = time.perf_counter() - t0
        toks[label] = o[0].outputs[0].token_ids
        eng = llm.llm_engine
        gm = gb.back_to_back_ms(eng.runner.graphs[1], reps=200)
        res[f"engine_{label}"] = dict(ms_per_token=(t[513] - t[1]) / 512 * 1e3, graph_replay_ms=gm, model_class=type(eng.model.model).__name__)
        P(f"engine {label}: {res[f'engine_{label}']}")
        save(); del llm, eng; import gc; gc.collect(); torch.cuda.empty_cache()
    sb.use_small_batch_kernels = orig
    same = next((i for i, (a, b) in enumerate(zip(toks["persistent"], toks["small_batch"])) if a != b), len(toks["persistent"]))
    res["engine_tokens_identical_prefix"] = same; P(f"engine greedy tokens identical for the first {same}"); save()
P(f"total {time.time() - T0:.0f}s")
