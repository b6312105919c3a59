#!/usr/bin/env bash
# One GPU run for the book, in at most 9 minutes: the fp16 path (the one a T4 takes) checked by gpu_bench, and the
# GPU cells of the Triton chapters executed with their outputs saved, ready for tools/merge_outputs.py.
#
#   bash benchmarks/gpu_book.sh [STEP ...]   STEP: env bench bf16ref quant tp notebooks ab (default: env bench notebooks)
#   QUANT_VARIANTS="" leaves out the quant step's GEMV tiling variants (BITS-BLOCK_K, default "8-2048 4-128 4-1024")
#   ab (about 150 s for one REV): this tree against the earlier ones in _ab/REV, alternating, REVS="..."
#   ROUNDS=2: the public workload's tok/s and batch-1 ms/token in each tree's two loops (ab_h200.sh STAGE=bench)
#
# Run from the repo root. Everything goes under $OUT (default ./gpu_book_out), at most 8 files, none deeper than
# $OUT/a/b/file: env.txt, <step>.log per step, gpu_bench_fp16.json (and _bf16), bench_extras.tgz, notebooks.tgz,
# quant.tgz (chapter 05: the kernels' errors and timings, then batch 1 and the public workload in bf16, int8, int4)
# with gpu_quant.json, the file chapter 05b reads.
# Each step runs in its own process under its own time limit, so one that fails or hangs leaves the others' files.
# Wheels for what the GPU image lacks (fastcore) are taken from $WHEELS (default .whl), as benchmarks/README.md says.
set -u
OUT=${OUT:-$PWD/gpu_book_out}
WHEELS=${WHEELS:-.whl}
COMMIT=${MINI_VLLM_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}   # a copy without its history: set it
NOTEBOOKS=${NOTEBOOKS:-nbs/04g0_triton_kernels.ipynb nbs/04g1_triton_attention.ipynb nbs/04h_cuda_graphs.ipynb nbs/04i_small_batch.ipynb nbs/05b0_quant_kernels.ipynb}
STEPS=${*:-env bench notebooks}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 MINI_VLLM_COMMIT=$COMMIT   # a step killed at its limit prints every thread

