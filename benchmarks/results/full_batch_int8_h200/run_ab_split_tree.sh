# Run on a tree of 0afcef8 whose qmm_tma took K in shares (a variant not kept; "kernel" for int8 down went through
# it, tma1/2/4 are qmm_tma with K in 1/2/4 shares), its dequant_crossover.py with a --tma-splits option since removed.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1; export PYTHONPATH=/tmp/site
mkdir -p $OUT/x
export MINI_VLLM_COMMIT=wip-split
timeout 230 python3 benchmarks/dequant_crossover.py --out $OUT/x/crossover.json --ms 136,192,256,320,384 --tma-splits 1,2,4 --budget-s 180 > $OUT/x/crossover.log 2>&1; echo crossover rc=$?
for r in 1 2; do
 for v in old new; do
  if [ $v = old ]; then B=old_tree/benchmarks/gpu_bench.py; C=2ee5fa3; else B=benchmarks/gpu_bench.py; C=wip-split; fi
  MINI_VLLM_COMMIT=$C timeout 90 python3 $B --out /tmp/e_$v$r --sections env,thru --thru-variants steps32_b16384 --quantization int8 > $OUT/x/e_int8_$v$r.log 2>&1
  grep "tok/s" $OUT/x/e_int8_$v$r.log | sed "s/^/int8 $v $r /"
 done
done
MINI_VLLM_COMMIT=wip-split timeout 90 python3 benchmarks/gpu_bench.py --out /tmp/e_bf16 --sections env,thru --thru-variants steps32_b16384 > $OUT/x/e_bf16.log 2>&1; grep "tok/s" $OUT/x/e_bf16.log | sed "s/^/bf16 /"
python3 - <<'PY'
import json, os
r = json.load(open(os.environ["OUT"] + "/x/crossover.json"))
for M, row in r["rows"].items():
    for k, v in row.items(): print(M, k, {w: v[w] for w in v if w != "rel_err"})
PY
