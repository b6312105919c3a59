"""Load test of the OpenAI-compatible server: a concurrency ramp of streaming completions.

At each concurrency level C, C clients each send streaming /v1/completions requests back to back
(closed loop) until the level's requests are done (or its time is up). Every request asks for exactly
--output-len tokens (ignore_eos) from a prompt of --input-len tokens (token ids with --prompt-mode ids,
random words with --prompt-mode text). Per level it reports request throughput, output tokens/s and the
P50/P95/P99 of TTFT (time to first token), TPOT (time per output token after the first), ITL (time between
two chunks of a stream) and end-to-end latency, all as seen by the client; and, sampled from /metrics, the
peak numbers of running and waiting requests and the peak KV-cache usage.

With --request-rate R1,R2,... it runs open loop instead, as vLLM's serving benchmark does: at each rate R the
level's requests are sent at Poisson arrivals of R per second (seeded; `inf` sends them all at once), each
streaming as it goes, however many are still running; throughput counts from the first request sent to the last
token received.

It starts the server itself (`mini-vllm serve` in a subprocess on 127.0.0.1 and a free port, stopped at the
end) unless --url names a running one. Writes load_test_<label>.json and .png into --out.

  CPU, the default model:   python benchmarks/load_test.py --label cpu --out benchmarks/results -- --dtype bfloat16
  GPU, TinyLlama's shape:   python benchmarks/load_test.py --tinyllama --prompt-mode ids --label h200 \\
                                --concurrency 1,2,4,8,16,32,64,128,256 --input-len 512 --output-len 256 \\
                                --max-seconds-per-level 15 --warmup 256 --out $OUT -- --dtype bfloat16 --attention-backend triton
  GPU, another shape:       python benchmarks/load_test.py --shape llama3_8b --prompt-mode ids ...   (workload.SHAPES)
  Poisson arrivals:         python benchmarks/load_test.py --request-rate 1,2,4,inf --requests-per-level 32 --label cpu_rates
Arguments after `--` go to `mini-vllm serve`.
"""
import argparse, asyncio, json, math, os, platform, random, shutil, signal, socket, subprocess, sys, tempfile, time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workload import SHAPE_NAMES, SHAPES, shape_config_dir  # noqa: E402

WORDS = ("time year people way day man thing woman life child world school state family student group country "
         "problem hand part place case week company system program question work government number night point home "
         "water room mother area money story fact month lot right study book eye job word business issue side kind "
         "head house service friend father power hour game line end member law car city community name president team").split()


def make_prompts(n, input_len, mode, vocab, seed):
    """n distinct prompts: `input_len` random token ids, or `input_len` random words."""
    rng = random.Random(seed)
    if mode == "ids": return [[rng.randrange(100, vocab) for _ in range(input_len)] for _ in range(n)]
    return [" ".join(rng.choice(WORDS) for _ in range(input_len)) for _ in range(n)]


def pct(xs, q):
    """The q-th percentile of xs (linear interpolation), or None for no data."""
    if not xs: return None
    xs = sorted(xs); k = (len(xs) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


async def one_request(client, url, model, prompt, output_len, api_key):
    """Send one streaming completion; return its timings as seen by the client."""
    body = dict(model=model, prompt=prompt, max_tokens=output_len, temperature=0, ignore_eos=True, stream=True,
                stream_options={"include_usage": True})
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    t0 = time.perf_counter(); times, usage = [], None
    async with client.stream("POST", url + "/v1/completions", json=body, headers=headers) as r:
        if r.status_code != 200: return {"ok": False, "status": r.status_code, "error": (await r.aread()).decode()[:200]}
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]": continue
            chunk = json.loads(line[6:])
            if "error" in chunk: return {"ok": False, "status": 200, "error": chunk["error"]["message"][:200]}
            if chunk.get("choices"): times.append(time.perf_counter())
            if chunk.get("usage"): usage = chunk["usage"]
    if not times or usage is None: return {"ok": False, "status": 200, "error": "stream ended without tokens or usage"}
    n = usage["completion_tokens"]
    e2e, ttft = times[-1] - t0, times[0] - t0
    return {"ok": True, "ttft": ttft, "e2e": e2e, "tpot": (e2e - ttft) / (n - 1) if n > 1 else None, "output_tokens": n,
            "prompt_tokens": usage["prompt_tokens"], "itl": [b - a for a, b in zip(times, times[1:])], "chunks": len(times)}


