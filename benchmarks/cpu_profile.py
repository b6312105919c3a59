"""Where a CPU step's time goes: mini_vllm on SmolLM2-135M (bf16), the CPU side-by-side's workload, by kind of step.

    .venv/bin/python benchmarks/cpu_profile.py [--out DIR]

Two passes over the same engine. The first only times: output tok/s of the workload (64 requests, cpu_side_by_side.py's)
and of one request alone, and ms per step of each kind. The second also times every call of a linear layer (GEMMs) and
of the attention (the K/V write, any gather of blocks, the attention product), and splits each kind's time into those
and everything else (norms, RoPE, SwiGLU, sampling, Python). On a CPU each op is done when its call returns, so wall
clocks around the calls measure them; torch.profiler slowed this workload's prompt steps 3-9x and was not used.
Kinds of step: "decode" (every request adds one token), "mixed"
(prompt chunks, with or without decodes beside them), "batch 1" (one request decoding alone).
Writes DIR/cpu_profile.json (default benchmarks/results) and prints a table.
"""
import argparse, json, os, platform, sys, time
from collections import defaultdict
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]   # repo root, here
from workload import cpu_workload

def kind_of(out) -> str:
    if len(out.requests) == 1 and out.num_new_tokens == [1]: return "batch 1"
    return "decode" if all(n == 1 for n in out.num_new_tokens) else "mixed"


class Clock:
    """Seconds spent in the model's linear layers (GEMMs) and in its attention calls, by wall clock around each call:
    on a CPU every op runs before its call returns. (torch.profiler slowed the prompt steps of this workload 3-9x.)"""
    def __init__(self, llm):
        self.runner, self.gemm, self.attention, self.hooks = llm.llm_engine.core.runner, 0.0, 0.0, []
        for m in self.runner.model.modules():
            if type(m).__name__ in ("Linear", "PackedLinear"):
                self.hooks.append(m.register_forward_pre_hook(self._start))
                self.hooks.append(m.register_forward_hook(self._stop))
        cls, clock = self.runner.attn_cls, self
        self.cls, self.call = cls, cls.__call__

        def timed_call(attn, *a, **kw):
            t0 = time.perf_counter()
            try: return clock.call(attn, *a, **kw)
            finally: clock.attention += time.perf_counter() - t0
        cls.__call__ = timed_call

    def _start(self, m, args): self.t0 = time.perf_counter()
    def _stop(self, m, args, out): self.gemm += time.perf_counter() - self.t0

    def close(self):
        for h in self.hooks: h.remove()
        self.cls.__call__ = self.call


def run_workload(llm, work, SamplingParams, parts=None) -> tuple[float, int, dict]:
    """Generate the workload; seconds, output tokens, and per kind of step: count, seconds, tokens. With `parts` (a
    dict), linear layers and attention are timed too, and `parts[kind]` sums each category's milliseconds."""
    runner = llm.llm_engine.core.runner
    llm.reset_prefix_cache()                                    # every pass computes every prompt
    execute, steps = runner.execute, defaultdict(lambda: [0, 0.0, 0])
    clock = Clock(llm) if parts is not None else None

    def timed_execute(out, *a, **kw):
        k = kind_of(out)
        if clock: g0, a0 = clock.gemm, clock.attention
        t0 = time.perf_counter(); r = execute(out, *a, **kw); dt = time.perf_counter() - t0
        if clock:
            acc = parts.setdefault(k, defaultdict(float))
            acc["gemm"] += (clock.gemm - g0) * 1e3
            acc["attention"] += (clock.attention - a0) * 1e3
            acc["everything else"] += (dt - (clock.gemm - g0) - (clock.attention - a0)) * 1e3
        s = steps[k]; s[0] += 1; s[1] += dt; s[2] += sum(out.num_new_tokens)
        return r

    runner.execute = timed_execute
    try:
        g = lambda n: SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
        t0 = time.perf_counter()
        outs = llm.generate([p for p, _ in work], [g(n) for _, n in work], use_tqdm=False)
        dt = time.perf_counter() - t0
    finally:
        runner.execute = execute
        if clock: clock.close()
    return dt, sum(len(o.outputs[0].token_ids) for o in outs), dict(steps)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    p.add_argument("--attention-backend", default="auto")
    args = p.parse_args(argv)
    from mini_vllm import LLM, SamplingParams
    from mini_vllm.loading import resolve_model_path
    llm = LLM(str(resolve_model_path(None)), dtype="bfloat16", attention_backend=args.attention_backend)
    work, one = cpu_workload(), cpu_workload(n=1, prompt=(128, 128), output=(128, 128), seed=2)
    run_workload(llm, work[:2], SamplingParams)                                    # warm-up
    res = dict(env=dict(machine=f"{platform.machine()}, {os.cpu_count()} cores", torch=torch.__version__,
                        threads=torch.get_num_threads(), attention=llm.llm_engine.core.runner.attn_cls.__name__,
                        commit=os.popen("git rev-parse --short HEAD").read().strip(),
                        command="benchmarks/cpu_profile.py " + " ".join(argv if argv is not None else sys.argv[1:])))
    for name, w in (("workload", work), ("batch1", one)):
        dt, n, steps = run_workload(llm, w, SamplingParams)
        res[name] = dict(seconds=dt, output_tokens=n, output_tok_per_s=n / dt,
                         steps={k: dict(count=c, ms_per_step=s / c * 1e3, tokens=t) for k, (c, s, t) in steps.items()})
        print(f"{name}: {n / dt:.1f} output tok/s ({dt:.1f} s)", flush=True)
    parts = {}
    for name, w in (("workload", work), ("batch1", one)):
        dt, n, _ = run_workload(llm, w, SamplingParams, parts)
        res[name]["timed_pass_tok_per_s"] = n / dt                     # what the clocks cost: compare with the first
    res["profile_ms"] = parts = {k: dict(v) for k, v in parts.items()}
    print(f"\n{'step':<10}{'count':>6}{'ms/step':>9}   share of the timed pass's time")
    for k, v in parts.items():
        w = res["batch1" if k == "batch 1" else "workload"]["steps"][k]
        tot = sum(v.values())
        shares = "  ".join(f"{c} {v.get(c, 0) / tot:5.1%}" for c in ("gemm", "attention", "everything else"))
        print(f"{k:<10}{w['count']:>6}{w['ms_per_step']:>9.1f}   {shares}")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "cpu_profile.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
