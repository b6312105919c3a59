"""Real vLLM beside mini_vllm (and transformers) on one GPU, in one run: the GPU counterpart of cpu_side_by_side.py.

One model shape (`--shape`: TinyLlama-1.1B by default, the Llama-3-8B shape, or Qwen3-0.6B, the model of nano-vllm's
own benchmark; `workload.SHAPES`, written to a temporary folder with no tokenizer) with dummy bf16 weights, greedy,
EOS ignored. Each engine runs in a process of its own, one after another, and the process
group of each is killed when it ends (vLLM's engine-core process outlives the Python that started it):
  vllm          `vllm.LLM` with default settings: skip_tokenizer_init, token-id prompts, load_format="dummy",
                VLLM_USE_FLASHINFER_SAMPLER=0 (flashinfer is not installed)
  mini_vllm     gpu_bench's engines: its `thru` one (Triton attention and kernels, CUDA graphs, one step ahead:
                `async_scheduling=True`, 16,384-token budget, 256 sequences, max_model_len 2048) for the workloads,
                and its `batch1` one (the same with max_num_seqs=8) for batch 1
  hf            transformers continuous batching (paged|sdpa, CUDA graphs; hf_baselines.run_continuous), public
                workload only, TinyLlama's shape only
  vllm_seqs256  vLLM with max_num_seqs=256, mini_vllm's (vLLM's own default on a GPU of 70 GiB or more is 1024)
  mini_vllm_sync  the mini_vllm engines one step at a time (`async_scheduling=False`: the host reads a step's tokens
                before it prepares the next) instead of one step ahead (chapter 04k); not in the default --engines
  mini_vllm_default  `mini_vllm.LLM(folder, dtype=..., load_format="dummy")`, every engine argument at its default
                (on a GPU `attention_backend="auto"` resolves to the Triton kernels and CUDA graphs), batch 1 on the
                same engine; not in the default --engines
  nano_vllm     nano-vllm (github.com/GeeeekExplorer/nano-vllm, its source folder in $NANO_VLLM_SRC, xxhash installed)
                with the settings of its own bench.py (max_model_len 4096, CUDA graphs, its other defaults), Qwen3's
                shape only. It reads safetensors (no dummy load): random bf16 weights are written for it first. It
                refuses greedy sampling, so it samples at temperature 0.6 as its bench.py does (EOS ignored, the same
                lengths). Its `flash_attn` calls go to vLLM's build of FlashAttention (`vllm.vllm_flash_attn`: the
                flash-attn package has no wheel here), its decode call as a varlen call of one query a request. Its
                tokenizer is replaced by one that only knows the EOS id (the prompts are ids). Not in the default
                --engines; what it has run so far: benchmarks/README.md
Workloads: `public` (256 requests, prompt and output lengths U[100, 1024], seed 0, as gpu_bench's thru), `public320`
(320 requests drawn the same way, none of them the public ones: more than 256 at once), and batch 1 (gpu_bench's
batch1: a 128-token prompt, 512 decode tokens; ms/token = (time of 513 tokens - time of 1) / 512, after the prompt
is in the prefix cache).
Each engine also reports batch 1 on its throughput engine (`batch1_thru_engine`).

The public workload is nano-vllm's benchmark drawn with this book's generator (nano-vllm draws ids below 10,000, these
are below 32,000). Engines run in the order given while the time budget (--budget seconds) leaves what each needs
(NEED); the rest are recorded as skipped. Writes vllm_side_by_side_h200.json (vllm_side_by_side_h200_<shape>.json for
the other shapes) into --out after every engine (--append keeps the engines already there that this run does not
repeat), with each engine's log in _<engine>.log beside it. Run from the repo root, vLLM installed
(benchmarks/vllm_h200.sh install):
  python3 benchmarks/vllm_side_by_side.py --out /tmp/sbs --engines vllm,mini_vllm,hf --budget 480
  python3 benchmarks/vllm_side_by_side.py --out /tmp/sbs --shape llama3_8b --engines vllm,mini_vllm --budget 480
A smoke test on a CPU (tiny Llama, small workloads; mini_vllm and transformers only):
  .venv/bin/python benchmarks/vllm_side_by_side.py --smoke --out /tmp/sbs --engines mini_vllm,hf
  .venv/bin/python benchmarks/vllm_side_by_side.py --smoke --out /tmp/sbs --shape qwen3_0.6b --engines mini_vllm
"""
import argparse, json, os, platform, shutil, signal, subprocess, sys, tempfile, time, traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(HERE))

