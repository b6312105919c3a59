#!/usr/bin/env bash
# This tree and earlier ones, alternating, on one GPU: what a change costs or buys, measured on one machine.
#   STAGE=offline (default): LLM.generate on the public workload, 320 requests and batch 1 (vllm_h200.sh offline)
#   STAGE=serve_mini: `mini-vllm serve` under load_test.py's ramp at $CONC clients (default 1,16,64), 512-token
#                     prompts, 256 streamed tokens (vllm_h200.sh serve_mini)
# Earlier trees are made here first, for each REV in REVS:
#   mkdir -p _ab/REV && git archive REV mini_vllm benchmarks | tar -x -C _ab/REV
# then, on the GPU machine from the repo root (the server wheels in .whl/, as this README says; carry _ab and .whl):
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
for round in $(seq 1 "${ROUNDS:-2}"); do
  for rev in "$H" ${REVS:-}; do
    d=$PWD; [ "$rev" != "$H" ] && d=$PWD/_ab/$rev
    (cd "$d" && OUT=$W/${rev}_$round MINI_VLLM_COMMIT=$rev ENGINES=mini_vllm BUDGET=120 CONC=${CONC:-1,16,64} \
        bash benchmarks/vllm_h200.sh "$STAGE" > /dev/null 2>&1)
    echo "== $rev round $round" >> "$OUT/ab.txt"
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
tar czf "$OUT/ab.tgz" -C $W .
cat "$OUT/ab.txt"
