"""Where a CPU step's time goes: mini_vllm on SmolLM2-135M (bf16), the CPU side-by-side's workload, profiled by kind of step.

    .venv/bin/python benchmarks/cpu_profile.py [--out DIR]

Two passes over the same engine. The first only times: output tok/s of the workload (64 requests, cpu_side_by_side.py's)
and of one request alone, and ms per step of each kind. The second runs under torch.profiler and splits each kind's
time into GEMMs, attention (the K/V write, the gather of blocks, the attention product), other tensor ops, and what is
left: Python and framework work between the ops. Kinds of step: "decode" (every request adds one token), "mixed"
(prompt chunks, with or without decodes beside them), "batch 1" (one request decoding alone).
Writes DIR/cpu_profile.json (default benchmarks/results) and prints a table.
"""
import argparse, json, os, platform, sys, time
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workload import cpu_workload

GEMM = ("aten::mm", "aten::addmm", "aten::bmm", "mkldnn::_linear_pointwise", "mkldnn_linear")
ATTENTION = ("attention", "aten::index_select", "aten::index_copy_", "paged")


def category(name: str) -> str:
    if any(name.startswith(g) for g in GEMM): return "gemm"
    if any(a in name for a in ATTENTION): return "attention"
    return "other ops"


def kind_of(out) -> str:
    if len(out.requests) == 1 and out.num_new_tokens == [1]: return "batch 1"
    return "decode" if all(n == 1 for n in out.num_new_tokens) else "mixed"


def run_workload(llm, work, SamplingParams, label_steps: bool) -> tuple[float, int, dict]:
    "Generate the workload; seconds, output tokens, and per kind of step: count, seconds, tokens."
    eng, runner = llm.llm_engine, llm.llm_engine.runner
    execute, steps = runner.execute, defaultdict(lambda: [0, 0.0, 0])

    def timed_execute(out, *a, **kw):
        k = kind_of(out)
        t0 = time.perf_counter()
        if label_steps:
            with record_function(f"step:{k}"): r = execute(out, *a, **kw)
        else: r = execute(out, *a, **kw)
        s = steps[k]; s[0] += 1; s[1] += time.perf_counter() - t0; s[2] += sum(out.num_new_tokens)
        return r

    runner.execute = timed_execute
    try:
        g = lambda n: SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
        t0 = time.perf_counter()
        outs = llm.generate([p for p, _ in work], [g(n) for _, n in work], use_tqdm=False)
        dt = time.perf_counter() - t0
    finally: runner.execute = execute
    return dt, sum(len(o.outputs[0].token_ids) for o in outs), dict(steps)


def split(prof) -> dict:
    "Per kind of step: milliseconds in each category, summed over the labelled steps."
    res = defaultdict(lambda: defaultdict(float))

    def walk(e, acc):
        for c in e.cpu_children:
            acc[category(c.name)] += c.self_cpu_time_total / 1e3
            walk(c, acc)

    for e in prof.events():
        if e.name.startswith("step:"):
            acc = res[e.name[5:]]
            before = sum(acc.values())
            walk(e, acc)
            acc["python and framework"] += e.cpu_time_total / 1e3 - (sum(acc.values()) - before)
    return {k: dict(v) for k, v in res.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    p.add_argument("--attention-backend", default="torch")
    args = p.parse_args(argv)
    from mini_vllm import LLM, SamplingParams
    from mini_vllm.loading import resolve_model_path
    llm = LLM(str(resolve_model_path(None)), dtype="bfloat16", attention_backend=args.attention_backend)
    work, one = cpu_workload(), cpu_workload(n=1, prompt=(128, 128), output=(128, 128), seed=2)
    run_workload(llm, work[:2], SamplingParams, False)                                    # warm-up
    res = dict(env=dict(machine=f"{platform.machine()}, {os.cpu_count()} cores", torch=torch.__version__,
                        threads=torch.get_num_threads(), commit=os.popen("git rev-parse --short HEAD").read().strip(),
                        command="benchmarks/cpu_profile.py " + " ".join(argv if argv is not None else sys.argv[1:])))
    for name, w in (("workload", work), ("batch1", one)):
        dt, n, steps = run_workload(llm, w, SamplingParams, False)
        res[name] = dict(seconds=dt, output_tokens=n, output_tok_per_s=n / dt,
                         steps={k: dict(count=c, ms_per_step=s / c * 1e3, tokens=t) for k, (c, s, t) in steps.items()})
        print(f"{name}: {n / dt:.1f} output tok/s ({dt:.1f} s)", flush=True)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run_workload(llm, work, SamplingParams, True)
        run_workload(llm, one, SamplingParams, True)
    parts = split(prof)
    res["profile_ms"] = parts
    print(f"\n{'step':<10}{'count':>6}{'ms/step':>9}   share of profiled time: " + ", ".join(
        ("gemm", "attention", "other ops", "python and framework")))
    for k, v in parts.items():
        w = res["batch1" if k == "batch 1" else "workload"]["steps"][k]
        tot = sum(v.values())
        shares = "  ".join(f"{c} {v.get(c, 0) / tot:5.1%}" for c in ("gemm", "attention", "other ops",
                                                                      "python and framework"))
        print(f"{k:<10}{w['count']:>6}{w['ms_per_step']:>9.1f}   {shares}")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "cpu_profile.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
