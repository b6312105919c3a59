# Registers and instructions of 04i's _gemv_kernel at the table's one-token tiles, compiled for sm_90 on a CPU (triton 3.9),
# run once on the shipped package and once with rows_dot_per_chunk.diff applied. From the repo root:
#   python benchmarks/results/rows_dot_per_chunk/sass_rows_dot.py
import sys, os
src=open("benchmarks/sass_gemv.py").read()
src=src[:src.index("mode = argparse.ArgumentParser")]
exec(compile(src, "sass_gemv_head", "exec"))
bf="*bf16"
rows_cfg = [  # (label, bits, NORM, SILU, RES, BLOCK_N, BLOCK_K(stored), warps)
    ("int8 o (8 x 2048, 4 w)", 8, False, False, True, 8, 2048, 4),
    ("int8 down (8 x 2048, 8 w)", 8, False, False, True, 8, 2048, 8),
    ("int8 gate/up (2 pairs x 1024, 4 w)", 8, True, True, False, 2, 1024, 4),
    ("bf16 o (4 x 2048, 4 w)", 16, False, False, True, 4, 2048, 4),
    ("bf16 gate/up (2 pairs x 1024, 4 w)", 16, True, True, False, 2, 1024, 4),
    ("bf16 down (4 x 2048, 8 w)", 16, False, False, True, 4, 2048, 8),
    ("int4 o (4 x 1024 bytes, 4 w)", 4, False, False, True, 4, 1024, 4),
    ("int8 o (16 x 2048, 8 w)", 8, False, False, True, 16, 2048, 8),
    ("int8 o (32 x 2048, 8 w)", 8, False, False, True, 32, 2048, 8),
]
for label, bits, norm, silu, res, bn, bk, w in rows_cfg:
    wt = {8: "*i8", 4: "*u8", 16: bf}[bits]
    types = dict(x_ptr=bf, w_ptr=wt, b_ptr=bf, nw_ptr=bf, s_ptr=bf, z_ptr=bf, res_ptr=bf, out_ptr=bf, eps="fp32")
    consts = dict(NORM=norm, SILU_OUT=silu, HAS_BIAS=False, HAS_RES=res, EVEN_K=True, M_PAD=1, BLOCK_N=bn,
                  BLOCK_K=bk, PDL=True, WBITS=bits, GROUP=128 if bits == 4 else 1, HAS_ZERO=False)
    ops, regs = sass(sb._gemv_kernel, types, consts, num_warps=w, num_stages=1)
    c = lambda p: sum(v for k, v in ops.items() if k.startswith(p))
    print(f"{label}: {regs} regs, {sum(ops.values())} instr, BAR {c('BAR')}, STS {c('STS')}, SHFL {c('SHFL')}, "
          f"STL {c('STL')}", flush=True)