if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        "$WHEELS"/*.whl >> "$OUT/env.txt" 2>&1 || echo "wheel install failed: see env.txt"
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

step() {    # step NAME SECONDS COMMAND...: run COMMAND in its own process, its output in $OUT/NAME.log
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    timeout -s ABRT --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    echo "[$name] rc=$rc $((SECONDS - t0))s" | tee -a "$OUT/$name.log"
}

for s in $STEPS; do case $s in
env)
    { echo "commit $COMMIT"; date -u; nvidia-smi; python3 -c "import sys, torch, triton, transformers
print(sys.version); print('torch', torch.__version__, 'triton', triton.__version__)
print('transformers', transformers.__version__)
print(torch.cuda.get_device_name(0), 'capability', torch.cuda.get_device_capability(0))"; } >> "$OUT/env.txt" 2>&1 ;;
bench)                                  # fp16: kernels, greedy agreement (both loops), throughput and batch 1 (both)
    step bench 330 python3 benchmarks/gpu_bench.py --dtype float16 --out /tmp/bench_fp16 \
        --sections env,kernels,correct,thru,batch1 --thru-variants async,sync
    cp /tmp/bench_fp16/gpu_bench.json "$OUT/gpu_bench_fp16.json" 2>/dev/null
    (cd /tmp/bench_fp16 && tar czf "$OUT/bench_extras.tgz" --exclude=gpu_bench.json .) ;;
bf16ref)                                # the same throughput in bf16, same machine, for the ratio (one step ahead)
    step bf16ref 90 python3 benchmarks/gpu_bench.py --dtype bfloat16 --out /tmp/bench_bf16 \
        --sections env,thru --thru-variants async
    cp /tmp/bench_bf16/gpu_bench.json "$OUT/gpu_bench_bf16.json" 2>/dev/null ;;
quant)                                  # chapter 05: kernels, then the engine with each kind of weight
    mkdir -p /tmp/quant
    step quant 90 python3 benchmarks/gpu_bench.py --out /tmp/quant/kernels --sections env,quant
    for q in none int8 int4; do
        flag=$([ $q = none ] || echo "--quantization $q")
        step engine_$q 75 python3 benchmarks/gpu_bench.py --out /tmp/quant/engine_$q --sections env,batch1,thru \
            --batch1-variants small_batch --thru-variants async $flag
    done
    # batch 1 with other tilings for the quantized GEMV (QUANT_TILING): BITS-BLOCK_K for every shape
    for v in ${QUANT_VARIANTS-8-2048 4-128 4-1024}; do
        IFS=- read bits bk <<< "$v"
        tiling=$(python3 -c "import json; print(json.dumps({f'$bits,{m},{k}': dict(block_n=4, block_k=$bk, num_warps=4)
            for m in (1, 2) for k in ('narrow', 'wide', 'deep', 'swiglu', 'qkv')}))")
        step engine_v$v 60 python3 benchmarks/gpu_bench.py --out /tmp/quant/engine_v$v --sections env,batch1 \
            --batch1-variants small_batch --quantization int$bits --quant-tiling "$tiling"
    done
    grep -h "ms/token\|tok/s\|rc=" "$OUT"/engine_*.log | cut -c1-110
    python3 - /tmp/quant "$OUT/gpu_quant.json" <<'PY'   # chapter 05b's file: the kernels, then each engine
import json, os, sys
d, out = sys.argv[1:]
k = json.load(open(f"{d}/kernels/gpu_bench.json"))
r = dict(env=k["env"], code=os.environ["MINI_VLLM_COMMIT"], commands=dict(
    kernels="python3 benchmarks/gpu_bench.py --sections env,quant",
    engines="python3 benchmarks/gpu_bench.py --sections env,batch1,thru --batch1-variants small_batch "
            "--thru-variants async [--quantization int8|int4]"), quant=k.get("quant"), engines={})
for q in ("none", "int8", "int4"):
    try: e = json.load(open(f"{d}/engine_{q}/gpu_bench.json"))
    except OSError: continue
    r["engines"][q] = dict(quantization=None if q == "none" else q, batch1=e.get("batch1", {}).get("small_batch"),
                           thru=e.get("thru", {}).get("async"), workload=e.get("thru", {}).get("workload"))
json.dump(r, open(out, "w"), indent=1)
PY
    mv "$OUT"/quant.log "$OUT"/engine_*.log /tmp/quant/ 2>/dev/null
    (cd /tmp && tar czf "$OUT/quant.tgz" quant) ;;
tp)                                     # chapter 09 on two GPUs: batch 1, the public workload, agreement
    step tp 480 python3 benchmarks/tp_bench.py --out /tmp/tp
    cp /tmp/tp/tp_bench.json "$OUT/" 2>/dev/null ;;
notebooks)                              # the chapters' GPU cells, outputs saved into copies of the notebooks
    step notebooks ${NB_LIMIT:-200} python3 tools/run_cells.py --flags gpu --save-outputs /tmp/executed $NOTEBOOKS
    (cd /tmp && tar czf "$OUT/notebooks.tgz" executed) ;;
ab)                                     # this tree against $REVS (each in _ab/REV), alternating: ab.txt, ab.tgz
    STAGE=bench OUT="$OUT" MINI_VLLM_COMMIT=$COMMIT bash benchmarks/ab_h200.sh > "$OUT/ab.log" 2>&1
    echo "[ab] rc=$?"; cat "$OUT/ab.txt" 2>/dev/null ;;
*) echo "unknown step $s (env bench bf16ref quant tp notebooks ab)" ;;
esac; done
ls -la "$OUT"