from workload import SHAPE_NAMES, SHAPES, draw_workload, public_workload, shape_config_dir, workload_stats  # noqa: E402

NEED = {"vllm": 150, "mini_vllm": 100, "hf": 230, "vllm_seqs256": 120,       # seconds an engine needs, start included
        "mini_vllm_default": 70, "mini_vllm_sync": 100, "nano_vllm": 120}
CAP = {"vllm": 330, "mini_vllm": 240, "hf": 320, "vllm_seqs256": 300,        # its process's limit
       "mini_vllm_default": 200, "mini_vllm_sync": 240, "nano_vllm": 240}
JSON_NAME = "vllm_side_by_side_h200.json"


def workloads(smoke: bool) -> dict:
    if smoke: return {"public": draw_workload(12, (16, 64), (8, 32)), "public320": draw_workload(15, (16, 64), (8, 32))}
    return {"public": public_workload(256), "public320": public_workload(320)}


def batch1_setup(smoke: bool):
    "gpu_bench's batch1 prompt (128 ids from a generator seeded 1) and decode length (512; 16 in a smoke test)."
    import torch
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 32000, (128,), generator=g).tolist(), (16 if smoke else 512)


def timed(fn, sync):
    sync(); t0 = time.perf_counter(); r = fn(); sync()
    return time.perf_counter() - t0, r


def measure_workloads(ask, greedy, work_sets, res, save, sync=lambda: None):
    "Output tok/s of each workload, after a warm-up on the first 8 requests (as gpu_bench's thru)."
    first = work_sets["public"][:8]
    ask([p for p, _ in first], [greedy(n) for _, n in first])
    for name, work in work_sets.items():
        try:
            dt, outs = timed(lambda: ask([p for p, _ in work], [greedy(n) for _, n in work]), sync)
            n_out = sum(len(o.outputs[0].token_ids) for o in outs)
            want, n_prompt = sum(n for _, n in work), sum(len(p) for p, _ in work)
            res[name] = dict(seconds=dt, output_tokens=n_out, expected_output_tokens=want, complete=n_out == want,
                             output_tok_per_s=n_out / dt, total_tok_per_s=(n_out + n_prompt) / dt)
            print(f"  {name}: {n_out / dt:,.0f} output tok/s ({dt:.2f} s, {n_out} tokens)", flush=True)
        except Exception as e:
            res[name] = dict(error=repr(e), traceback=traceback.format_exc()[-2000:]); print(traceback.format_exc())
        save()


def measure_batch1(ask, greedy, prompt, decode, sync=lambda: None) -> dict:
    "gpu_bench's batch1 timing: warm up, put the prompt in the prefix cache, then time 1 and decode + 1 tokens."
    run = lambda n: ask([prompt], [greedy(n)])
    run(64); run(1)
    t1, _ = timed(lambda: run(1), sync)
    tn, outs = timed(lambda: run(decode + 1), sync)
    r = dict(prompt_tokens=len(prompt), decode_tokens=decode, ms_per_token=(tn - t1) / decode * 1e3,
             prefill_plus_first_token_ms=t1 * 1e3, output_tokens=len(outs[0].outputs[0].token_ids))
    print(f"  batch 1: {r['ms_per_token']:.3f} ms/token", flush=True)
    return r