async def sample_metrics(client, url, api_key, peaks, stop):
    """Poll /metrics once a second; keep the peaks of running, waiting and KV-cache usage."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    names = {f"{p}:{m}": k for p in ("mini_vllm", "vllm")        # this book's server, and real vLLM's
             for m, k in (("num_requests_running", "running"), ("num_requests_waiting", "waiting"), ("kv_cache_usage_perc", "kv_usage"))}
    while not stop.is_set():
        try:
            for l in (await client.get(url + "/metrics", headers=headers)).text.splitlines():
                name = l.split("{", 1)[0]
                if name in names: peaks[names[name]] = max(peaks.get(names[name], 0), float(l.rsplit(" ", 1)[1]))
        except httpx.HTTPError: pass
        try: await asyncio.wait_for(stop.wait(), 1.0)
        except asyncio.TimeoutError: pass


async def run_clients(url, model, c, prompts, output_len, max_seconds, api_key=None, t0=None):
    """C clients send the prompts back to back until they are done or `max_seconds` after `t0` (time.monotonic(),
    default now); their results, and when the last one ended."""
    limits = httpx.Limits(max_connections=c + 4, max_keepalive_connections=c + 4)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0), limits=limits) as client:
        todo, results, t0 = list(prompts), [], t0 or time.monotonic()
        async def worker():
            while todo and time.monotonic() - t0 < max_seconds:
                try: results.append(await one_request(client, url, model, todo.pop(), output_len, api_key))
                except httpx.HTTPError as e: results.append({"ok": False, "status": None, "error": repr(e)[:200]})
        await asyncio.gather(*(worker() for _ in range(c)))
    return results, time.monotonic()


def clients_process(args):
    """One client process's share of a level: wait for the common start, run its clients; results, end, CPU seconds."""
    url, model, c, prompts, output_len, max_seconds, api_key, t0 = args
    time.sleep(max(t0 - time.monotonic(), 0))                # time.monotonic() is one clock for every process
    cpu = time.process_time()
    results, end = asyncio.run(run_clients(url, model, c, prompts, output_len, max_seconds, api_key, t0))
    return results, end, time.process_time() - cpu


def client_processes(c: int, per_process: int) -> int:
    """How many processes share C clients: one per `per_process` clients, at most half this machine's cores (or 2)."""
    return max(1, min(math.ceil(c / per_process), max(2, (os.cpu_count() or 2) // 2)))


async def run_level(url, model, c, prompts, output_len, max_seconds, api_key=None, per_process=8):
    """C clients send the prompts back to back; a summary of what they saw. Beyond `per_process` clients they are
    spread over processes (`client_processes`), so that parsing the streams never limits what the server shows."""
    peaks, stop, procs = {}, asyncio.Event(), client_processes(c, per_process)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0)) as client:
        sampler = asyncio.ensure_future(sample_metrics(client, url, api_key, peaks, stop))
        if procs == 1:
            t0, cpu = time.monotonic(), time.process_time()
            results, end = await run_clients(url, model, c, prompts, output_len, max_seconds, api_key, t0)
            cpu = [time.process_time() - cpu]            # this process's, sampler included
        else:
            import concurrent.futures, multiprocessing
            with concurrent.futures.ProcessPoolExecutor(procs, mp_context=multiprocessing.get_context("spawn")) as ex:
                list(ex.map(time.sleep, [0.0] * procs))   # started and imported before the clock starts
                t0, loop = time.monotonic() + 0.5, asyncio.get_running_loop()
                shares = [(url, model, len(range(i, c, procs)), prompts[i::procs], output_len, max_seconds, api_key, t0)
                          for i in range(procs)]
                done = await asyncio.gather(*(loop.run_in_executor(ex, clients_process, s) for s in shares))
            results, end, cpu = [r for d in done for r in d[0]], max(d[1] for d in done), [d[2] for d in done]
        stop.set(); await sampler
    row = summarize(c, results, end - t0, peaks)
    row["client_processes"], row["client_cpu_max"] = procs, round(max(cpu) / (end - t0), 2)  # 1.0: a client was busy
    return row


async def run_rate(url, model, rate, prompts, output_len, api_key=None, seed=0):
    """Open loop: the prompts sent at Poisson arrivals of `rate` per second (all at once for inf); a summary."""
    rng = random.Random(seed)
    gaps = [0.0] + [0.0 if math.isinf(rate) else rng.expovariate(rate) for _ in prompts[1:]]
    limits = httpx.Limits(max_connections=len(prompts) + 4, max_keepalive_connections=len(prompts) + 4)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0), limits=limits) as client:
        results, peaks, stop = [], {}, asyncio.Event()
        async def send(prompt):
            try: results.append(await one_request(client, url, model, prompt, output_len, api_key))
            except httpx.HTTPError as e: results.append({"ok": False, "status": None, "error": repr(e)[:200]})
        sampler = asyncio.ensure_future(sample_metrics(client, url, api_key, peaks, stop))
        t0, tasks = time.perf_counter(), []
        for prompt, gap in zip(prompts, gaps):
            await asyncio.sleep(gap)
            tasks.append(asyncio.ensure_future(send(prompt)))
        await asyncio.gather(*tasks)
        seconds = time.perf_counter() - t0
        stop.set(); await sampler
    return summarize(None, results, seconds, peaks, key=("request_rate", "inf" if math.isinf(rate) else rate))


