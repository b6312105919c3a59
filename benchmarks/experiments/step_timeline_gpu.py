"""Where the overlapped loop's steps (chapter 04k) spend their time on a CUDA GPU: for each engine step of
`LLM(..., async_scheduling=True)` on the public workload (256 requests) and on 320 requests, the host's time in
`schedule`, in launching the next step (`_launch`), in waiting for the step before it (the runner's `collect`), and in
recording its tokens (the core's `_record`, the output processor's `process`);
the step's batch, and whether it was advanced on the device (a graph replay of the same requests) or prepared on
the host. Then the GPU's busy share over a stretch of full-batch steps (torch.profiler, device events only).
A step whose wait is near zero was the host's; one that waits was the GPU's. Each variant is an engine of its own
in this process, one after another: one step ahead (`async`) or one step at a time (`sync`, wall time only), with
steps that bring prompt chunks replayed from chapter 04h's mixed buckets or, `_eager`, run eagerly; `async_prepared`:
one step ahead with the step after a mixed replay prepared on the host (04h's `_hand_on` switched off). (The
recorded runs had `windows` variants, 32-step decode windows, since removed, and `async_pin_each`, every copy to the
GPU pinned on its own, whose `to_device_gpu.py` is gone: `git show fdc22f4:benchmarks/step_timeline_gpu.py`.)
A variant named twice runs twice (an engine each time), the second as `<variant>_again`.
`--host-profile`: the host's own calls (CUDA runtime and aten, self time) over 30 full-batch steps of 320 requests,
after the first async variant's timed runs; with `--py-profile` also its Python functions (cProfile, own time) over
the 30 steps after those.
TinyLlama-1.1B shape, dummy bf16. From the repo root:
  PYTHONPATH=/tmp/site MINI_VLLM_COMMIT=<commit> python3 benchmarks/experiments/step_timeline_gpu.py --out $OUT/timeline
"""
import argparse, gc, json, os, sys, tempfile, time
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent), str(HERE)]   # repo root, benchmarks/, here
import torch
from mini_vllm import LLM, SamplingParams
from workload import public_workload, tinyllama_config_dir


class Timeline:
    "Per-step records of the overlapped loop, filled by wrappers around its phases."
    PHASES = ("schedule", "launch", "wait", "record")

    def __init__(self, eng):
        core = eng.core                                   # chapter 04k's OverlappedEngineCore
        self.eng, self.steps, self.cur, self.undo = eng, [], None, [(core, "advance", core.advance, True)]
        self._wrap(core.scheduler, "schedule", "schedule")
        self._wrap(core, "_launch", "launch")
        self._wrap(core.runner, "collect", "wait")
        self._wrap(core, "_record", "record")
        self._wrap(eng.output_processor, "process", "record")
        advance = core.advance                            # 04h's device path: None when the step is the host's
        def spy(last, out):
            r = advance(last, out)
            if self.cur is not None: self.cur["device"] = r is not None
            return r
        if advance is not None: core.advance = spy

    def close(self):
        "Put back what the wrappers replaced (an instance's own attribute removed again: no bound method left behind)."
        for owner, name, fn, own in reversed(self.undo):
            if own: setattr(owner, name, fn)
            else: delattr(owner, name)

    def _wrap(self, owner, name, phase):
        fn = getattr(owner, name)
        self.undo.append((owner, name, fn, name in vars(owner)))
        def timed(*a, **k):
            t = time.perf_counter()
            try: return fn(*a, **k)
            finally:
                if self.cur is not None: self.cur[phase] += time.perf_counter() - t
        setattr(owner, name, timed)

    def step(self):
        self.cur = dict.fromkeys(self.PHASES, 0.0)
        sched = self.eng.core.scheduler
        self.cur.update(device=None, batch=len(sched.running), waiting=len(sched.waiting))
        t = time.perf_counter()
        self.eng.step()
        self.cur["wall"] = time.perf_counter() - t
        self.steps.append(self.cur); self.cur = None


