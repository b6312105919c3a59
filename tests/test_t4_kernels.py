"""The book's Triton kernels compiled for a T4 (sm_75: Turing, fp16, no bf16) on this CPU, without a GPU.

On a T4 the engine runs in fp16; `attention_backend="auto"` gives it PyTorch's kernels (chapter 04e2: the reason is
this file's report), and `attention_backend="triton"` the Triton kernels (04g, 04g1, 04h, 04i, and 05b's for a
quantized model), tuned on an H200. Nothing here runs a kernel: each launch the book's own launch
functions make, for the shapes of the default model (SmolLM2-135M) and of a model with 128-wide heads (Qwen3-0.6B),
is compiled with `triton.compile` for `GPUTarget("cuda", 75, 32)` (ptxas ships in the triton wheel), and ptxas's
report of it is read: registers a thread, bytes spilled to local memory, shared memory, and whether its matrix
products (tl.dot) became tensor-core instructions (mma.sync).

    python tests/test_t4_kernels.py          the table (about 40 kernels; under a minute on an idle core, less
                                             once triton's cache holds them)
    python tests/test_t4_kernels.py --full   three models and every row count (about 100 kernels, minutes)
    pytest tests/test_t4_kernels.py -s       the same as the first, checked

Fails if a kernel does not compile for sm_75 or asks for more shared memory than a T4 block may have (64 KiB: it
could not launch there). Register spills are reported, not failed: the attention and quantized-product kernels
spill today (see SPILL_LIMIT); MINI_VLLM_T4_SPILL_LIMIT=<bytes> makes spills above that many bytes fail.
"""
import json, os, re, subprocess, sys, tempfile, time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
T4 = ("cuda", 75, 32)                 # compute capability 7.5, 32 threads a warp
T4_SMS = 40                           # streaming multiprocessors of a T4: the launch functions size grids by them
T4_SHARED = 64 * 1024                 # the most shared memory one block may use on sm_75 (opt-in)
# Spills: stores and loads of registers to local memory (cached global memory). A few bytes in a loop-free epilogue
# cost nothing measurable; spills inside a kernel's main loop cost a round trip to memory each iteration. The
# threshold that would be justified is 0 bytes for the kernels of a decode step's loop (attention, GEMV): they are
# memory-bound, and each spilled byte is extra traffic. But today, on sm_75 with triton 3.9, the attention kernels
# (_decode_kernel, _items_kernel, _prefill_kernel) and the quantized product (_qmm_kernel) all spill (and one GEMV
# tiling, a few bytes; another, of TinyLlama's shapes, 672 bytes: see --full): tl.dot is
# lowered to FMA instructions there, with fp32 operands in registers, not to mma.sync (sm_80 gets mma.sync), and
# the tiles tuned on an H200 do not fit 255 registers. So spills are reported only, unless
# MINI_VLLM_T4_SPILL_LIMIT sets a limit in bytes (0 once those kernels have T4 tilings).
SPILL_LIMIT = int(os.environ["MINI_VLLM_T4_SPILL_LIMIT"]) if os.environ.get("MINI_VLLM_T4_SPILL_LIMIT") else None

# name, hidden size, heads, KV heads, head dim, MLP width, vocabulary, per-head q/k norms (Qwen3)
MODELS = [("SmolLM2-135M", 576, 9, 3, 64, 1536, 49152, False),
          ("TinyLlama-1.1B", 2048, 32, 4, 64, 5632, 32000, False),
          ("Qwen3-0.6B", 1024, 16, 8, 128, 3072, 151936, True)]


# ----------------------------------------------------------------------------------------------------------------
# The probe: runs in a process of its own, where triton compiles (TRITON_INTERPRET=0) instead of interpreting.

