# The public workload (gpu_bench's engine: 32-step windows, 256 sequences): int8 with the package of the parent
# commit (gate/up through the pointer byte split, in `_old/`, a copy of that commit's mini_vllm/ and benchmarks/)
# against this tree (TMA tiles, every kind, the down projection's inputs split as SwiGLU gates them), this tree
# with the gate applied apart (--no-gated-split), and bf16; alternating, two rounds, one machine. Then LLM's
# defaults, int8 and bf16, and where this tree's int8 spends its kernel time. From the repo root:
#   OUT=$OUT bash benchmarks/results/down_split_h200/run_ab.sh > $OUT/ab.txt 2>&1
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site
run() { (cd $1 && timeout 120 python3 benchmarks/gpu_bench.py --out /tmp/n_$2 --sections env,thru \
          --thru-variants ${V:-steps32_b16384} "${@:3}" > $OUT/logs/$2.log 2>&1)
        echo "$2: $(grep -o '[0-9,]* output tok/s.*timed' $OUT/logs/$2.log | head -1)"; }
mkdir -p $OUT/logs
for r in 1 2; do
  run _old old_$r --quantization int8
  run . new_$r --quantization int8
  run . apart_$r --quantization int8 --no-gated-split
  run . bf16_$r
done
V=default run . default_new --quantization int8
V=default run . default_bf16
PYTHONPATH=/tmp/site:$PWD timeout 150 python3 benchmarks/gpu_profile_side_by_side.py mini-int8 256 > $OUT/profile_int8.json 2> /dev/null
echo "profile rc=$?"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $OUT/logs