def summary(steps) -> dict:
    def mean_ms(rows, k): return round(sum(r[k] for r in rows) / max(1, len(rows)) * 1e3, 3)
    out = {}
    for name, sel in [("all", lambda r: True), ("device_path", lambda r: r["device"] is True),
                      ("host_path", lambda r: r["device"] is False),
                      ("device_path_batch_ge_200", lambda r: r["device"] is True and r["batch"] >= 200),
                      ("host_path_batch_ge_200", lambda r: r["device"] is False and r["batch"] >= 200)]:
        rows = [r for r in steps if sel(r)]
        out[name] = dict(steps=len(rows), wall_s=round(sum(r["wall"] for r in rows), 3),
                         **{f"{k}_ms": mean_ms(rows, k) for k in ("wall",) + Timeline.PHASES})
    return out


def run(llm, work, label, profile_steps=(200, 300)):
    from torch.profiler import ProfilerActivity, profile
    eng = llm.llm_engine
    tl = Timeline(eng)
    for p, n in work: eng.add_request(p, SamplingParams(temperature=0, max_tokens=n, ignore_eos=True))
    torch.cuda.synchronize(); t0 = time.perf_counter()
    while eng.has_unfinished_requests(): tl.step()
    torch.cuda.synchronize(); wall = time.perf_counter() - t0
    tl.close()
    out_tokens = sum(n for _, n in work)
    res = dict(label=label, seconds=round(wall, 3), tok_s=round(out_tokens / wall), steps=len(tl.steps),
               summary=summary(tl.steps),
               per_step=[[round(r["wall"] * 1e3, 3), r["batch"], r["waiting"], r["device"]] +
                         [round(r[k] * 1e3, 3) for k in Timeline.PHASES] for r in tl.steps])
    # the GPU's busy share over a stretch of steps, in a second run of the same workload
    from gpu_bench import _gaps
    for p, n in work: eng.add_request(p, SamplingParams(temperature=0, max_tokens=n, ignore_eos=True))
    for _ in range(profile_steps[0]): eng.step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(profile_steps[1] - profile_steps[0]): eng.step()
        torch.cuda.synchronize(); dt = time.perf_counter() - t0
    g = _gaps(prof)
    kinds = {}
    for e in prof.key_averages():
        t = getattr(e, "self_device_time_total", 0)
        if t > 0: kinds[e.key[:60]] = round(t / 1e3, 3)
    res["profile"] = dict(steps=profile_steps, wall_ms=round(dt * 1e3, 2), batch=len(eng.core.scheduler.running),
                          gpu_busy_ms=round(g["busy_us"] / 1e3, 2), gaps=g,
                          top_kernels_ms=dict(sorted(kinds.items(), key=lambda kv: -kv[1])[:25]))
    while eng.has_unfinished_requests(): eng.step()
    return res


def host_profile(llm, work, steps=(100, 130), python=False) -> dict:
    """The host's calls by self time over `steps` of the workload (torch.profiler, CPU events), with their counts;
    python=True: then its Python functions by own time over as many steps after them (cProfile)."""
    import cProfile, pstats
    from torch.profiler import ProfilerActivity, profile
    eng = llm.llm_engine
    for p, n in work: eng.add_request(p, SamplingParams(temperature=0, max_tokens=n, ignore_eos=True))
    for _ in range(steps[0]): eng.step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps[1] - steps[0]): eng.step()
        torch.cuda.synchronize()
    rows = sorted(((e.key[:60], e.self_cpu_time_total, e.count) for e in prof.key_averages()), key=lambda r: -r[1])
    res = dict(steps=steps, top_self_cpu=[[k, round(t / 1e3, 3), c] for k, t, c in rows[:40]])
    if python:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(steps[1] - steps[0]): eng.step()
        torch.cuda.synchronize()
        pr.disable()
        st = pstats.Stats(pr).stats          # (file, line, name) -> (primitive calls, calls, own s, cumulative s, _)
        top = sorted(st.items(), key=lambda kv: -kv[1][2])[:40]
        res["python_own_ms"] = [[f"{Path(f).name}:{ln}:{fn}", round(t * 1e3, 3), round(c * 1e3, 3), n]
                                for (f, ln, fn), (_, n, t, c, _) in top]
    while eng.has_unfinished_requests(): eng.step()
    return res