def _ptxas_report(ptx: str) -> dict:
    "ptxas -v on the kernel's PTX for sm_75, with the flags triton compiles it with: registers and spills."
    from triton.backends.nvidia.compiler import get_ptxas
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.ptx"
        src.write_text(ptx)
        r = subprocess.run([get_ptxas(75).path, "-lineinfo", "-v", "--regAllocOptLevel=2", "--gpu-name=sm_75",
                            str(src), "-o", str(Path(d) / "k.o")], capture_output=True, text=True, check=True)
    log = r.stderr + r.stdout
    num = lambda pat: sum(int(x) for x in re.findall(pat, log))
    return dict(regs=num(r"Used (\d+) registers"), spill_stores=num(r"(\d+) bytes spill stores"),
                spill_loads=num(r"(\d+) bytes spill loads"), stack=num(r"(\d+) bytes stack frame"))


def probe(full: bool = False) -> list[dict]:
    """Every launch of the calls below compiled for a T4; one record per distinct compiled kernel. `full`: three
    models and every row count of the GEMV and of the quantized product (about 100 kernels, minutes), else the
    default model (SmolLM2) and a head size of 128 (Qwen3), fewer row counts (about 40)."""
    os.environ["TRITON_INTERPRET"] = "0"                    # before triton is imported, so that @jit compiles
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # triton's default, said out loud (no warning)
    import torch
    import mini_vllm.fast.triton_kernels as tk
    import mini_vllm.fast.triton_attention as ta
    import mini_vllm.fast.small_batch as sb
    import mini_vllm.fast.cuda_graphs as cg
    import mini_vllm.quant.quant_kernels as qk
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import JITFunction, create_function_from_signature
    assert not tk.INTERPRETED

    target = GPUTarget(*T4)
    backend = make_backend(target)
    for m in (tk, ta, qk):                                   # grids sized for a T4's 40 SMs, not a CPU's 4
        m.num_sms = lambda: T4_SMS
    seen, records, label = set(), [], [""]

    def compile_for_t4(self: JITFunction, *args, grid, warmup, **kwargs):
        """In place of a launch: bind the arguments as triton does, compile for sm_75, keep ptxas's report."""
        kwargs.setdefault("debug", False)
        binder = create_function_from_signature(self.signature, self.params, backend)
        bound, spec, options = binder(*args, **kwargs)
        options, signature, constexprs, attrs = self._pack_args(backend, kwargs, bound, spec, options)
        key = (self.fn.__name__, str(signature), str(constexprs), str(attrs), str(options))
        if key in seen: return None
        seen.add(key)
        t0 = time.time()
        k = triton.compile(ASTSource(self, signature, constexprs, attrs), target=target,
                           options=options.__dict__)
        names = [p.name for p in self.params]
        shown = {names[p[0]]: v for p, v in constexprs.items() if names[p[0]].isupper()}  # the tiling
        dots = k.asm["ttir"].count("tt.dot ")                # matrix products, and tensor-core instructions
        records.append(dict(kernel=self.fn.__name__, call=label[0], warps=k.metadata.num_warps,
                            stages=k.metadata.num_stages, shared=k.metadata.shared, dots=dots,
                            mma=k.asm["ptx"].count("mma.sync"),
                            seconds=round(time.time() - t0, 2), consts=shown, **_ptxas_report(k.asm["ptx"])))
        return None

    JITFunction.run = compile_for_t4
    dev, f16, i32, i64 = "cpu", torch.float16, torch.int32, torch.int64
    e = lambda *s, dt=f16: torch.empty(*s, dtype=dt, device=dev)
    BS, ctx = 16, 2048                                       # tokens a KV block; the longest context
    models = MODELS if full else [MODELS[0], MODELS[2]]
    for name, hid, H, HKV, D, inter, vocab, qk_norm in models:
        blocks, qkv_n = 64 * ctx // BS, (H + 2 * HKV) * D
        kc, vc = e(blocks, BS, HKV, D), e(blocks, BS, HKV, D)
        label[0] = f"{name}"                                 # 04g: the layer's small kernels
        x = e(8, hid)
        tk.rms_norm(x, e(hid), 1e-6)
        tk.rms_norm(x, e(hid), 1e-6, residual=e(8, hid))
        tk.silu_and_mul(e(8, 2 * inter))
        qn = dict(q_norm=e(D), k_norm=e(D)) if qk_norm else {}
        tk.rope_and_write_kv(e(8, qkv_n), e(8, D), e(8, D), torch.zeros(8, dtype=i64), kc, vc,
                             H, HKV, D, **qn)
        for B in (4, 64):                                    # 04g1: decode, few requests and many (items)
            label[0] = f"{name} decode B={B}"
            bt = torch.zeros(B, ctx // BS, dtype=i32)
            sl, qsl = torch.full((B,), ctx, dtype=i32), torch.arange(B + 1, dtype=i32)
            reqs, q = torch.arange(B, dtype=i32), e(B, H, D)
            for pdl in (False, True) if full or not qk_norm else (False,):   # True: 04i's, with new slots
                ta.paged_decode_attention(e(B, H, D), q, kc, vc, bt, sl, qsl, reqs, D ** -0.5, ctx,
                                          pdl=pdl, new_slots=torch.zeros(B, dtype=i64) if pdl else None)
            items = ta.build_items(sl, reqs, ctx)
            ta.items_decode_attention(e(B, H, D), q, kc, vc, bt, qsl, *items, D ** -0.5)
        label[0] = f"{name} prefill"
        T = 512
        ta.paged_prefill_attention(e(T, H, D), e(T, H, D), kc, vc, torch.zeros(1, ctx // BS, dtype=i32),
                                   torch.tensor([T], dtype=i32), torch.tensor([0, T], dtype=i32),
                                   torch.zeros(T // ta.BLOCK_M, 2, dtype=i32), D ** -0.5,
                                   block_m=ta.BLOCK_M, block_n=ta.BLOCK_N)
        for M in (1, 2, 4, 8) if full else (1, 8):           # 04i: the fused small-batch layer, the logits
            label[0] = f"{name} gemv M={M}"
            h = e(M, hid)
            if qk_norm: sb.gemv(h, e(qkv_n, hid), norm_weight=e(hid), pdl=True)
            else:
                sb.qkv_rope_write(h, e(hid), 1e-6, e(qkv_n, hid), None, e(ctx, D), e(ctx, D),
                                  torch.zeros(M, dtype=i64), torch.zeros(M, dtype=i64), kc, vc, H, HKV, D,
                                  pdl=True)
            sb.gemv(e(M, H * D), e(hid, H * D), residual=h, out=h, pdl=True)
            g = sb.gemv(h, e(2 * inter, hid), silu_out=True, norm_weight=e(hid), pdl=True)
            sb.gemv(g, e(hid, inter), residual=h, out=h, pdl=True)
            sb.gemv(h, e(vocab, hid), out_dtype=torch.float32, pdl=True)
            for bits, group in ((8, None), (4, 128)):        # 05: int8 and int4 weights in the GEMV
                w = e(2 * inter, hid if bits == 8 else hid // 2, dt=torch.int8 if bits == 8 else torch.uint8)
                s = e(2 * inter) if bits == 8 else e(2 * inter, hid // group)
                sb.gemv(h, w, silu_out=True, norm_weight=e(hid), scales=s, group_size=group, pdl=True)
        label[0] = f"{name} sampling"
        cg.greedy_tokens(e(8, vocab, dt=torch.float32))
        if not full and qk_norm: continue                    # 05b's products: the default model's, quickly
        for M in (16, 256, 1024) if full else (16,):         # 05b: quantized products of more rows
            label[0] = f"{name} qmm M={M}"
            for bits, group in ((8, None), (4, 128)) if full or M == 16 else ((8, None),):
                w = e(inter, hid if bits == 8 else hid // 2, dt=torch.int8 if bits == 8 else torch.uint8)
                s = e(inter) if bits == 8 else e(inter, hid // group)
                qk.qmm(e(M, hid), w, s, group_size=group)
        label[0] = f"{name} rebuild"
        qk.rebuild(e(inter, hid, dt=torch.int8), e(inter), dtype=f16)
    label[0] = "CUDA graphs"
    n, bt = 64, torch.zeros(64, ctx // BS, dtype=i32)
    cg._advance_kernel[(1,)](torch.zeros(n, dtype=i64), torch.zeros(n, dtype=i64), torch.zeros(n, dtype=i64),
                             torch.zeros(n, dtype=i64), torch.zeros(n, dtype=i32), bt, n, bt.stride(0),
                             BLOCK_SIZE=BS, BLOCK=triton.next_power_of_2(n))
    return records


def table(records: list[dict]) -> str:
    rows = [f"{'kernel':21} {'call':24} {'warps':>5} {'stages':>6} {'regs':>4} {'spilled st/ld':>13} "
            f"{'shared':>6} {'dot/mma':>7} {'s':>5}  constexprs"]
    for r in records:
        consts = ", ".join(f"{k}={v}" for k, v in r["consts"].items())
        rows.append(f"{r['kernel']:21} {r['call']:24} {r['warps']:5} {r['stages']:6} {r['regs']:4} "
                    f"{r['spill_stores']:6}/{r['spill_loads']:<6} {r['shared']:6} {r['dots']:3}/{r['mma']:<3} "
                    f"{r['seconds']:5}  {consts[:80]}")
    spill = [r for r in records if r["spill_stores"] or r["spill_loads"]]
    worst = max(records, key=lambda r: r["spill_loads"] + r["spill_stores"])
    fma = sum(r["dots"] > 0 and r["mma"] == 0 for r in records)
    rows.append(f"{len(records)} kernels compiled for sm_75: {len(spill)} spill registers (the most: "
                f"{worst['kernel']}, {worst['call']}: {worst['spill_stores']} bytes stored, "
                f"{worst['spill_loads']} loaded); {fma} of the {sum(r['dots'] > 0 for r in records)} with "
                f"matrix products (tl.dot) use no tensor-core instruction (mma.sync) on sm_75")
    return "\n".join(rows)


# ----------------------------------------------------------------------------------------------------------------

def _run_probe() -> list[dict]:
    env = {**os.environ, "TRITON_INTERPRET": "0", "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, __file__, "--json"], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=600)
    if r.returncode:
        pytest.fail(f"compiling for sm_75 failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_kernels_compile_for_a_t4():
    pytest.importorskip("triton")
    from triton.backends.nvidia.compiler import get_ptxas
    if not Path(get_ptxas(75).path).is_file(): pytest.skip("no ptxas in this triton wheel")
    recs = _run_probe()
    print("\n" + table(recs))
    kernels = {r["kernel"] for r in recs}
    for k in ("_rms_norm_kernel", "_silu_and_mul_kernel", "_rope_write_kernel", "_decode_kernel", "_items_kernel",
              "_prefill_kernel", "_gemv_kernel", "_qkv_rope_kernel", "_argmax_kernel", "_qmm_kernel"):
        assert k in kernels, f"{k} was not compiled: is it still launched by the calls of probe()?"
    too_big = [f"{r['kernel']} ({r['call']}): {r['shared']} bytes" for r in recs if r["shared"] > T4_SHARED]
    assert not too_big, f"more shared memory than a T4 block has ({T4_SHARED} bytes): {too_big}"
    spills = [f"{r['kernel']} ({r['call']}): {r['spill_stores']} B stored, {r['spill_loads']} B loaded"
              for r in recs if max(r["spill_stores"], r["spill_loads"]) > (SPILL_LIMIT or 0)]
    print(f"register spills on sm_75: {len(spills)} kernels" + "".join(f"\n  {s}" for s in spills))
    if SPILL_LIMIT is not None: assert not spills, f"register spills on sm_75 above {SPILL_LIMIT} bytes: {spills}"


if __name__ == "__main__":
    recs = probe(full="--full" in sys.argv or os.environ.get("T4_KERNELS") == "full")
    print(json.dumps(recs) if "--json" in sys.argv else table(recs))
