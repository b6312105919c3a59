# Instructions of chapter 05b's _byte_split_mm_kernel compiled for sm_90 on a CPU (triton 3.9; the H200 runs 3.6): whether
# the int8 products are Hopper's wgmma (IGMMA in SASS) or the older mma.sync (IMMA). From the repo root:
#   python benchmarks/results/int8_split_mm_h200/sass_byte_split.py > benchmarks/results/int8_split_mm_h200/sass_byte_split.txt
import sys, os
src=open("benchmarks/sass_gemv.py").read()
src=src[:src.index("mode = argparse.ArgumentParser")]
exec(compile(src, "sass_gemv_head", "exec"))
from mini_vllm import quant_kernels as qk
ALIGNED_EXTRA = ("hi_ptr", "lo_ptr", "sx_ptr", "sw_ptr", "stride_out")
def sass2(fn, types, consts, **opts):
    global ALIGNED
    ALIGNED = ALIGNED + ALIGNED_EXTRA
    return sass(fn, types, consts, **opts)
types = dict(hi_ptr="*i8", lo_ptr="*i8", sx_ptr="*fp32", w_ptr="*i8", sw_ptr="*bf16", b_ptr="*bf16", out_ptr="*bf16")
for bm, bn, bk, nw, ns in [(64, 64, 128, 4, 4), (64, 128, 64, 4, 3), (128, 128, 128, 8, 3)]:
    consts = dict(HAS_BIAS=False, EVEN_K=True, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    ops, regs = sass2(qk._byte_split_mm_kernel, types, consts, num_warps=nw, num_stages=ns)
    mm = {k: v for k, v in ops.items() if "MMA" in k or "GMMA" in k}
    print(f"{bm}x{bn}x{bk} w{nw} s{ns}: {regs} regs, {sum(ops.values())} instr, mma: {mm}, "
          f"LDGSTS {sum(v for k,v in ops.items() if k.startswith('LDGSTS'))}, LDSM {sum(v for k,v in ops.items() if k.startswith('LDSM'))}, "
          f"LDG {sum(v for k,v in ops.items() if k.startswith('LDG.'))}, BAR {sum(v for k,v in ops.items() if k.startswith('BAR'))}, "
          f"WARPGROUP {sum(v for k,v in ops.items() if 'WARPGROUP' in k)}", flush=True)
