# Run on an H200 from the repo root (bash run.sh); e_*.log here are $OUT/e/*.log, notebooks.log the last step's log.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site MINI_VLLM_COMMIT=6363f42
OLD='{"8,2,qkv":{"block_n":4,"block_k":1024,"num_warps":4},"8,2,swiglu":{"block_n":4,"block_k":1024,"num_warps":4},"8,2,narrow":{"block_n":4,"block_k":1024,"num_warps":4},"4,2,qkv":{"block_n":4,"block_k":2048,"num_warps":4},"4,2,narrow":{"block_n":4,"block_k":2048,"num_warps":4},"4,2,deep":{"block_n":4,"block_k":2048,"num_warps":4}}'
B="python3 benchmarks/gpu_bench.py --sections env,batch1 --batch1-variants small_batch --batch1-size 2"
mkdir -p $OUT/e
for run in int8_new int8_old int4_new int4_old bf16; do
  q=${run%%_*}; qa=""; [ $q != bf16 ] && qa="--quantization $q"
  ta=""; case $run in *old*) ta="--quant-tiling $OLD";; esac
  mkdir -p $OUT/e/$run; timeout 90 $B --out $OUT/e/$run $qa ${ta:+--quant-tiling "$OLD"} > $OUT/e/$run.log 2>&1
  echo "$run $(grep -o 'small_batch: [0-9.]* ms/token, graph [0-9.]* ms' $OUT/e/$run.log)"
done
OUT=$OUT/book NB_LIMIT=300 NOTEBOOKS="nbs/04i_small_batch.ipynb nbs/05b_quant_kernels.ipynb" bash benchmarks/gpu_book.sh notebooks
tail -3 $OUT/book/notebooks.log