# --- children: one engine each --------------------------------------------------------------------------------
def child_vllm(model_dir, a, res, save, max_num_seqs=None):
    import vllm
    from vllm import LLM, SamplingParams
    kw = dict(model=model_dir, skip_tokenizer_init=True, load_format="dummy", dtype=a.dtype, seed=0)
    if max_num_seqs: kw["max_num_seqs"] = max_num_seqs
    res.update(version=vllm.__version__, kwargs=kw)
    t0 = time.perf_counter(); llm = LLM(**kw); res["init_seconds"] = time.perf_counter() - t0
    try:                                                        # what the defaults resolved to
        c = llm.llm_engine.vllm_config
        res["resolved"] = dict(max_num_seqs=c.scheduler_config.max_num_seqs,
                               max_num_batched_tokens=c.scheduler_config.max_num_batched_tokens,
                               max_model_len=c.model_config.max_model_len, dtype=str(c.model_config.dtype),
                               block_size=c.cache_config.block_size, num_gpu_blocks=c.cache_config.num_gpu_blocks,
                               gpu_memory_utilization=c.cache_config.gpu_memory_utilization,
                               enable_prefix_caching=c.cache_config.enable_prefix_caching,
                               cudagraph_mode=str(c.compilation_config.cudagraph_mode),
                               async_scheduling=getattr(c.scheduler_config, "async_scheduling", None))
    except Exception as e: res["resolved"] = dict(error=repr(e))
    save()
    greedy = lambda n: SamplingParams(temperature=0, max_tokens=n, ignore_eos=True, detokenize=False)
    ask = lambda prompts, params: llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    measure_workloads(ask, greedy, workloads(a.smoke), res, save)
    prompt, decode = batch1_setup(a.smoke)
    res["batch1"] = measure_batch1(ask, greedy, prompt, decode)


def child_vllm_seqs256(model_dir, a, res, save):
    child_vllm(model_dir, a, res, save, max_num_seqs=256)


def child_mini_vllm(model_dir, a, res, save, defaults=False, one_ahead=True):
    import gc, torch
    from mini_vllm import LLM, SamplingParams
    cuda = a.device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    base = dict(dtype=a.dtype, load_format="dummy")
    if not defaults: base.update(max_num_seqs=256, max_model_len=2048, async_scheduling=one_ahead)
    if not cuda: base.update(device="cpu")
    elif not defaults: base.update(attention_backend="triton", max_num_batched_tokens=16384)
    res["kwargs"] = base
    if cuda: res["gpu"] = torch.cuda.get_device_name(0)
    greedy = lambda n: SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
    t0 = time.perf_counter(); llm = LLM(model_dir, **base); res["init_seconds"] = time.perf_counter() - t0
    ask = lambda prompts, params: llm.generate(prompts, params, use_tqdm=False)
    measure_workloads(ask, greedy, workloads(a.smoke), res, save, sync)
    s = llm.stats()
    eng = llm.llm_engine
    res["engine"] = dict(async_scheduling=eng.config.async_scheduling, core=type(eng.core).__name__,
                         kv_blocks_total=s.get("kv_blocks_total"), num_preemptions=s.get("num_preemptions"),
                         max_model_len=eng.max_model_len, max_num_seqs=eng.max_num_seqs,
                         max_num_batched_tokens=eng.config.max_num_batched_tokens,
                         runner=type(eng.core.runner).__name__)
    prompt, decode = batch1_setup(a.smoke)
    res["batch1_thru_engine"] = measure_batch1(ask, greedy, prompt, decode, sync)
    save()
    if defaults: return
    del llm, ask, eng; gc.collect()                             # eng holds the engine too
    if cuda: torch.cuda.empty_cache()
    llm = LLM(model_dir, **{**base, "max_num_seqs": 8})          # gpu_bench's batch1 engine
    ask = lambda prompts, params: llm.generate(prompts, params, use_tqdm=False)
    res["batch1"] = dict(measure_batch1(ask, greedy, prompt, decode, sync), max_num_seqs=8)


def child_mini_vllm_default(model_dir, a, res, save):
    "`LLM(folder, dtype=..., load_format=\"dummy\")`: every engine argument at its default (the backend `auto`)."
    child_mini_vllm(model_dir, a, res, save, defaults=True)


