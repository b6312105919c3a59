# Where int8's time goes at the public workload, beside bf16's (kernel totals under torch.profiler, LLM's
# defaults), then the byte split's products with TMA tiles. One H200, ~8 min. From the repo root:
#   OUT=$OUT bash benchmarks/results/down_split_h200/profile.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
for e in mini mini-int8; do
  timeout 150 python3 benchmarks/gpu_profile_side_by_side.py $e 256 > $OUT/profile_$e.json 2> $OUT/profile_$e.err
  echo "$e rc=$? $(grep -o '"tok_s_unprofiled": [0-9]*' $OUT/profile_$e.json)"
done
timeout 220 python3 benchmarks/int8_split_mm.py --out $OUT/tma.json --ms 256,192,128 --short --tma > $OUT/tma.log 2>&1
echo "tma rc=$?"; grep "a layer" $OUT/tma.log
