#!/usr/bin/env bash
# `mini-vllm serve` under load_test.py's closed-loop ramp (512-token prompts, 256 streamed tokens) for this tree and
# earlier ones, alternating, on one GPU: what a change to the serving path costs or buys, in one lease. Earlier trees
# are made here first, for each REV in REVS:
#   mkdir -p _ab/REV && git archive REV mini_vllm benchmarks | tar -x -C _ab/REV
# then, on the GPU machine from the repo root (the server wheels in .whl/, as this README says; carry _ab and .whl):
#   MINI_VLLM_COMMIT=<this tree's commit> REVS="552e7d4" ROUNDS=3 CONC=1,16,64 bash benchmarks/ab_serve_h200.sh
# Writes $OUT/serve_ab.txt (per level: tok/s, tokens per SSE chunk, TTFT/ITL/TPOT p50) and each run's JSON.
set -u
OUT=${OUT:-$PWD/ab_out}
H=${MINI_VLLM_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo this)}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
    rm -rf /tmp/site; pip install -q --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
for round in $(seq 1 "${ROUNDS:-2}"); do
  for rev in "$H" ${REVS:-}; do
    d=$PWD; [ "$rev" != "$H" ] && d=$PWD/_ab/$rev
    (cd "$d" && CONC=${CONC:-1,16,64} OUT=/tmp/ab_serve/${rev}_$round MINI_VLLM_COMMIT=$rev \
        bash benchmarks/vllm_h200.sh serve_mini > /dev/null 2>&1)
    cp /tmp/ab_serve/${rev}_$round/load_test_mini_vllm_h200.json "$OUT/${rev}_round$round.json" 2>/dev/null
    python3 - "$OUT/${rev}_round$round.json" "$rev" "$round" >> "$OUT/serve_ab.txt" <<'PY'
import json, sys
try: levels = json.load(open(sys.argv[1]))["levels"]
except Exception as e: print(f"== {sys.argv[2]} round {sys.argv[3]}: no result ({e})"); sys.exit()
for l in levels:
    print(f"== {sys.argv[2]} round {sys.argv[3]} clients {l['concurrency']}: {l['output_tok_per_s']:,.0f} tok/s, "
          f"{l['mean_tokens_per_chunk']} tokens/chunk, TTFT p50 {l['ttft_p50_ms']} ms, ITL p50 {l['itl_p50_ms']} ms, "
          f"TPOT p50 {l['tpot_p50_ms']} ms")
PY
  done
done
cat "$OUT/serve_ab.txt"
