# Rounds 3 and 4 of the engine table in benchmarks/README.md: run with norms_split.diff applied to the package
# (`patch -p1 < benchmarks/results/byte_split_h200/norms_split.diff`), which adds --no-byte-split-norms to gpu_bench.py.
# The public workload with int8 weights: norms splitting q,k,v's and gate/up's inputs (the package's default),
# against gate/up splitting its own (--no-byte-split-norms), against no byte split (--byte-split-rows 0,0);
# alternating, two rounds, one machine, bf16 once a round. Then chapter 05b's GPU cells. From the repo root on an H200:
#   OUT=$OUT bash benchmarks/results/byte_split_h200/run_ab2.sh > $OUT/ab2.txt 2>&1
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1; export PYTHONPATH=/tmp/site
run() { timeout 100 python3 benchmarks/gpu_bench.py --out /tmp/e_$1 --sections env,thru --thru-variants steps32_b16384 "${@:2}" > /tmp/e_$1.log 2>&1; echo "$1: $(grep -o '[0-9,]* output tok/s.*timed' /tmp/e_$1.log | head -1)"; }
for r in 1 2; do
  run norms_$r --quantization int8
  run layer_$r --quantization int8 --no-byte-split-norms
  run none_$r --quantization int8 --byte-split-rows 0,0
  run bf16_$r
done
tail -n 6 /tmp/e_*.log > ${OUT:-.}/engine_logs2.txt
OUT=${OUT:-.}/book NB_LIMIT=280 NOTEBOOKS=nbs/05b_quant_kernels.ipynb bash benchmarks/gpu_book.sh notebooks > /dev/null 2>&1
grep -h "int8 M=\|int4 M=\|Error\|error\|passed\|failed" ${OUT:-.}/book/notebooks.log | tail -30
