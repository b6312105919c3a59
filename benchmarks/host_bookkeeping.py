"""The overlapped loop's (chapter 04k) host bookkeeping for 256 decoding requests, without a model: milliseconds per
step of `Scheduler.schedule`, `Scheduler.launch`, `Scheduler.update(..., launched=True)` and the output processor.
Every request has a prompt of 100-1,000 tokens and decodes one token per step (a fixed token, EOS ignored).
  .venv/bin/python benchmarks/host_bookkeeping.py [--steps 400]
"""
import argparse, random, time

from mini_vllm.block_pool import KVCacheManager
from mini_vllm.outputs import OutputProcessor
from mini_vllm.sampling import SamplingParams
from mini_vllm.scheduler import Request, Scheduler


def main(steps: int, n: int = 256, warmup: int = 6):
    sched, proc = Scheduler(KVCacheManager(40000, 16), n, 16384, 4096), OutputProcessor(None)
    for i in range(n):
        r = Request(str(i), list(range(100, 100 + random.Random(i).randrange(100, 1000))),
                    SamplingParams(temperature=0, max_tokens=2000, ignore_eos=True))
        sched.add_request(r)
        proc.add(str(i), None, r.prompt_token_ids, [r])
    t = dict(schedule=0.0, launch=0.0, update=0.0, outputs=0.0)
    last = None
    for step in range(steps):
        a = time.perf_counter(); out = sched.schedule()
        b = time.perf_counter(); sched.launch(out)
        c = time.perf_counter(); d = e = c
        if last is not None:                                  # the step before lands: one token per request
            got = sched.update(last, {r.request_id: [7] for r in last.requests}, launched=True)
            d = time.perf_counter()
            proc.outputs(proc.record(got, {})[0])
            e = time.perf_counter()
        if step >= warmup:
            for k, dt in zip(t, (b - a, c - b, d - c, e - d)): t[k] += dt
        last = out
    ms = {k: round(v / (steps - warmup) * 1e3, 3) for k, v in t.items()}
    print(ms, "ms per step; total", round(sum(ms.values()), 3))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=400)
    main(p.parse_args().steps)
