# LLM's own defaults (one step ahead, up to 1,024 sequences) on the public workload, bf16 and int8 alternating, two
# rounds, one machine. From the repo root on an H200: OUT=$OUT bash benchmarks/results/byte_split_h200/run_default.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1; export PYTHONPATH=/tmp/site
run() { timeout 100 python3 benchmarks/gpu_bench.py --out /tmp/d_$1 --sections env,thru --thru-variants default "${@:2}" > /tmp/d_$1.log 2>&1; echo "$1: $(grep -o '[0-9,]* output tok/s.*timed' /tmp/d_$1.log | head -1)"; }
for r in 1 2; do run bf16_$r; run int8_$r --quantization int8; done
