#!/usr/bin/env bash
# The comparison where the GPU is the limit, every figure on one GPU machine: Llama-3-8B's shape beside vLLM (256
# requests, batch 1, the profile), Qwen3-0.6B on nano-vllm's workload beside vLLM and nano-vllm, int8 and int4 at
# batch 1 and at 256 requests, TinyLlama at batch 1, and the copy bandwidth they are measured against. Nine calls of
# under ten minutes on one machine kept between them (/tmp survives), and a tenth, the int4 engine's profile.
# Calls 1 to 6 each bring one part of vLLM's wheels (.vllm-parts, from setup_vllm_h200.sh) and time mini_vllm alone
# meanwhile; call 6 installs vLLM.
#
#   MINI_VLLM_COMMIT=... bash benchmarks/h200_table.sh N      (N = 0 .. 10; Q_ENGINES: call 8's engines;
#                                                            STEPS: calls 1-3's mma_run.sh steps)
#
# Call 0 is for a machine held too briefly for vLLM's six calls: calls 1-3's mini_vllm figures in one call, the
# 256-request runs first (STEPS0 picks and orders mma_run.sh's steps), then TinyLlama. No wheel parts to carry.
#
# Carry .whlf (fastcore, pydantic, fastapi, uvicorn, gguf: wheels the image lacks), .commit, and in calls 1 to 6
# .vllm-parts/partNN (NN = N - 1) with .vllm-parts/SHA256SUMS; in call 8 .nano (nano-vllm's source and xxhash).
# What each call prints is in $OUT/times.txt; everything else is packed into $OUT/all_N.tgz (a call returns few
# files; two calls in one command keep both archives).
set -u
export OUT=${OUT:-/tmp/h200_table} MINI_VLLM_COMMIT=${MINI_VLLM_COMMIT:-$(cat .commit 2>/dev/null)}
QT8=benchmarks/results/int8_head_h100_06784e0/tiling8_qkv_o_down.json      # the int8 tiles swept on an H100
mkdir -p $OUT
pip install -q --no-index --no-deps --target /tmp/fsite .whlf/*.whl 2>/dev/null
export PYTHONPATH=/tmp/fsite:$PWD${PYTHONPATH:+:$PYTHONPATH}
log() { echo "== $(date +%T) $*" >> $OUT/times.txt; }
receive() { bash benchmarks/vllm_h200.sh receive >> $OUT/times.txt 2>&1; }
mma() { STEPS="$1" QT8=$QT8 bash benchmarks/mma_run.sh; }          # mma_run.sh appends to $OUT/times.txt
side() { SHAPE=$1 ENGINES=$2 BUDGET=${3:-500} bash benchmarks/vllm_h200.sh offline >> $OUT/times.txt 2>&1; }
copy() { log copy; python3 benchmarks/gpu_bench.py --out $OUT/copy --sections env,copy > $OUT/copy.log 2>&1
         grep -o '"gb_per_s": [0-9.]*' $OUT/copy/*.json >> $OUT/times.txt; }
tiny() { log tinyllama bf16 requests 1
         python3 benchmarks/gpu_bench.py --out $OUT/tiny --sections env,batch1 --batch1-variants small_batch \
             --shape tinyllama > $OUT/tiny.log 2>&1
         grep "^\[batch1\]" $OUT/tiny.log | cut -c1-300 >> $OUT/times.txt; }
case ${1:?call number} in
0) log "mini_vllm alone: calls 1-3's steps, no vLLM"; copy
   mma "${STEPS0:-thruint4 thru4k none int4 int8off thrunone thruint8 int8h int4w}"; tiny;;
1) receive; bash benchmarks/vllm_h200.sh env >> $OUT/times.txt 2>&1; copy; tiny
   mma "${STEPS:-none int8off int8h}";;                      # 8B at batch 1: bf16, int8 as shipped, int8 + its head + tiles
2) receive; mma "${STEPS:-int4 int4w thrunone}";;
3) receive; mma "${STEPS:-thruint8 thruint4 thru4k}";;
4|5) receive;;
6) receive; bash benchmarks/vllm_h200.sh install >> $OUT/times.txt 2>&1;;
7) side llama3_8b vllm,mini_vllm 520;;
8) pip install -q --no-index --no-deps --target /tmp/vsite .nano/*.whl
   export NANO_VLLM_SRC=$PWD/.nano; side qwen3_0.6b ${Q_ENGINES:-nano_vllm,vllm,mini_vllm} 520;;
9) SHAPE=llama3_8b PROFILE_ENGINES="vllm mini" bash benchmarks/vllm_h200.sh profile >> $OUT/times.txt 2>&1;;
10) SHAPE=llama3_8b PROFILE_ENGINES="mini-int4" bash benchmarks/vllm_h200.sh profile >> $OUT/times.txt 2>&1;;
esac
log end of call $1
(cd $OUT && tar czf /tmp/h200_all.tgz --exclude=./times.txt --exclude='./all_*.tgz' . \
   && find . -mindepth 1 ! -name times.txt ! -name 'all_*.tgz' -delete && mv /tmp/h200_all.tgz all_$1.tgz)
cat $OUT/times.txt
