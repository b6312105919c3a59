#!/usr/bin/env bash
# This tree and earlier ones, alternating, on one GPU: what a change costs or buys, measured on one machine.
#   STAGE=bench (about 35 s a run): each tree's own gpu_bench.py, sections thru and batch1: the public workload's
#               output tok/s and batch-1 ms/token in that tree's two loops. This tree's are `async` (one step ahead)
#               and `sync` (one at a time); a tree from before decode windows went (its gpu_bench knows
#               num_scheduler_steps) runs `steps32_b16384` (32-step windows, the figure the book cited) and `steps1`
#               (one at a time, as `sync`), batch 1 `small_batch` only (its gpu_bench has no batch 1 one step at a
#               time). THRU/BATCH1 (this tree's) and OLD_THRU/OLD_BATCH1 (older trees') choose others.
#               `gpu_book.sh ab` runs this stage: 4 runs (2 rounds, one REV) took 150 s on an H200.
#   STAGE=offline (default): LLM.generate on the public workload, 320 requests and batch 1 (vllm_h200.sh offline
#                 with ENGINES=mini_vllm: each tree's own `mini_vllm` engine; this tree's is one step ahead)
#   STAGE=serve_mini: `mini-vllm serve` under load_test.py's ramp at $CONC clients (default 1,16,64), 512-token
#                     prompts, 256 streamed tokens (vllm_h200.sh serve_mini)
# Earlier trees are made here first, for each REV in REVS:
#   mkdir -p _ab/REV && git archive REV mini_vllm benchmarks | tar -x -C _ab/REV
# then, on the GPU machine from the repo root (the server wheels, fastcore among them, in .whl/, as
# benchmarks/README.md says; carry _ab and .whl):
#   STAGE=bench MINI_VLLM_COMMIT=<this tree's commit> REVS=fdc22f4 ROUNDS=2 bash benchmarks/ab_h200.sh
#   MINI_VLLM_COMMIT=<this tree's commit> REVS="8acf892 b212ca9" ROUNDS=2 bash benchmarks/ab_h200.sh
#   STAGE=serve_mini MINI_VLLM_COMMIT=<this tree's commit> REVS=552e7d4 ROUNDS=3 bash benchmarks/ab_h200.sh
# Writes $OUT/ab.txt (the figures) and $OUT/ab.tgz (every run's log and JSON).
set -u
OUT=${OUT:-$PWD/ab_out}
STAGE=${STAGE:-offline}
H=${MINI_VLLM_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo this)}
W=/tmp/ab; rm -rf $W; mkdir -p $W "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
    rm -rf /tmp/site; pip install -q --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

bench() {           # bench DIR RUN: DIR's gpu_bench.py, thru and batch1, each loop; its JSON and log in $W/RUN
    local thru=${THRU:-async,sync} batch1=${BATCH1:-small_batch,small_batch_sync}
    if grep -q num_scheduler_steps "$1/benchmarks/gpu_bench.py"; then       # a tree with decode windows
        thru=${OLD_THRU:-steps32_b16384,steps1} batch1=${OLD_BATCH1:-small_batch}
    fi
    (cd "$1" && timeout -s ABRT --kill-after=10 "${RUN_LIMIT:-170}" python3 benchmarks/gpu_bench.py --out "$W/$2" \
        --sections env,thru,batch1 --thru-variants "$thru" --batch1-variants "$batch1" > "$W/$2/bench.log" 2>&1)
}

for round in $(seq 1 "${ROUNDS:-2}"); do
  for rev in "$H" ${REVS:-}; do
    d=$PWD; [ "$rev" != "$H" ] && d=$PWD/_ab/$rev
    mkdir -p "$W/${rev}_$round"
    echo "== $rev round $round" >> "$OUT/ab.txt"
    if [ "$STAGE" = bench ]; then
        MINI_VLLM_COMMIT=$rev bench "$d" "${rev}_$round"
        python3 - "$W/${rev}_$round/gpu_bench.json" >> "$OUT/ab.txt" <<'PY'
import json, sys
try: r = json.load(open(sys.argv[1]))
except Exception as e: print(f"no result ({e})"); sys.exit()
for k, v in r.get("thru", {}).items():
    if "output_tok_per_s" in v: print(f"thru {k}: {v['output_tok_per_s']:,.0f} output tok/s")
    elif k != "workload": print(f"thru {k}: {v}"[:300])
for k, v in r.get("batch1", {}).items():
    print(f"batch1 {k}: {v['ms_per_token']:.3f} ms/token" if "ms_per_token" in v else f"batch1 {k}: {v}"[:300])
PY
        continue
    fi
    (cd "$d" && OUT=$W/${rev}_$round MINI_VLLM_COMMIT=$rev ENGINES=mini_vllm BUDGET=120 CONC=${CONC:-1,16,64} \
        bash benchmarks/vllm_h200.sh "$STAGE" > /dev/null 2>&1)
    if [ "$STAGE" = offline ]; then
        grep -E "tok/s|ms/token" "$W/${rev}_$round/offline.log" | cut -c1-160 >> "$OUT/ab.txt"
    else
        python3 - "$W/${rev}_$round/load_test_mini_vllm_h200.json" >> "$OUT/ab.txt" <<'PY'
import json, sys
try: levels = json.load(open(sys.argv[1]))["levels"]
except Exception as e: print(f"no result ({e})"); sys.exit()
for l in levels:
    print(f"clients {l['concurrency']}: {l['output_tok_per_s']:,.0f} tok/s, {l['mean_tokens_per_chunk']} tokens/chunk, "
          f"TTFT p50 {l['ttft_p50_ms']} ms, ITL p50 {l['itl_p50_ms']} ms, TPOT p50 {l['tpot_p50_ms']} ms")
PY
    fi
  done
done
if [ "$STAGE" = bench ]; then         # medians over the rounds, and this tree's speed-up over each other tree
    python3 - "$W" "$H" ${REVS:-} >> "$OUT/ab.txt" <<'PY'
import glob, json, statistics, sys
w, trees = sys.argv[1], sys.argv[2:]
KEYS = {"thru": "output_tok_per_s", "batch1": "ms_per_token"}
def medians(tree) -> dict:
    "{(section, i): (label, median)}: the i-th variant a tree's runs timed, over its rounds."
    vals, labels = {}, {}
    for f in sorted(glob.glob(f"{w}/{tree}_*/gpu_bench.json")):
        r = json.load(open(f))
        for sec, key in KEYS.items():
            runs = [(k, v[key]) for k, v in r.get(sec, {}).items() if isinstance(v, dict) and key in v]
            for i, (k, x) in enumerate(runs):
                vals.setdefault((sec, i), []).append(x); labels[(sec, i)] = k
    return {p: (labels[p], statistics.median(v)) for p, v in vals.items()}
print("== medians over rounds (variants in the order each tree ran them); speed-up: > 1, this tree is faster")
this = medians(trees[0])
for t in trees:
    for p, (label, x) in sorted(medians(t).items()):
        line = f"{t} {p[0]} {label}: " + (f"{x:,.0f} tok/s" if p[0] == "thru" else f"{x:.3f} ms/token")
        if t != trees[0] and p in this:
            up = this[p][1] / x if p[0] == "thru" else x / this[p][1]
            line += f"; {trees[0]} {this[p][0]} speed-up {up:.3f}"
        print(line)
PY
fi
tar czf "$OUT/ab.tgz" -C $W .
cat "$OUT/ab.txt"