def child_mini_vllm_sync(model_dir, a, res, save):
    "The mini_vllm engines one step at a time (`async_scheduling=False`) instead of one step ahead."
    child_mini_vllm(model_dir, a, res, save, one_ahead=False)


def child_hf(model_dir, a, res, save):
    import torch
    import hf_baselines as hb
    if a.shape != "tinyllama": raise ValueError("hf_baselines builds TinyLlama's shape only")
    cuda = a.device == "cuda"
    t0 = time.perf_counter()
    model = hb.build_model(a.device, tiny=a.smoke, dtype=getattr(torch, a.dtype))
    res["init_seconds"] = time.perf_counter() - t0
    r = hb.run_continuous(model, workloads(a.smoke)["public"], a.device, cuda_graphs=cuda,
                          num_blocks=None if cuda else 16, max_batch_tokens=None if cuda else 256)
    res["public"] = dict(seconds=r["seconds"], output_tokens=r["output_tokens"], output_tok_per_s=r["output_tok_per_s"],
                         details=r)
    print(f"  public: {r['output_tok_per_s']:,.0f} output tok/s", flush=True)


def nano_flash_attn():
    "A `flash_attn` module for nano-vllm: its two calls served by vLLM's FlashAttention build."
    import importlib.machinery, types, torch
    from vllm.vllm_flash_attn import flash_attn_varlen_func as varlen

    def flash_attn_varlen_func(q, k, v, max_seqlen_q, cu_seqlens_q, max_seqlen_k, cu_seqlens_k, softmax_scale,
                               causal, block_table=None):
        if block_table is None:                                  # keys and values of this step, not paged
            return varlen(q, k, v, max_seqlen_q, cu_seqlens_q, max_seqlen_k, cu_seqlens_k=cu_seqlens_k,
                          softmax_scale=softmax_scale, causal=causal)
        used = (cu_seqlens_k[1:] - cu_seqlens_k[:-1]).to(torch.int32)   # paged: lengths, not offsets
        # nano-vllm pads its block tables with -1, vLLM's with 0 (the only padding its kernel has met)
        return varlen(q, k, v, max_seqlen_q, cu_seqlens_q, max_seqlen_k, seqused_k=used,
                      softmax_scale=softmax_scale, causal=causal, block_table=block_table.clamp(min=0))

    def flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens, block_table, softmax_scale, causal):
        B = q.shape[0]                                           # q (B, 1, H, D): one query a request
        cu_q = torch.arange(B + 1, dtype=torch.int32, device=q.device)
        o = varlen(q.reshape(B, *q.shape[2:]), k_cache, v_cache, 1, cu_q, block_table.shape[1] * k_cache.shape[1],
                   seqused_k=cache_seqlens, softmax_scale=softmax_scale, causal=causal,
                   block_table=block_table.clamp(min=0))
        return o.view(q.shape)

    m = types.ModuleType("flash_attn")
    m.__spec__ = importlib.machinery.ModuleSpec("flash_attn", None)
    m.flash_attn_varlen_func, m.flash_attn_with_kvcache = flash_attn_varlen_func, flash_attn_with_kvcache
    return m


