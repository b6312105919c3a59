"""A neighbour's stream while two clients flood the server with prompts it refuses (chapter 06d).

Starts `mini-vllm serve` (the default model) twice: with the engine in the server's process, then in a process of
its own (--engine-process). For each, a neighbour streams a completion of --tokens tokens (greedy, EOS ignored),
alone and then while two flooding clients (processes of their own) send request after request of these kinds:

  control     1 MB bodies refused before anything is tokenized (max_tokens: -1, a 400 from SamplingParams):
              what receiving and parsing the bodies costs;
  1 MB text   a 1 MB prompt, refused by the input processor's size check before it is tokenized (a text longer
              than max_model_len times the longest token cannot fit);
  tokenized   a prompt just under that size limit, which is tokenized, found to be longer than max_model_len
              tokens, and refused: the costliest refusal a client can ask for.

Each figure is the median of --rounds rounds. The target: the neighbour under the `tokenized` flood takes at most
twice its time under the `control` flood, in both modes.

  python benchmarks/flood.py                       # prints a table; --json FILE writes the figures too
  python benchmarks/flood.py -- --dtype bfloat16   # arguments after `--` go to `mini-vllm serve`
"""
import argparse, json, multiprocessing as mp, os, statistics, sys, tempfile, time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]          # this checkout's mini_vllm, here and in the server
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
from load_test import environment, start_server, stop_server  # noqa: E402

NEIGHBOUR_PROMPT = "Write a long story about a lighthouse keeper:"


def flood(url: str, body: bytes, stop, counts, i: int):
    """One flooding client: post `body` again and again until `stop` is set; count the answers by status."""
    headers = {"content-type": "application/json"}
    with httpx.Client(timeout=120) as h:
        while not stop.is_set():
            try: status = h.post(url + "/v1/completions", content=body, headers=headers).status_code
            except httpx.HTTPError: status = 0
            counts[f"{i}:{status}"] = counts.get(f"{i}:{status}", 0) + 1


def neighbour(url: str, tokens: int) -> tuple[float, int]:
    """Seconds a greedy stream of `tokens` tokens takes, from its request to its last event; its token count."""
    body = dict(prompt=NEIGHBOUR_PROMPT, max_tokens=tokens, temperature=0, ignore_eos=True, stream=True,
                stream_options={"include_usage": True})
    t0, n = time.perf_counter(), 0
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=600) as r:
        for line in r.iter_lines():
            if line.startswith("data: {") and '"usage": {' in line:
                n = json.loads(line[6:])["usage"]["completion_tokens"]
    return time.perf_counter() - t0, n


def bodies(url: str) -> dict:
    """The flooding bodies: the control, a 1 MB text, and a text just under the size limit."""
    from mini_vllm.loading import default_model_path, load_tokenizer
    card = httpx.get(url + "/v1/models").json()["data"][0]
    longest = max(map(len, load_tokenizer(default_model_path()).get_vocab()))
    limit = card["max_model_len"] * longest                 # the input processor's size check (chapter 04e)
    text = lambda n: ("hello " * (n // 6 + 1))[:n]
    enc = lambda **kw: json.dumps({"model": card["id"], "max_tokens": 16, **kw}).encode()
    return {"control": enc(prompt=text(10**6), max_tokens=-1), "1 MB text": enc(prompt=text(10**6)),
            "tokenized": enc(prompt=text(limit - 1000))}, limit


def measure(url: str, tokens: int, rounds: int, n_flooders: int = 2) -> dict:
    """The neighbour's seconds, median of `rounds`: alone, then under each flood; and the floods' answers."""
    neighbour(url, tokens)                                    # warm up
    kinds, limit = bodies(url)
    out = {"alone": statistics.median(neighbour(url, tokens)[0] for _ in range(rounds)), "size_limit": limit,
           "body_bytes": {k: len(b) for k, b in kinds.items()}, "answers": {}}
    ctx = mp.get_context("spawn")
    for kind, body in kinds.items():
        times = []
        with ctx.Manager() as m:
            stop, counts = m.Event(), m.dict()
            procs = [ctx.Process(target=flood, args=(url, body, stop, counts, i)) for i in range(n_flooders)]
            for p in procs: p.start()
            time.sleep(3)                                     # the flood is on
            for _ in range(rounds): times.append(neighbour(url, tokens)[0])
            stop.set()
            for p in procs: p.join(60)
            answers = {}
            for k, v in counts.items(): answers[k.split(":")[1]] = answers.get(k.split(":")[1], 0) + v
        out[kind], out["answers"][kind] = statistics.median(times), answers
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=100, help="the neighbour's output tokens (default: 100)")
    p.add_argument("--rounds", type=int, default=3, help="neighbour runs per flood, the median reported")
    p.add_argument("--modes", default="in-process,engine-process", help="which servers to measure")
    p.add_argument("--json", default=None, help="also write the figures to this file")
    args, serve = p.parse_known_args()
    serve = [a for a in serve if a != "--"]
    results, log = {}, Path(tempfile.mkdtemp()) / "server.log"
    for mode in args.modes.split(","):
        flags = ["--max-body-bytes", str(3 * 2**20), *(["--engine-process"] if mode == "engine-process" else []),
                 *serve]
        proc, url = start_server(flags, log)
        try: results[mode] = measure(url, args.tokens, args.rounds)
        finally: stop_server(proc)
        r = results[mode]
        print(f"{mode}: neighbour's {args.tokens}-token stream alone {r['alone']:.2f} s; under the flood: "
              f"control {r['control']:.2f} s, 1 MB text {r['1 MB text']:.2f} s, tokenized {r['tokenized']:.2f} s "
              f"({r['tokenized'] / r['control']:.2f}x the control); size limit {r['size_limit']:,} characters; "
              f"flood answers {r['answers']}", flush=True)
    if args.json:
        env = {**environment(), "command": " ".join(["benchmarks/flood.py", *sys.argv[1:]])}
        Path(args.json).write_text(json.dumps({"env": env, "results": results}, indent=1))


if __name__ == "__main__":
    main()
