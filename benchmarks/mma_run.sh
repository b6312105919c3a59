# The tensor-core kernels of chapters 05b2 (int4) and 05b3 (int8) on one GPU, in one go, logs under $OUT:
# 05b3's and 05b2's GPU cells (outputs saved to $OUT/executed, merged by tools/merge_outputs.py), the int8
# products a layer at a time, and the engine's Llama-3-8B token with int8 through 05b3's kernel, through 05b0's,
# and in bf16, each in its own process. STEPS picks and orders the parts (step@B: B requests together); the
# [batch1] lines and the last lines of each part go to $OUT/times.txt. On the device machine, wheels of what
# its image lacks in .whlf/. Also: sweep8, the one-token GEMV's tiles swept in a chain of Llama-3-8B's layers for
# int8 (quant_chain_sweep.py; SWEEP_SHAPES, e.g. down, for some of qkv,o,gate_up,down), the best of each shape
# written to $OUT/tiling8.json; int8t, the engine's int8 token with the tiles in that file, or in $QT8 (05b0's
# kernels); int8h, the int8 token with the LM head in int8 too (and $QT8's tiles where it is set). depth4: 05b2's
# int4 products on Llama-3-8B's shape with the weights streamed 4, 8 and 16 chunks ahead; int4: the engine's int4
# token; int4dD: the same with 05b2's kernel streaming D chunks ahead (this checkout's source edited for the
# step, then restored); depth8: 05b3's int8 products likewise. PACK=1: at the end, every file but times.txt
# packed into $OUT/all.tgz. thruQ (Q: none, int8 or int4): the public workload's
# 256 requests on Llama-3-8B's shape in Q. int4w: the int4 token with $MMA_WARPS (gpu_bench's --mma-warps; by
# default 8 warps a strip for products of 4,096 outputs, o and down, where int4_mma_bench found 8 faster than 16).
# thru4k: thruint4 with every step of at most 256 rows (the decode-only steps of 256 requests) through 05b's
# kernels on the int4 weights instead of a rebuilt bf16 weight and cuBLAS (gpu_bench's --dequant-min-m 257).
# int4a and thru4a: int4 and thruint4 in the grid LLM(quantization="int4") calibrates on real weights (05c):
# asymmetric groups of 64 (gpu_bench's --int4-grid 64,asym; its dummy weights are rounded to nearest).
# qmm8b: qmm's int4 tilings swept on Llama-3-8B's four products at $QMM_ROWS rows (256,128 by default), the one
# tiling per row count that is fastest over the four written to $OUT/qmm_tiling.json; thru4q: thru4k with those.
# bench4a, bench4: 05b2's int4 products of Llama-3-8B's shape at 1, 2 and 16 tokens (int4_mma_bench.py) in the
# default grid (asymmetric groups of 64) and in symmetric groups of 128. A step written STEP:before runs with the
# package of $BEFORE (a folder holding another commit's mini_vllm/) in place of this checkout's, its files named
# _before (the folder is swapped, not the path: gpu_bench.py puts the checkout first on its own path).
#
#     MINI_VLLM_COMMIT=$(git rev-parse --short HEAD) [STEPS="cells3 bench8 int8 int8off none cells2"] \
#         bash benchmarks/mma_run.sh
if ls .whlf/*.whl > /dev/null 2>&1; then
  pip install -q --no-index --no-deps --target /tmp/fsite .whlf/*.whl && export PYTHONPATH=/tmp/fsite:$PWD
fi
export MINI_VLLM_COMMIT=${MINI_VLLM_COMMIT:-$(cat .commit 2>/dev/null)}
OUT=${OUT:-/tmp/mma_run}
mkdir -p $OUT/executed
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
t() { echo "== $(date +%T) $*" >> $OUT/times.txt; }
eng() {  # shape, quantization (or ""), tag, environment; requests together: $B (1 by default); tiles: $QT;
         # the LM head quantized too: $HEAD; int4's groups and grid: $GRID (e.g. 64,asym)
  t "$1 $2 $3$SUF requests ${B:-1}"
  env $4 python3 benchmarks/gpu_bench.py --out $OUT/g_$3${SUF}_b${B:-1} --sections env,batch1 --batch1-size ${B:-1} \
    --batch1-variants small_batch --shape $1 ${2:+--quantization $2} ${QT:+--quant-tiling "$(cat $QT)"} \
    ${HEAD:+--quant-lm-head} ${MW:+--mma-warps "$MW"} ${GRID:+--int4-grid $GRID} \
    > $OUT/$1_$3${SUF}_b${B:-1}.log 2>&1
  grep "^\[batch1\]" $OUT/$1_$3${SUF}_b${B:-1}.log | cut -c1-400 >> $OUT/times.txt
}
bench4() {  # grid, name
  t "bench $2$SUF"; python3 benchmarks/int4_mma_bench.py --shapes llama3_8b --ms 1,2,16 --int4-grid $1 \
    --out $OUT/$2$SUF.json > $OUT/$2$SUF.log 2>&1; grep "built in\|Error" $OUT/$2$SUF.log >> $OUT/times.txt
}
cells() {  # notebook, log name
  t "$2"; PYTHONFAULTHANDLER=1 python3 tools/run_cells.py --flags gpu --save-outputs $OUT/executed $1 > $OUT/$2.log 2>&1
  tail -3 $OUT/$2.log >> $OUT/times.txt
}
for each in ${STEPS:-cells3 bench8 int8 int8off none cells2}; do  # a step, or step@B: B requests together
  step=${each%@*}; B=1; [ "$step" != "$each" ] && B=${each#*@}
  SUF=
  if [ "${step%:before}" != "$step" ]; then
    step=${step%:before}; SUF=_before; mv mini_vllm /tmp/mini_vllm.now && cp -r $BEFORE/mini_vllm mini_vllm || exit
  fi
  case $step in
  bench4a) bench4 64,asym bench_g64a;;
  bench4) bench4 128,sym bench_g128;;
  cells3) cells nbs/05b3_int8_mma.ipynb cells_05b3;;
  cells2) cells nbs/05b2_int4_mma.ipynb cells_05b2;;
  bench8) t bench8; python3 benchmarks/int4_mma_bench.py --bits 8 --out $OUT/int8_mma_bench.json > $OUT/bench8.log 2>&1
          tail -2 $OUT/bench8.log >> $OUT/times.txt;;
  int8) eng llama3_8b int8 int8 MINI_VLLM_INT8_MMA=1;;
  int8off) eng llama3_8b int8 int8_off MINI_VLLM_INT8_MMA=0;;
  none) eng llama3_8b "" none;;
  sweep8) t sweep8; python3 benchmarks/experiments/quant_chain_sweep.py --shape llama3_8b --formats int8 \
            --block-n 1,2,4,8,16 ${SWEEP_SHAPES:+--shapes $SWEEP_SHAPES} --out $OUT/sweep8 \
            --tiling-out $OUT/tiling8.json > $OUT/sweep8.log 2>&1
          tail -6 $OUT/sweep8.log >> $OUT/times.txt; cat $OUT/tiling8.json >> $OUT/times.txt;;
  int8t) QT=${QT8:-$OUT/tiling8.json} eng llama3_8b int8 int8_tiled MINI_VLLM_INT8_MMA=0;;
  depth4) t depth4; python3 benchmarks/int4_mma_bench.py --shapes llama3_8b --ms 1,2 --depths 8,16 \
            --out $OUT/int4_depth.json > $OUT/depth4.log 2>&1; tail -9 $OUT/depth4.log | cut -c1-600 >> $OUT/times.txt;;
  depth8) t depth8; python3 benchmarks/int4_mma_bench.py --bits 8 --shapes llama3_8b --ms 1,2 --depths 8 \
            --out $OUT/int8_depth.json > $OUT/depth8.log 2>&1; tail -9 $OUT/depth8.log | cut -c1-600 >> $OUT/times.txt;;
  int4) eng llama3_8b int4 int4;;
  thru4k) t thru int4, no rebuilt weights up to 256 rows; python3 benchmarks/gpu_bench.py --out $OUT/thru_int4k \
            --sections env,thru --thru-variants async --shape llama3_8b --quantization int4 --dequant-min-m 257 \
            > $OUT/thru_int4k.log 2>&1; grep "output tok/s" $OUT/thru_int4k.log >> $OUT/times.txt;;
  int4a) GRID=64,asym eng llama3_8b int4 int4_g64a;;
  thru4a) t thru int4, asymmetric groups of 64; python3 benchmarks/gpu_bench.py --out $OUT/thru_int4a \
            --sections env,thru --thru-variants async --shape llama3_8b --quantization int4 --int4-grid 64,asym \
            > $OUT/thru_int4a.log 2>&1; grep "output tok/s" $OUT/thru_int4a.log >> $OUT/times.txt;;
  qmm8b) t qmm8b; python3 benchmarks/experiments/quant_sweep.py --out $OUT/qmm8b --only qmm --shape llama3_8b \
           --rows ${QMM_ROWS:-256,128} --formats int4 --budget-s ${QMM_BUDGET:-240} \
           --tiling-out $OUT/qmm_tiling.json > $OUT/qmm8b.log 2>&1
         grep "^qmm\|^rows" $OUT/qmm8b.log | cut -c1-300 >> $OUT/times.txt; cat $OUT/qmm_tiling.json >> $OUT/times.txt;;
  thru4q) t thru int4, no rebuilt weights up to 256 rows, qmm tiles $(cat $OUT/qmm_tiling.json)
          python3 benchmarks/gpu_bench.py --out $OUT/thru_int4q --sections env,thru --thru-variants async \
            --shape llama3_8b --quantization int4 --dequant-min-m 257 --qmm-tiling "$(cat $OUT/qmm_tiling.json)" \
            > $OUT/thru_int4q.log 2>&1; grep "output tok/s" $OUT/thru_int4q.log >> $OUT/times.txt;;
  int4w) MW=${MMA_WARPS:-'{"4096": 8}'} eng llama3_8b int4 int4_w;;
  thru*) q=${step#thru}; q=${q:-none}; t thru $q; python3 benchmarks/gpu_bench.py --out $OUT/thru_$q --sections env,thru \
           --thru-variants async --shape llama3_8b $([ $q = none ] || echo --quantization $q) > $OUT/thru_$q.log 2>&1
         grep "output tok/s" $OUT/thru_$q.log >> $OUT/times.txt;;
  int4d*) d=${step#int4d}; f=mini_vllm/quant/int4_mma.py; cp $f /tmp/int4_mma.py.orig
          sed -i "s/constexpr int DEPTH = 4;/constexpr int DEPTH = $d;/" $f
          if grep -q "DEPTH = $d;" $f; then eng llama3_8b int4 int4_d$d; else t "$step: no DEPTH = 4 to edit"; fi
          cp /tmp/int4_mma.py.orig $f;;
  int8h) HEAD=1 QT=${QT8:-} eng llama3_8b int8 int8_head${QT8:+_tiled} MINI_VLLM_INT8_MMA=0;;
esac
if [ -n "$SUF" ]; then rm -rf mini_vllm && mv /tmp/mini_vllm.now mini_vllm; fi
done
t end
if [ -n "${PACK:-}" ]; then  # everything but times.txt in one archive: a device may return only a few files
  (cd $OUT && tar czf /tmp/mma_all.tgz --exclude=./times.txt . && find . -mindepth 1 ! -name times.txt -delete \
     && mv /tmp/mma_all.tgz all.tgz)
fi