def child_nano_vllm(model_dir, a, res, save):
    import types, torch
    if a.shape != "qwen3_0.6b": raise ValueError("nano-vllm runs Qwen3 only")
    from transformers import AutoConfig, AutoModelForCausalLM
    t0 = time.perf_counter()                                    # random weights, saved as safetensors
    folder = Path(tempfile.mkdtemp()) / "weights"
    torch.manual_seed(0)
    with torch.device("cuda"):
        AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir), dtype=torch.bfloat16) \
            .save_pretrained(folder)
    shutil.copy(Path(model_dir) / "config.json", folder / "config.json")
    torch.cuda.empty_cache()
    res["weights_seconds"] = time.perf_counter() - t0
    sys.modules["flash_attn"] = nano_flash_attn()               # after transformers built the weights
    sys.path.insert(0, os.environ["NANO_VLLM_SRC"])
    import nanovllm.engine.llm_engine as engine_module
    from nanovllm import LLM, SamplingParams
    eos = json.loads((Path(model_dir) / "config.json").read_text())["eos_token_id"]
    tokenizer = types.SimpleNamespace(eos_token_id=eos, decode=lambda ids: "")
    engine_module.AutoTokenizer = types.SimpleNamespace(from_pretrained=lambda *args, **kw: tokenizer)
    kw = dict(enforce_eager=False, max_model_len=4096)                  # nano-vllm's bench.py
    res.update(kwargs=kw, sampling="temperature 0.6, EOS ignored (nano-vllm refuses greedy sampling)",
               attention="vllm.vllm_flash_attn (varlen) in place of flash_attn")
    t0 = time.perf_counter(); llm = LLM(str(folder), **kw); res["init_seconds"] = time.perf_counter() - t0
    res["num_kvcache_blocks"] = len(llm.scheduler.block_manager.blocks)
    steps = res["steps"] = dict(prefill=0, prefill_tokens=0, decode=0, preemptions=0)
    step, preempt = llm.step, llm.scheduler.preempt

    def counted_step():                          # what its steps are: the record is saved every 100 steps
        out, n = step()
        steps["prefill" if n > 0 else "decode"] += 1
        steps["prefill_tokens"] += max(n, 0)
        if (steps["prefill"] + steps["decode"]) % 100 == 0: save()
        return out, n

    def counted_preempt(seq):
        steps["preemptions"] += 1
        return preempt(seq)

    llm.step, llm.scheduler.preempt = counted_step, counted_preempt
    greedy = lambda n: SamplingParams(temperature=0.6, max_tokens=n, ignore_eos=True)   # the name the timers use
    wrap = lambda d: types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=d["token_ids"])])
    ask = lambda prompts, params: [wrap(d) for d in llm.generate(prompts, params, use_tqdm=False)]
    measure_workloads(ask, greedy, workloads(a.smoke), res, save, torch.cuda.synchronize)
    prompt, decode = batch1_setup(a.smoke)
    res["batch1_thru_engine"] = measure_batch1(ask, greedy, prompt, decode, torch.cuda.synchronize)


CHILDREN = {"vllm": child_vllm, "mini_vllm": child_mini_vllm, "hf": child_hf, "vllm_seqs256": child_vllm_seqs256,
            "mini_vllm_default": child_mini_vllm_default, "mini_vllm_sync": child_mini_vllm_sync,
            "nano_vllm": child_nano_vllm}


# --- parent ---------------------------------------------------------------------------------------------------
def gpu_pids() -> list[int]:
    "Processes holding the GPU (none on a machine without nvidia-smi)."
    try: out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired): return []
    return [int(x) for x in out.split() if x.strip().isdigit()]


def run_child(name, model_dir, a, out: Path, timeout: float) -> dict:
    "One engine in a process group of its own; its JSON (partial if it was cut short), or the error it ended with."
    dest, log_path = out / f"_{name}.json", out / f"_{name}.log"
    dest.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(ROOT)) if p),
               PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if name.startswith("vllm"): env.update(VLLM_USE_FLASHINFER_SAMPLER="0", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--model-dir", model_dir, "--child-out",
           str(dest), "--device", a.device, "--dtype", a.dtype, "--shape", a.shape] + (["--smoke"] if a.smoke else [])
    t0 = time.perf_counter()
    with open(log_path, "w") as log:              # never a pipe: vLLM's engine process may outlive its parent
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try: proc.wait(timeout)
        except subprocess.TimeoutExpired: pass
        finally:                                  # the whole group: vLLM's engine core lives on otherwise,
            try: os.killpg(proc.pid, signal.SIGKILL)   # holding the GPU the next engine is measured on
            except ProcessLookupError: pass
            proc.wait()
    res = json.loads(dest.read_text()) if dest.exists() else {}
    if proc.returncode or "error" in res or not dest.exists():
        res.setdefault("error", f"exit code {proc.returncode}" + (" (time limit)" if proc.returncode == -9 else ""))
        res["log_tail"] = log_path.read_text(errors="replace")[-3000:]
    res["wall_seconds"] = time.perf_counter() - t0
    for _ in range(30):                           # the GPU's memory back before the next engine starts
        if not gpu_pids(): break
        time.sleep(1)
    else:
        left = gpu_pids()                         # this run's leftovers (nothing else uses the GPU here)
        for pid in left:
            try: os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError): pass
        res["leftover_gpu_pids_killed"] = left
    return res


