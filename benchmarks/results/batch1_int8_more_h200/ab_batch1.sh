#!/usr/bin/env bash
# Batch 1, 3659736 (old_tree: `git archive 3659736 mini_vllm benchmarks/workload.py`, with this commit's
# gpu_bench.py and quant_chain_sweep.py copied into old_tree/benchmarks) against the working tree with a patch
# applied (new), alternating; with CHAIN=1, then the one-token chain of each. On an H200, from the repo root:
#   Q=int8 CHAIN=1 OUT=... bash ab_batch1.sh     units_04i.diff applied (units_ab.txt)
#   Q=bf16 OUT=... bash ab_batch1.sh             maxnreg_04i.diff applied (bf16_qkv_maxnreg_ab.txt)
set -u
OUT=${OUT:-.}/u; Q=${Q:-int8}; mkdir -p "$OUT"
qa=""; [ "$Q" != bf16 ] && qa="--quantization $Q"
for r in 1 2; do
  for tree in old new; do
    script=benchmarks/gpu_bench.py; [ $tree = old ] && script=old_tree/benchmarks/gpu_bench.py
    name=${Q}_${tree}_$r
    timeout 70 python3 $script --out "$OUT/$name" --sections env,batch1 --batch1-variants small_batch $qa > "$OUT/$name.log" 2>&1
    echo "$name: $(grep -o 'small_batch: [0-9.]* ms/token, graph [0-9.]* ms' "$OUT/$name.log") $(python3 -c "import json;print(json.load(open('$OUT/$name/gpu_bench.json'))['batch1']['small_batch']['tokens_sha1'][:10])" 2>&1 | tail -1)"
  done
done
[ "${CHAIN:-0}" = 1 ] || exit 0
for tree in new old; do
  script=benchmarks/quant_chain_sweep.py; [ $tree = old ] && script=old_tree/benchmarks/quant_chain_sweep.py
  timeout 90 python3 $script --out "$OUT/chain_$tree" --formats $Q --table-only $Q > "$OUT/chain_$tree.log" 2>&1
  echo "chain $tree: $(tail -3 $OUT/chain_$tree.log | tr '\n' ' ' | cut -c1-300)"
done
