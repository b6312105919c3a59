#!/usr/bin/env bash
# Batch-1 decode with 04i's weights asked into L2 ahead of their kernels, against none: bf16, int8, int4, one engine
# a process. On an H200, from the repo root of 3659736 with l2_prefetch_04i.diff (the units conversion of
# units_04i.diff and the prefetch) and l2_prefetch_gpu_bench.diff applied: OUT=... bash l2_prefetch_ab.sh
set -u
OUT=${OUT:-.}/l2
mkdir -p "$OUT"
VARIANTS=${VARIANTS:-"0 2,24"}
for q in int8 none int4; do
  for v in $VARIANTS; do
    qa=""; [ "$q" != none ] && qa="--quantization $q"
    name="${q}_pf${v/,/_}"
    timeout 70 python3 benchmarks/gpu_bench.py --out "$OUT/$name" --sections env,batch1 --batch1-variants small_batch \
      $qa --l2-prefetch "$v" > "$OUT/$name.log" 2>&1
    echo "$name: $(grep -o 'small_batch: [0-9.]* ms/token, graph [0-9.]* ms' "$OUT/$name.log") $(python3 -c "import json;print(json.load(open('$OUT/$name/gpu_bench.json'))['batch1']['small_batch']['tokens_sha1'][:10])" 2>&1 | tail -1)"
  done
done
