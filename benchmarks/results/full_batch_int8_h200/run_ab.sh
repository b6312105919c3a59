# Chapter 05b's layer with the rebuild thresholds by width, against 2ee5fa3's package (old_tree/, from
# `git archive 2ee5fa3 mini_vllm benchmarks/gpu_bench.py benchmarks/workload.py`), alternating, one machine.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1; export PYTHONPATH=/tmp/site
mkdir -p $OUT/x
NEW=${NEW:-new}
for r in 1 2; do
 for q in int8 int4; do
  for v in old new; do
   if [ $v = old ]; then B=old_tree/benchmarks/gpu_bench.py; C=2ee5fa3; else B=benchmarks/gpu_bench.py; C=$NEW; fi
   MINI_VLLM_COMMIT=$C timeout 90 python3 $B --out /tmp/e_$q$v$r --sections env,thru --thru-variants steps32_b16384 --quantization $q > /tmp/e_${q}_$v$r.log 2>&1
   grep "tok/s" /tmp/e_${q}_$v$r.log | sed "s/^/$q $v $r /"
  done
 done
 MINI_VLLM_COMMIT=$NEW timeout 90 python3 benchmarks/gpu_bench.py --out /tmp/e_bf16$r --sections env,thru --thru-variants steps32_b16384 > /tmp/e_bf16_$r.log 2>&1; grep "tok/s" /tmp/e_bf16_$r.log | sed "s/^/bf16 $r /"
done
tail -n 4 /tmp/e_*.log > $OUT/x/engine_logs.txt
MINI_VLLM_COMMIT=$NEW timeout 120 python3 benchmarks/dequant_crossover.py --out $OUT/x/crossover_low.json --ms 16,32,64,96,128 --budget-s 100 > $OUT/x/crossover_low.log 2>&1; echo crossover rc=$?
python3 - <<'PY'
import json, os
r = json.load(open(os.environ["OUT"] + "/x/crossover_low.json"))
for M, row in r["rows"].items():
    for k, v in row.items(): print(M, k, {w: v[w] for w in v if w != "rel_err"})
PY