def build(cfg, mixed: bool, **kw):
    "An engine, warmed up; mixed=False: steps with prompt chunks run eagerly (the runner's mixed buckets dropped)."
    t0 = time.perf_counter()
    llm = LLM(cfg, dtype="bfloat16", load_format="dummy", attention_backend="triton", max_num_seqs=256,
              max_model_len=2048, max_num_batched_tokens=16384, **kw)
    built = time.perf_counter() - t0
    if not mixed: llm.llm_engine.core.runner.mixed = []
    warm = public_workload(n=64)
    llm.generate([q for q, _ in warm], SamplingParams(temperature=0, max_tokens=64, ignore_eos=True), use_tqdm=False)
    return llm, built


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--workloads", default="256,320")
    p.add_argument("--variants", default="async,async_eager,sync,sync_eager",
                   help="async: one step ahead; sync: one step at a time; _eager: prompt steps not replayed; "
                        "async_prepared: the step after a mixed replay prepared on the host")
    p.add_argument("--host-profile", action="store_true", help="profile the host's calls (first async variant)")
    p.add_argument("--py-profile", action="store_true", help="with --host-profile: its Python functions too")
    a = p.parse_args(argv)
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    cfg = tinyllama_config_dir(Path(tempfile.mkdtemp()) / "tl")
    results = {}
    for v in a.variants.split(","):
        llm, built = build(cfg, not v.endswith("_eager"), async_scheduling=v.startswith("async"))
        if v == "async_prepared": llm.llm_engine.core.runner._hand_on = lambda meta: None
        v = v if v not in results else f"{v}_again"
        results[v] = dict(engine_build_s=round(built, 2), mixed_buckets=llm.llm_engine.core.runner.mixed)
        for n in map(int, a.workloads.split(",")):
            work, key = public_workload(n=n), str(n) if str(n) not in results[v] else f"{n}_again"
            if v.startswith("async"):
                results[v][key] = r = run(llm, work, f"{v}_{n}")
                print(v, n, r["seconds"], r["tok_s"], json.dumps(r["summary"]), json.dumps(r["profile"]["gaps"]),
                      flush=True)
            else:
                params = [SamplingParams(temperature=0, max_tokens=m, ignore_eos=True) for _, m in work]
                torch.cuda.synchronize(); t0 = time.perf_counter()
                llm.generate([q for q, _ in work], params, use_tqdm=False); torch.cuda.synchronize()
                dt = time.perf_counter() - t0
                results[v][key] = dict(seconds=round(dt, 3), tok_s=round(sum(m for _, m in work) / dt))
                print(v, n, results[v][key], flush=True)
        results[v]["mixed_replays"] = llm.llm_engine.core.runner.mixed_replays
        if a.host_profile and v.startswith("async") and not any("host_profile" in r for r in results.values()):
            results[v]["host_profile"] = hp = host_profile(llm, public_workload(n=320), python=a.py_profile)
            print(v, "host profile", json.dumps(hp), flush=True)
        print(v, "engine built in", results[v]["engine_build_s"], "s; steps replayed from mixed buckets:",
              results[v]["mixed_replays"], flush=True)
        (out / "step_timeline.json").write_text(json.dumps(dict(commit=os.environ.get("MINI_VLLM_COMMIT"),
                                                                device=torch.cuda.get_device_name(0), **results)))
        del llm; gc.collect(); torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
