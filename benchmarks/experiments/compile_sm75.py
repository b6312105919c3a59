"""Compile every Triton kernel of the engine's GPU path in fp16 for one compute capability (default 75, a T4),
without a GPU: shared memory, registers and stack (spills) per thread from the cubin, Hopper-only instructions in the
PTX, and, for the attention kernels, smaller tilings. Run from the repo root:
  python benchmarks/experiments/compile_sm75.py [CC] > benchmarks/results/compile_sm75_cpu_<commit>.txt
"""
import os, sys
os.environ["TRITON_INTERPRET"] = "0"
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "../..")))  # the repo root
from mini_vllm.fast import triton_attention as ta, triton_kernels as tk, small_batch as sb, cuda_graphs as cg
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump")
CC = int(sys.argv[1]) if len(sys.argv) > 1 else 75
print(f'sm_{CC}, triton {triton.__version__}, fp16; regs/stack per thread from cuobjdump -res-usage')
TARGET = GPUTarget("cuda", CC, 32)

def comp(name, fn, types, consts, **opts):
    sig = {a: ("constexpr" if a in consts else types[a]) for a in fn.arg_names}
    try:
        k = triton.compile(ASTSource(fn, sig, consts), target=TARGET, options=opts)
        md = k.metadata
        ptx = k.asm["ptx"]
        mma = "mma.sync" in ptx or "wgmma" in ptx
        hop = [w for w in ("griddepcontrol", "cp.async.bulk", "wgmma", "setmaxnreg", "mbarrier", "cp.async") if w in ptx]
        import subprocess, tempfile
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(k.asm["cubin"]); f.flush()
            res = subprocess.run([CUOBJDUMP, "-res-usage", f.name], capture_output=True, text=True).stdout
        use = " ".join(" ".join(l.split()[:2]) for l in res.splitlines() if "REG" in l)
        print(f"{name:40s} ok  shared {md.shared:6d} B  warps {md.num_warps}  {use[:20]:20s} tensor-core mma {mma} {hop or ''}")
    except Exception as e:
        print(f"{name:40s} FAILED: {str(e).splitlines()[0][:300] if str(e) else repr(e)[:300]}")

f16, f32, i32, i64 = "*fp16", "*fp32", "*i32", "*i64"
comp("rms_norm (res)", tk._rms_norm_kernel, dict(x_ptr=f16, res_ptr=f16, w_ptr=f16, out_ptr=f16, res_out_ptr=f16, eps="fp32",
     n_cols="i32", stride_x="i32", stride_r="i32"), dict(HAS_RES=True, BLOCK=1024))
comp("silu_and_mul", tk._silu_and_mul_kernel, dict(x_ptr=f16, out_ptr=f16, n_cols="i32"), dict(BLOCK=1024))
for H, HKV in ((9, 3), (32, 4)):
    comp(f"rope_write H{H}/{HKV}", tk._rope_write_kernel, dict(qkv_ptr=f16, cos_ptr=f16, sin_ptr=f16, slot_ptr=i64, k_cache_ptr=f16,
         v_cache_ptr=f16, stride_t="i32", stride_cos="i32", stride_slot="i32"),
         dict(H=H, HKV=HKV, D=64, HEADS_PAD=triton.next_power_of_2(H + HKV), KV_PAD=triton.next_power_of_2(HKV)))
dec = dict(o_ptr=f16, acc_ptr=f32, ml_ptr=f32, count_ptr=i32, q_ptr=f16, k_ptr=f16, v_ptr=f16, bt_ptr=i32, seq_lens_ptr=i32,
           qsl_ptr=i32, reqs_ptr=i32, slot_ptr=i64, num_new="i32", scale="fp32", stride_qt="i32", stride_qh="i32",
           stride_ot="i32", stride_oh="i32", stride_bt="i32", num_parts="i32", partition="i32")
