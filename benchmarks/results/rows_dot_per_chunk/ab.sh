#!/usr/bin/env bash
# The per-chunk GEMV (rows_dot_per_chunk.diff) against the tree without it: batch 1 in the engine, alternating, two
# rounds, then the one-token chain, for int8 and bf16 (../batch1_int8_more_h200/ab_batch1.sh does the timing). On an
# H200, from the repo root of a tree without the patch (the patch is applied here, on this copy):
#   OUT=$OUT bash benchmarks/results/rows_dot_per_chunk/ab.sh > $OUT/ab.txt 2>&1
set -u
here=benchmarks/results/rows_dot_per_chunk
rm -rf old_tree && mkdir -p old_tree && cp -r mini_vllm benchmarks old_tree/
patch -p1 < $here/rows_dot_per_chunk.diff || exit 1
for q in int8 bf16; do Q=$q CHAIN=1 OUT=${OUT:-.}/$q bash benchmarks/results/batch1_int8_more_h200/ab_batch1.sh; done
