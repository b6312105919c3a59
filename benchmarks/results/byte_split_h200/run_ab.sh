# The public workload with int8 weights, wide layers through byte_split_mm at 32-256 rows (the package's default)
# against none (--byte-split-rows 0,0), alternating, two rounds, one machine; bf16 once a round. From the repo root
# on an H200: OUT=$OUT bash benchmarks/results/byte_split_h200/run_ab.sh > $OUT/ab.txt 2>&1
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1; export PYTHONPATH=/tmp/site
run() { timeout 100 python3 benchmarks/gpu_bench.py --out /tmp/e_$1 --sections env,thru --thru-variants steps32_b16384 "${@:2}" > /tmp/e_$1.log 2>&1; echo "$1: $(grep -o '[0-9,]* output tok/s.*timed' /tmp/e_$1.log | head -1)"; }
for r in 1 2; do
  run split_$r --quantization int8
  run none_$r --quantization int8 --byte-split-rows 0,0
  run bf16_$r
done
tail -n 6 /tmp/e_*.log > ${OUT:-.}/engine_logs.txt