for H, HKV in ((9, 3), (32, 4)):
    G = H // HKV; G2 = triton.next_power_of_2(G)
    for one, step in ((True, 0), (False, 1), (False, 0)):
        comp(f"decode H{H}/{HKV} one_part={one} step={step}", ta._decode_kernel, dec,
             dict(G=G, G_PAD=max(16, G2), G2=G2, HKV=HKV, D=64, BLOCK_SIZE=16, BLOCK_N=64, PARTS=max(2, 4096 // (G2 * 64)),
                  ONE_PART=one, STEP_PAD=step, IEEE=False, PDL=False), num_warps=2, num_stages=4)
    comp(f"prefill H{H}/{HKV}", ta._prefill_kernel, dict(o_ptr=f16, q_ptr=f16, k_ptr=f16, v_ptr=f16, bt_ptr=i32, seq_lens_ptr=i32,
         qsl_ptr=i32, tiles_ptr=i32, scale="fp32", stride_qt="i32", stride_qh="i32", stride_ot="i32", stride_oh="i32",
         stride_bt="i32"), dict(G=G, HKV=HKV, D=64, BLOCK_SIZE=16, BLOCK_M=64, BLOCK_N=64, IEEE=False), num_warps=4)
gem = dict(x_ptr=f16, w_ptr=f16, b_ptr=f16, nw_ptr=f16, s_ptr=f16, z_ptr=f16, res_ptr=f16, out_ptr=f16, M="i32", N="i32",
           K="i32", stride_x="i32", stride_res="i32", stride_out="i32", eps="fp32")
fp16_weights = dict(WBITS=16, GROUP=128, HAS_ZERO=False)                 # chapter 05's formats: not these
for M in (1, 2):
    for label, N, K, kw in (("o+res", 576, 576, dict(HAS_RES=True)), ("gate_up silu", 1536, 576, dict(NORM=True, SILU_OUT=True)),
                            ("down+res", 576, 1536, dict(HAS_RES=True)), ("lm_head", 49152, 576, {})):
        kind = "swiglu" if kw.get("SILU_OUT") else None
        M_PAD, t = sb._tiling(M, N, K, kind)
        c = dict(NORM=False, SILU_OUT=False, HAS_BIAS=False, HAS_RES=False, EVEN_K=K % t["block_k"] == 0, M_PAD=M_PAD,
                 BLOCK_N=t["block_n"], BLOCK_K=t["block_k"], PDL=False, **fp16_weights); c.update(kw)
        types = dict(gem, out_ptr=f32) if label == "lm_head" else gem
        comp(f"gemv M{M} {label}", sb._gemv_kernel, types, c, num_warps=t["num_warps"], num_stages=t["num_stages"])
    M_PAD, t = sb._tiling(M, 960, 576, "qkv")
    comp(f"qkv_rope M{M}", sb._qkv_rope_kernel, dict(x_ptr=f16, w_ptr=f16, b_ptr=f16, nw_ptr=f16, s_ptr=f16, z_ptr=f16,
         qkv_ptr=f16, cos_ptr=f16,
         sin_ptr=f16, pos_ptr=i64, slot_ptr=i64, kc_ptr=f16, vc_ptr=f16, M="i32", K="i32", stride_x="i32", stride_qkv="i32",
         stride_cos="i32", eps="fp32"), dict(H=9, HKV=3, D=64, HAS_BIAS=False, EVEN_K=576 % t["block_k"] == 0, M_PAD=M_PAD,
         BLOCK_H=min(t["block_n"] // 2, 32), BLOCK_K=t["block_k"], PDL=False, **fp16_weights), num_warps=t["num_warps"],
         num_stages=t["num_stages"])
comp("advance", cg._advance_kernel, dict(tok_ptr=i64, ids_ptr=i64, pos_ptr=i64, slots_ptr=i64, seq_lens_ptr=i32, bt_ptr=i32,
     n="i32", stride_bt="i32"), dict(BLOCK_SIZE=16, BLOCK=32))
comp("argmax", cg._argmax_kernel, dict(x_ptr=f32, out_ptr=i64, V="i32", stride="i32"), dict(BLOCK=32768), num_warps=16)

# smaller attention tiles: what compiles without spills where tl.dot runs on FMA units
for bm, bn, nw in ((64, 64, 8), (32, 32, 4), (16, 32, 4)):
    comp(f"prefill H9/3 M{bm} N{bn} w{nw}", ta._prefill_kernel, dict(o_ptr=f16, q_ptr=f16, k_ptr=f16, v_ptr=f16, bt_ptr=i32,
         seq_lens_ptr=i32, qsl_ptr=i32, tiles_ptr=i32, scale="fp32", stride_qt="i32", stride_qh="i32", stride_ot="i32",
         stride_oh="i32", stride_bt="i32"), dict(G=3, HKV=3, D=64, BLOCK_SIZE=16, BLOCK_M=bm, BLOCK_N=bn, IEEE=False), num_warps=nw)
for bn, nw, ns in ((64, 4, 1), (64, 8, 1), (32, 4, 1), (16, 4, 1)):
    for one, step in ((True, 0), (False, 1)):
        comp(f"decode H9/3 one_part={one} N{bn} w{nw} s{ns}", ta._decode_kernel, dec,
             dict(G=3, G_PAD=16, G2=4, HKV=3, D=64, BLOCK_SIZE=16, BLOCK_N=bn, PARTS=16, ONE_PART=one, STEP_PAD=step,
                  IEEE=False, PDL=False), num_warps=nw, num_stages=ns)