def summarize(c, results, seconds, peaks, key=None):
    """Throughput and latency percentiles (ms) of one level: `c` concurrent clients, or `key` (name, value)."""
    ok = [r for r in results if r["ok"]]
    out_tokens = sum(r["output_tokens"] for r in ok)
    name, value = key or ("concurrency", c)
    row = {name: value, "requests": len(ok), "failed": len(results) - len(ok), "seconds": round(seconds, 3),
           "req_per_s": round(len(ok) / seconds, 3), "output_tok_per_s": round(out_tokens / seconds, 1),
           "mean_tokens_per_chunk": round(out_tokens / max(sum(r["chunks"] for r in ok), 1), 2),
           "peak_running": peaks.get("running"), "peak_waiting": peaks.get("waiting"), "peak_kv_usage": peaks.get("kv_usage")}
    series = {"ttft": [r["ttft"] for r in ok], "tpot": [r["tpot"] for r in ok if r["tpot"] is not None],
              "itl": [x for r in ok for x in r["itl"]], "e2e": [r["e2e"] for r in ok]}
    for k, xs in series.items():
        for q in (50, 95, 99):
            v = pct(xs, q); row[f"{k}_p{q}_ms"] = None if v is None else round(1000 * v, 2)
    if len(ok) < len(results): row["errors"] = sorted({str(r.get("error"))[:120] for r in results if not r["ok"]})[:5]
    return row


async def run_ramp(url, model, levels, input_len, output_len, mode="ids", vocab=32000, requests_per_level=None,
                   max_seconds=60.0, warmup=4, api_key=None, seed=0, log=print, on_level=None, rates=None, per_process=8):
    """The whole ramp: a warm-up, then one level per concurrency (or per request rate, open loop, with `rates`);
    a list of level summaries (also given to `on_level`)."""
    if warmup:
        await run_level(url, model, min(warmup, max(levels or [warmup])), make_prompts(warmup, input_len, mode, vocab,
                        seed + 999), min(output_len, 16), max_seconds, api_key, per_process)
    rows = []
    for i, level in enumerate(rates or levels):
        if rates:
            prompts = make_prompts(requests_per_level or 64, input_len, mode, vocab, seed + i)
            rows.append(await run_rate(url, model, level, prompts, output_len, api_key, seed + i))
        else:
            n = requests_per_level or max(2 * level, 8)
            prompts = make_prompts(n, input_len, mode, vocab, seed + i)
            rows.append(await run_level(url, model, level, prompts, output_len, max_seconds, api_key, per_process))
        log(fmt_row(rows[-1]))
        if on_level: on_level(rows)
    return rows


COLUMNS = [("concurrency", "conc"), ("requests", "reqs"), ("req_per_s", "req/s"), ("output_tok_per_s", "out tok/s"),
           ("ttft_p50_ms", "TTFT p50"), ("ttft_p95_ms", "p95"), ("ttft_p99_ms", "p99"), ("tpot_p50_ms", "TPOT p50"),
           ("tpot_p95_ms", "p95"), ("tpot_p99_ms", "p99"), ("itl_p50_ms", "ITL p50"), ("itl_p95_ms", "p95"), ("itl_p99_ms", "p99"),
           ("e2e_p50_ms", "E2E p50"), ("e2e_p95_ms", "p95"), ("e2e_p99_ms", "p99"), ("mean_tokens_per_chunk", "tok/event"),
           ("client_cpu_max", "cli cpu")]


def columns(rows):
    """COLUMNS, with the request rate first where the levels are rates."""
    return [("request_rate", "rate/s")] + COLUMNS[1:] if rows and "request_rate" in rows[0] else COLUMNS


