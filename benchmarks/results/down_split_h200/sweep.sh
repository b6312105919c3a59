# The byte split's products through TMA at 32-256 rows, TinyLlama's four shapes, every 64-row tiling kept. One H200.
#   OUT=$OUT bash benchmarks/results/down_split_h200/sweep.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
timeout 400 python3 benchmarks/int8_split_mm.py --out $OUT/tma_rows.json --ms 256,192,128,96,64,32 --tma-only \
  > $OUT/tma_rows.log 2>&1; echo "rc=$?"; grep -v "^ *$" $OUT/tma_rows.log | tail -30
