"""Compile the small-batch GEMV (04i) for an H200 (sm_90) on a machine without a GPU and count its instructions:
registers, loads, int-to-float conversions (I2F), and the shared-memory stores and barriers that a change of layout
between the weights and the inputs costs. bf16, int8 and int4 weights (05), the gate/up projection with its norm
and SwiGLU, one token. Run from the repo root:
  python benchmarks/experiments/sass_gemv.py > benchmarks/results/sass_gemv_sm90_<commit>.txt
  python benchmarks/experiments/sass_gemv.py --residual [--m-pad 2]
  python benchmarks/experiments/sass_gemv.py --qmm
With --residual it counts instead the GEMV with a residual (no norm, no SwiGLU), int8 and int4, two and four rows of
1,024 per chunk, by kind of instruction, for one input row or --m-pad of them; with --qmm, chapter 05b's `_qmm_kernel` at QMM_TILING's tiles of 16, 128
and 256 rows, int8 and int4 (groups of 128), K in one share. (The conversions' rewrites were counted with `--rewrite`
and timed with `gemv_rewrites.py` at f04db11: `git show f04db11:benchmarks/gemv_rewrites.py`.)
"""
import argparse, collections, os, re, subprocess, sys, tempfile
os.environ["TRITON_INTERPRET"] = "0"
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "../..")))  # the repo root
from mini_vllm.fast import small_batch as sb  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump")
ALIGNED = ("x_ptr", "w_ptr", "b_ptr", "nw_ptr", "s_ptr", "z_ptr", "res_ptr", "out_ptr", "part_ptr", "count_ptr", "K", "N", "stride_x",
           "stride_res", "stride_out")          # what Triton assumes at run time of pointers and sizes divisible by 16


def sass(fn, types: dict, consts: dict, **opts) -> tuple[collections.Counter, str]:
    "Instruction counts and register use of fn compiled for sm_90 with these argument types and constants."
    sig = {a: ("constexpr" if a in consts else types.get(a, "i32")) for a in fn.arg_names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, a in enumerate(fn.arg_names) if a in ALIGNED}
    k = triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32), options=opts)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(k.asm["cubin"]); f.flush()
        text = subprocess.run([CUOBJDUMP, "-sass", f.name], capture_output=True, text=True).stdout
        res = subprocess.run([CUOBJDUMP, "-res-usage", f.name], capture_output=True, text=True).stdout
    ops = collections.Counter(re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+(?:\.[A-Z0-9_.]+)?)", text, re.M))
    regs = re.search(r"REG:(\d+)", res)
    return ops, regs.group(1) if regs else "?"


mode = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
group = mode.add_mutually_exclusive_group()
group.add_argument("--residual", action="store_true", help="the GEMV with a residual, by kind of instruction")
group.add_argument("--qmm", action="store_true", help="chapter 05b's qmm kernel at QMM_TILING's tiles")
mode.add_argument("--m-pad", type=int, default=1, help="--residual: input rows (the kernel's M_PAD: 1, 2, 4)")
args = mode.parse_args()

if args.qmm:
    from mini_vllm.quant import quant_kernels as qk
    print(f"triton {triton.__version__}, sm_90, _qmm_kernel, K in one share")
    for bits in (8, 4):
        for top, t in qk.QMM_TILING:
            if t["block_m"] not in (16, 128, 256) or (top is not None and top > 256 and t["block_m"] == 256): continue
            types = dict(x_ptr="*bf16", w_ptr="*i8" if bits == 8 else "*u8", s_ptr="*bf16", z_ptr="*bf16",
                         b_ptr="*bf16", out_ptr="*bf16", part_ptr="*fp32", count_ptr="*i32")
            consts = dict(HAS_BIAS=False, WBITS=bits, GROUP=128 if bits == 4 else 1, HAS_ZERO=False,
                          BLOCK_M=t["block_m"], BLOCK_N=t["block_n"], BLOCK_K=128 if bits == 4 else t["block_k"],
                          GROUP_N=8, SPLIT=1, IEEE=False)
            ops, regs = sass(qk._qmm_kernel, types, consts, num_warps=t["num_warps"], num_stages=t["num_stages"])
            print(f"int{bits} {t['block_m']} x {t['block_n']} tile, {t['num_warps']} warps: {regs} registers, "
                  f"{sum(ops.values())} instructions")
    sys.exit()

if args.residual:
    print(f"triton {triton.__version__}, sm_90, _gemv_kernel with a residual, {args.m_pad} input row(s)")
    for bits in (8, 4):
        for rows in (2, 4):
            types = dict(x_ptr="*bf16", w_ptr="*i8" if bits == 8 else "*u8", b_ptr="*bf16", nw_ptr="*bf16",
                         s_ptr="*bf16", z_ptr="*bf16", res_ptr="*bf16", out_ptr="*bf16", eps="fp32")
            consts = dict(NORM=False, SILU_OUT=False, HAS_BIAS=False, HAS_RES=True, EVEN_K=True, M_PAD=args.m_pad, BLOCK_N=rows,
                          BLOCK_K=1024, PDL=False, WBITS=bits, GROUP=128 if bits == 4 else 1, HAS_ZERO=False)
            ops, regs = sass(sb._gemv_kernel, types, consts, num_warps=4, num_stages=1)
            weights = rows * 1024 * (2 if bits == 4 else 1) * 2 // 128      # a thread's, in the two chunks compiled
            top = ", ".join(f"{k} {v}" for k, v in ops.most_common(8))
            print(f"int{bits} {rows} x 1024: {regs} registers, {sum(ops.values())} instructions for {weights} weights "
                  f"a thread; {top}")
    sys.exit()

print(f"triton {triton.__version__}, sm_90, _gemv_kernel with the norm prologue and SwiGLU epilogue, one row")
print(f"{'weights':8s} {'rows x chunk':>13s} {'regs':>5s} {'instr':>6s} {'loads':>26s} {'I2F':>4s} {'STS':>4s} {'BAR':>4s}")
bf = "*bf16"
for bits, wt, rows, chunk in ((16, bf, 2, 1024), (8, "*i8", 2, 1024), (8, "*i8", 4, 1024), (4, "*u8", 4, 1024)):
    types = dict(x_ptr=bf, w_ptr=wt, b_ptr=bf, nw_ptr=bf, s_ptr=bf, z_ptr=bf, res_ptr=bf, out_ptr=bf, eps="fp32")
    consts = dict(NORM=True, SILU_OUT=True, HAS_BIAS=False, HAS_RES=False, EVEN_K=True, M_PAD=1, BLOCK_N=rows,
                  BLOCK_K=chunk, PDL=False, WBITS=bits, GROUP=128 if bits == 4 else 1, HAS_ZERO=False)
    ops, regs = sass(sb._gemv_kernel, types, consts, num_warps=4, num_stages=1)
    loads = ", ".join(f"{k[4:]} {v}" for k, v in sorted(ops.items()) if k.startswith("LDG"))
    count = lambda p: sum(v for k, v in ops.items() if k.startswith(p))
    print(f"{'bf16' if bits == 16 else f'int{bits}':8s} {f'{2 * rows} x {chunk}':>13s} {regs:>5s} {sum(ops.values()):>6d} "
          f"{loads:>26s} {count('I2F'):>4d} {count('STS'):>4d} {count('BAR'):>4d}")
