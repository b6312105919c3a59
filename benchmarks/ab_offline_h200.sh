#!/usr/bin/env bash
# LLM.generate offline (public workload, 320 requests, batch 1) for this tree and earlier ones, alternating, on one GPU:
# what a change costs or buys, measured in one lease. Earlier trees are made here first, for each REV in REVS:
#   mkdir -p _ab/REV && git archive REV mini_vllm benchmarks | tar -x -C _ab/REV
# then, on the GPU machine from the repo root (the server wheels in .whl/, as this README says; carry _ab and .whl):
#   MINI_VLLM_COMMIT=<this tree's commit> REVS="8acf892 b212ca9" ROUNDS=2 bash benchmarks/ab_offline_h200.sh
# Writes $OUT/offline_ab.txt (the figures) and $OUT/offline_ab.tgz (every run's log and JSON).
set -u
OUT=${OUT:-$PWD/ab_out}
H=${MINI_VLLM_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo this)}
W=/tmp/ab; rm -rf $W; mkdir -p $W "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
    rm -rf /tmp/site; pip install -q --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
for round in $(seq 1 "${ROUNDS:-2}"); do
  for rev in "$H" ${REVS:-}; do
    d=$PWD; [ "$rev" != "$H" ] && d=$PWD/_ab/$rev
    (cd "$d" && OUT=$W/${rev}_$round MINI_VLLM_COMMIT=$rev ENGINES=mini_vllm BUDGET=120 \
        bash benchmarks/vllm_h200.sh offline > /dev/null 2>&1)
    { echo "== $rev round $round"; grep -E "tok/s|ms/token" "$W/${rev}_$round/offline.log" | cut -c1-160; } \
        >> "$OUT/offline_ab.txt"
  done
done
tar czf "$OUT/offline_ab.tgz" -C $W .
cat "$OUT/offline_ab.txt"