def environment(a) -> dict:
    env = dict(python=platform.python_version(), machine=f"{platform.machine()}, {os.cpu_count()} cores",
               command=" ".join(sys.argv), date=time.strftime("%Y-%m-%d %H:%M:%S"), dtype=a.dtype)
    try:                                       # the host's processor: both engines' Python runs on it
        env["cpu"] = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration): env["cpu"] = platform.processor() or None
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20).stdout.strip().splitlines()
        if q: env.update(gpu=q[0].split(",")[0].strip(), driver=q[0].split(",")[1].strip(),
                         gpu_memory=q[0].split(",")[2].strip(), gpus=len(q))
    except (OSError, subprocess.TimeoutExpired): env["gpu"] = None
    from importlib.metadata import PackageNotFoundError, version
    for pkg in ("torch", "triton", "transformers", "vllm"):       # versions without importing (no CUDA context here)
        try: env[pkg] = version(pkg)
        except PackageNotFoundError: env[pkg] = None
    env["commit"] = os.environ.get("MINI_VLLM_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip() or "unknown"
    return env


def ratios(res) -> dict:
    "mini_vllm (and transformers, vLLM at 256 sequences) over vLLM: throughput ratios, and batch-1 speed-up."
    tps = lambda e, w: res.get(e, {}).get(w, {}).get("output_tok_per_s")
    r = {}
    for w in ("public", "public320"):
        base = tps("vllm", w)
        for e in ("mini_vllm", "mini_vllm_default", "mini_vllm_sync", "hf", "vllm_seqs256", "nano_vllm"):
            if base and tps(e, w): r[f"{w}_{e}_over_vllm"] = tps(e, w) / base
        if tps("mini_vllm", w) and tps("nano_vllm", w):
            r[f"{w}_mini_vllm_over_nano_vllm"] = tps("mini_vllm", w) / tps("nano_vllm", w)
    ms = lambda e, k="batch1": res.get(e, {}).get(k, {}).get("ms_per_token")
    if ms("vllm") and ms("mini_vllm"):
        r["batch1_vllm_ms_over_mini_vllm_ms"] = ms("vllm") / ms("mini_vllm")     # > 1: mini_vllm is faster
    for w in ("public", "public320"):                                          # LLM() as it comes, against the
        if tps("mini_vllm", w) and tps("mini_vllm_default", w):                # settings gpu_bench chose
            r[f"{w}_mini_vllm_default_over_mini_vllm"] = tps("mini_vllm_default", w) / tps("mini_vllm", w)
    if ms("mini_vllm_default", "batch1_thru_engine") and ms("mini_vllm", "batch1_thru_engine"):
        r["batch1_mini_vllm_default_ms_over_mini_vllm_ms"] = (ms("mini_vllm_default", "batch1_thru_engine")
                                                              / ms("mini_vllm", "batch1_thru_engine"))
    if ms("vllm") and ms("mini_vllm", "batch1_thru_engine"):
        r["batch1_thru_engine_vllm_ms_over_mini_vllm_ms"] = ms("vllm") / ms("mini_vllm", "batch1_thru_engine")
    return r


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    p.add_argument("--engines", default=None, help=f"in order, from {','.join(CHILDREN)} (default: vllm,mini_vllm,"
                   "hf,vllm_seqs256; hf for TinyLlama's shape only)")
    p.add_argument("--budget", type=float, default=480, help="seconds for the whole run; engines that no longer fit are skipped")
    p.add_argument("--append", action="store_true", help="keep the engines of an earlier run in --out's JSON")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--shape", default="tinyllama", choices=tuple(SHAPES), help="the model's shape (workload.SHAPES)")
    p.add_argument("--smoke", action="store_true", help="tiny Llama and small workloads (a CPU check of the script)")
    p.add_argument("--child"); p.add_argument("--model-dir"); p.add_argument("--child-out")
    a = p.parse_args(argv)
    a.engines = a.engines or ("vllm,mini_vllm,hf,vllm_seqs256" if a.shape == "tinyllama"
                              else "vllm,mini_vllm,vllm_seqs256")
    if a.child:                                   # inside one engine's process
        res, dest = {}, Path(a.child_out)
        save = lambda: dest.write_text(json.dumps(res, indent=1, default=str))
        code = 0
        try: CHILDREN[a.child](a.model_dir, a, res, save)
        except BaseException as e:
            res["error"] = repr(e); res["traceback"] = traceback.format_exc()[-3000:]; print(res["traceback"]); code = 1
        save(); sys.stdout.flush()
        os._exit(code)                            # vLLM and transformers leave threads behind
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # stopped by `timeout`: still kill the running child
    t_start = time.perf_counter()
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    path = out / (JSON_NAME if a.shape == "tinyllama" else JSON_NAME.replace(".json", f"_{a.shape}.json"))
    res = json.loads(path.read_text()) if a.append and path.exists() else {}
    earlier = res.get("env", {}).get("command")                # an appended run keeps the commands before it
    res["env"] = environment(a)
    if earlier: res["env"]["command"] = f"{earlier}; then {res['env']['command']}"
    res["model"] = (f"small {a.shape} (smoke test)" if a.smoke else f"{SHAPE_NAMES[a.shape]} config") + \
        f", dummy weights, {a.dtype}"
    res["shape"] = a.shape
    res["workloads"] = {k: workload_stats(v) for k, v in workloads(a.smoke).items()}
    res["batch1_setup"] = (f"gpu_bench's batch1: 128-token prompt (seed 1), {batch1_setup(a.smoke)[1]} decode tokens, "
                           "timed after the prompt is in the prefix cache")
    tmp = tempfile.mkdtemp(prefix=f"{a.shape}-")
    model_dir = str(shape_config_dir(Path(tmp) / a.shape, a.shape, tiny=a.smoke))
    for name in a.engines.split(","):
        left = a.budget - (time.perf_counter() - t_start)
        need = 0 if a.smoke else NEED[name]
        if left < need:
            res[name] = dict(skipped=f"{left:.0f} s of the budget left, {need} s needed")
            print(f"{name}: skipped, {left:.0f} s left", flush=True); continue
        print(f"{name} ... ({left:.0f} s of the budget left)", flush=True)
        res[name] = run_child(name, model_dir, a, out, min(CAP[name], left - 5))
        r = res[name]
        print(f"  {name} done in {r['wall_seconds']:.0f} s" + (f", error: {r['error']}" if "error" in r else ""), flush=True)
        for w in ("public", "public320"):
            if "output_tok_per_s" in r.get(w, {}):
                print(f"  {name} {w}: {r[w]['output_tok_per_s']:,.0f} output tok/s ({r[w]['seconds']:.2f} s, "
                      f"{r[w]['output_tokens']} tokens)", flush=True)
        for k in ("batch1", "batch1_thru_engine"):
            if "ms_per_token" in r.get(k, {}): print(f"  {name} {k}: {r[k]['ms_per_token']:.3f} ms/token", flush=True)
        if "error" in r: print(r.get("log_tail", "")[-1200:], flush=True)
        res["ratios"] = ratios(res)
        path.write_text(json.dumps(res, indent=1, default=str))
    res["ratios"] = ratios(res)
    res["total_seconds"] = time.perf_counter() - t_start
    path.write_text(json.dumps(res, indent=1, default=str))
    print(json.dumps(res["ratios"], indent=1), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