def fmt_row(r):
    """One level as a fixed-width table line."""
    f = lambda v: "-" if v is None else (f"{v:.1f}" if isinstance(v, float) else str(v))
    return " ".join(f"{f(r.get(k)):>9}" for k, _ in columns([r])) + (f"  failed {r['failed']}" if r["failed"] else "")


def table(rows, rates=False) -> str:
    """The levels as a table (milliseconds for latencies)."""
    head = columns(rows) if rows or not rates else columns([{"request_rate": 0}])
    return "\n".join([" ".join(f"{h:>9}" for _, h in head)] + [fmt_row(r) for r in rows])


def plot(result, path):
    """Throughput and latency percentiles against concurrency, in one PNG."""
    import matplotlib; matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = result["levels"]
    rates = bool(rows) and "request_rate" in rows[0]
    if rates:                            # evenly spaced, labelled by rate ("inf" last)
        c = list(range(len(rows)))
    else: c = [r["concurrency"] for r in rows]
    fig, ax = plt.subplots(1, 4, figsize=(16, 3.6))
    ax[0].plot(c, [r["output_tok_per_s"] for r in rows], "o-", label="output tok/s")
    a2 = ax[0].twinx(); a2.plot(c, [r["req_per_s"] for r in rows], "s--", color="C1", label="req/s"); a2.set_ylabel("req/s")
    ax[0].set_ylabel("output tok/s"); ax[0].set_title("throughput")
    for a, key, title in [(ax[1], "ttft", "TTFT (ms)"), (ax[2], "tpot", "TPOT (ms)"), (ax[3], "e2e", "end-to-end (ms)")]:
        for q, style in [(50, "o-"), (95, "^--"), (99, "v:")]:
            a.plot(c, [r[f"{key}_p{q}_ms"] for r in rows], style, label=f"p{q}")
        a.set_title(title); a.set_yscale("log"); a.legend(fontsize=8)
    ax[2].plot(c, [r["itl_p50_ms"] for r in rows], "x-", color="gray", label="ITL p50"); ax[2].legend(fontsize=8)
    for a in ax:
        if rates: a.set_xticks(c, [str(r["request_rate"]) for r in rows]); a.set_xlabel("requests per second (Poisson)")
        else: a.set_xscale("log", base=2); a.set_xlabel("concurrent clients")
    fig.suptitle(result["title"], fontsize=10); fig.tight_layout(); fig.savefig(path, dpi=110); plt.close(fig)


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def start_server(serve_args, log_path, timeout=600, port=None, env=None):
    """`mini-vllm serve` in a subprocess on 127.0.0.1 (`port`, default a free one; `env`, default this
    process's); (process, url) once /health answers."""
    port = port or free_port()
    cmd = [sys.executable, "-c", "from mini_vllm.cli import main; main()", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--log-level", "warning", *serve_args]
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=False, env=env)
    url, t0 = f"http://127.0.0.1:{port}", time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None: raise RuntimeError(f"the server exited with {proc.returncode}: see {log_path}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200: break
        except httpx.HTTPError: pass
        time.sleep(0.5)
    else:
        stop_server(proc); raise RuntimeError(f"the server did not answer /health within {timeout} s: see {log_path}")
    return proc, url


def stop_server(proc):
    """SIGINT (uvicorn's graceful stop), then SIGKILL if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try: proc.wait(timeout=30)
        except subprocess.TimeoutExpired: proc.kill(); proc.wait()


def environment():
    """Versions and hardware, for the JSON header."""
    env = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}
    try:
        import torch
        env["torch"] = torch.__version__
        if torch.cuda.is_available(): env["gpu"] = torch.cuda.get_device_name(0)
    except ImportError: pass
    env["command"] = " ".join(["benchmarks/load_test.py", *sys.argv[1:]])
    env["commit"] = os.environ.get("MINI_VLLM_COMMIT")     # set where the tree's .git is not this commit's
    if not env["commit"]:
        try: env["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                            cwd=Path(__file__).parent).stdout.strip() or None
        except OSError: pass
    return env


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    serve_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", help="a running server (default: start one)")
    p.add_argument("--model", default=None, help="model name to send (default: the server's first)")
    p.add_argument("--tinyllama", action="store_true", help="serve TinyLlama-1.1B's shape with dummy weights")
    p.add_argument("--shape", choices=tuple(SHAPES), help="serve this shape with dummy weights (--tinyllama: tinyllama)")
    p.add_argument("--concurrency", default="1,2,4,8,16,32,64", help="comma-separated levels (default: 1..64)")
    p.add_argument("--request-rate", default=None, help="open loop instead: comma-separated request rates per second "
                   "(Poisson arrivals; inf sends a level's requests at once); --requests-per-level each (default 64)")
    p.add_argument("--input-len", type=int, default=128, help="prompt length in tokens (words with --prompt-mode text)")
    p.add_argument("--output-len", type=int, default=64, help="output tokens per request (EOS ignored)")
    p.add_argument("--prompt-mode", choices=["ids", "text"], default="text", help="token-id prompts (no tokenizer needed) or words")
    p.add_argument("--vocab", type=int, default=None, help="token ids are drawn below this (default: 32000, or 49152 for SmolLM2)")
    p.add_argument("--requests-per-level", type=int, default=None, help="default: max(2 x concurrency, 8), or 64 per rate")
    p.add_argument("--max-seconds-per-level", type=float, default=60.0, help="stop sending new requests after this long")
    p.add_argument("--warmup", type=int, default=4, help="warm-up requests before the ramp")
    p.add_argument("--clients-per-process", type=int, default=8, help="closed loop: clients per client process, "
                   "beyond which a level's clients are spread over processes (at most half the cores)")
    p.add_argument("--api-key", default=os.environ.get("MINI_VLLM_API_KEY"))
    p.add_argument("--label", default="run", help="names the output files: load_test_<label>.json/.png")
    p.add_argument("--title", default=None, help="the plot's title")
    p.add_argument("--out", default=".", help="output folder")
    a = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))     # `timeout` stops us: still stop the server
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    levels = [int(x) for x in a.concurrency.split(",")]
    rates = [float(x) for x in a.request_rate.split(",")] if a.request_rate else None
    if rates and any(not r > 0 for r in rates): p.error(f"--request-rate: rates must be > 0 (or inf), got {a.request_rate}")
    proc, tmp = None, None
    shape = a.shape or ("tinyllama" if a.tinyllama else None)
    if shape:
        tmp = tempfile.mkdtemp(prefix=f"{shape}-")
        name = SHAPE_NAMES[shape].lower() + "-dummy"                  # tinyllama-1.1b-dummy, llama-3-8b-dummy, ...
        serve_args = ["--model", str(shape_config_dir(tmp, shape)), "--load-format", "dummy", "--served-model-name",
                      name, *serve_args]
    try:
        url = a.url
        if url is None:
            t0 = time.monotonic()
            proc, url = start_server(serve_args, out / f"load_test_{a.label}_server.log")
            print(f"server up in {time.monotonic() - t0:.1f} s: mini-vllm serve {' '.join(serve_args)}", flush=True)
        headers = {"Authorization": f"Bearer {a.api_key}"} if a.api_key else {}
        model = a.model or httpx.get(url + "/v1/models", headers=headers).json()["data"][0]["id"]
        vocab = a.vocab or (49152 if "SmolLM2" in model else 32000)
        env = environment()
        where = env.get("gpu") or f"a {env['cpus']}-core CPU"
        loop = "Poisson arrivals" if rates else "closed loop"
        title = a.title or f"{model} on {where}: prompts {a.input_len} tokens, outputs {a.output_len}, streaming, {loop}"
        t0 = time.monotonic()
        def save(rows):                    # after every level, so a run cut short keeps what it measured
            result = {"title": title, "model": model, "serve_args": serve_args, "input_len": a.input_len, "output_len": a.output_len,
                      "prompt_mode": a.prompt_mode, "levels": rows, "env": env, "total_seconds": round(time.monotonic() - t0, 1)}
            (out / f"load_test_{a.label}.json").write_text(json.dumps(result, indent=2) + "\n")
            plot(result, out / f"load_test_{a.label}.png")
        print(table([], rates=bool(rates)), flush=True)
        asyncio.run(run_ramp(url, model, levels, a.input_len, a.output_len, a.prompt_mode, vocab, a.requests_per_level,
                             a.max_seconds_per_level, a.warmup, a.api_key, log=lambda s: print(s, flush=True), on_level=save,
                             rates=rates, per_process=a.clients_per_process))
        print(f"wrote {out / f'load_test_{a.label}.json'} and .png ({time.monotonic() - t0:.1f} s of load)")
    finally:
        if proc is not None: stop_server(proc)
        if tmp is not None: shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
