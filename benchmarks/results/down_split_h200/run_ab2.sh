# The public workload (gpu_bench's engine: 32-step windows, 256 sequences), int8: the package of 4928746 (gate/up
# through the pointer byte split; `_old/`, a copy of that commit's mini_vllm/ and gpu_bench), this tree without the
# norms that split (--no-norm-split: 1b19050's rule), this tree, and bf16; alternating, two rounds, one machine.
# Then where this tree's int8 spends its kernel time (LLM's defaults). From the repo root:
#   OUT=$OUT bash benchmarks/results/down_split_h200/run_ab2.sh > $OUT/ab2.txt 2>&1
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site
run() { (cd $1 && timeout 100 python3 benchmarks/gpu_bench.py --out /tmp/n_$2 --sections env,thru \
          --thru-variants steps32_b16384 "${@:3}" > $OUT/logs2/$2.log 2>&1)
        echo "$2: $(grep -o '[0-9,]* output tok/s.*timed' $OUT/logs2/$2.log | head -1)"; }
mkdir -p $OUT/logs2
for r in 1 2; do
  run _old old_$r --quantization int8
  run . nonorm_$r --quantization int8 --no-norm-split
  run . norms_$r --quantization int8
  run . bf16_$r
done
PYTHONPATH=/tmp/site:$PWD timeout 100 python3 benchmarks/gpu_profile_side_by_side.py mini-int8 256 > $OUT/profile_int8_norms.json 2> /dev/null
echo "profile rc=$?"
tar czf $OUT/logs2.tgz -C $OUT logs2 && rm -rf $OUT/logs2
