# Two leads for int8 at a full decode batch, in one call on an H200 (~6 min). From the repo root:
#   OUT=$OUT bash benchmarks/results/byte_split_h200/next.sh > $OUT/next.txt 2>&1
# 1. the byte split's products with TMA tiles, beside the shipped kernel (benchmarks/README.md, "Next, written but
#    not yet timed"); 2. the public workload with the byte split also for down (192-256 rows) and q,k,v (96-192)
#    against the package's rule (gate/up at 32-256), alternating, two rounds, bf16 once a round.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1; export PYTHONPATH=/tmp/site
timeout 200 python3 benchmarks/int8_split_mm.py --out ${OUT:-.}/tma.json --ms 256,192,128 --short --tma > /tmp/tma.log 2>&1
grep "a layer" /tmp/tma.log; grep -c "tma" /tmp/tma.log
run() { timeout 100 python3 benchmarks/gpu_bench.py --out /tmp/n_$1 --sections env,thru --thru-variants steps32_b16384 "${@:2}" > /tmp/n_$1.log 2>&1; echo "$1: $(grep -o '[0-9,]* output tok/s.*timed' /tmp/n_$1.log | head -1)"; }
for r in 1 2; do
  run shipped_$r --quantization int8
  run more_$r --quantization int8 --byte-split-more
  run bf16_$r
done
