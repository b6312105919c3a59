"""H200 experiments: (1) batch-1 ms/token against num_scheduler_steps and with a Triton argmax (host/sampler costs
outside the graph); (2) a decode kernel whose tile loop is software-pipelined by hand. JSON to $OUT/exp2.json."""
import json, os, sys, time
from pathlib import Path
import torch
ROOT = Path.cwd(); sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_bench as gb
from mini_vllm import SamplingParams, triton_kernels as tk, model_runner as mr
from mini_vllm.triton_kernels import triton, tl, _kv_offsets, _kv_tile, _online_softmax, _merge_partitions

out = Path(os.environ.get("OUT", ".")); res = {}
def save(): (out / "exp2.json").write_text(json.dumps(res, indent=2))
prompt = torch.randint(0, 32000, (128,), generator=torch.Generator().manual_seed(1)).tolist()

@triton.jit
def _argmax_rows(x_ptr, out_ptr, V, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + tl.program_id(0) * V + i, mask=i < V, other=float("-inf"))
    tl.store(out_ptr + tl.program_id(0), tl.argmax(v, 0).to(tl.int64))
orig_sample = mr.sample
def fast_sample(logits, st):
    if not st.all_greedy: return orig_sample(logits, st)
    o = torch.empty(logits.shape[0], dtype=torch.long, device=logits.device)
    _argmax_rows[(logits.shape[0],)](logits, o, logits.shape[1], BLOCK=triton.next_power_of_2(logits.shape[1]), num_warps=16)
    return o

def batch1(steps, label):
    llm = gb._engine(None, max_num_seqs=8, num_scheduler_steps=steps)
    run = lambda n: llm.generate([prompt], SamplingParams(temperature=0, max_tokens=n, ignore_eos=True), use_tqdm=False)
    o = run(64)
    t = {}
    for n in (1, 513):
        torch.cuda.synchronize(); t0 = time.perf_counter(); o = run(n); torch.cuda.synchronize(); t[n] = time.perf_counter() - t0
    res[label] = round((t[513] - t[1]) / 512 * 1e6, 1)
    res[label + "_tokens_head"] = o[0].outputs[0].token_ids[:8]
    print(label, res[label], flush=True); save()
    return llm

for steps in (8, 32, 128):
    llm = batch1(steps, f"steps{steps}_us_per_token"); del llm
mr.sample = fast_sample
llm = batch1(32, "steps32_triton_argmax_us_per_token")
mr.sample = orig_sample

@triton.jit(do_not_specialize=["stride_bt", "num_parts"])
def _decode_pipe(o_ptr, acc_ptr, ml_ptr, count_ptr, q_ptr, k_ptr, v_ptr, bt_ptr, seq_lens_ptr, qsl_ptr, reqs_ptr,
                 scale, stride_qt, stride_qh, stride_ot, stride_oh, stride_bt, num_parts, partition,
                 G: tl.constexpr, G_PAD: tl.constexpr, G2: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr,
                 BLOCK_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, PARTS: tl.constexpr, IEEE: tl.constexpr,
                 PDL: tl.constexpr):
    b, kvh, part = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    req = tl.load(reqs_ptr + b)
    tok = tl.load(qsl_ptr + req)
    seq_len = tl.load(seq_lens_ptr + req)
    start = part * partition
    end = tl.minimum(start + partition, seq_len)
    n = start + tl.arange(0, BLOCK_N)
    off = _kv_offsets(bt_ptr, req, stride_bt, n, n < end, kvh, HKV, D, BLOCK_SIZE)
    off1 = _kv_offsets(bt_ptr, req, stride_bt, n + BLOCK_N, n + BLOCK_N < end, kvh, HKV, D, BLOCK_SIZE)
    k, v = _kv_tile(k_ptr, v_ptr, off, n < tl.minimum(end, seq_len - 1), D)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()
    if start < end:
        g, d = tl.arange(0, G_PAD), tl.arange(0, D)
        q = tl.load(q_ptr + tok * stride_qt + (kvh * G + g)[:, None] * stride_qh + d[None, :], mask=(g < G)[:, None], other=0.0)
        new = n == seq_len - 1
        k_new, v_new = _kv_tile(k_ptr, v_ptr, off, new, D)
        k, v = tl.where(new[:, None], k_new, k), tl.where(new[:, None], v_new, v)
        qk_scale = scale * 1.4426950408889634
        m_i, l_i, acc = tl.full([G_PAD], float("-inf"), tl.float32), tl.zeros([G_PAD], tl.float32), tl.zeros([G_PAD, D], tl.float32)
        for n0 in range(start + BLOCK_N, end, BLOCK_N):
            nn = n0 + tl.arange(0, BLOCK_N)
            kk, vv = _kv_tile(k_ptr, v_ptr, off1, nn < end, D)                 # the next tile's keys: its pages are here
            off1 = _kv_offsets(bt_ptr, req, stride_bt, nn + BLOCK_N, nn + BLOCK_N < end, kvh, HKV, D, BLOCK_SIZE)
            m_i, l_i, acc = _online_softmax(q, k, v, (n < end)[None, :], m_i, l_i, acc, qk_scale, IEEE)
            k, v, n = kk, vv, nn
        m_i, l_i, acc = _online_softmax(q, k, v, (n < end)[None, :], m_i, l_i, acc, qk_scale, IEEE)
        live = tl.cdiv(seq_len, partition)
        if live == 1:
            o, h = acc / l_i[:, None], kvh * G + g
            tl.store(o_ptr + tok * stride_ot + h[:, None] * stride_oh + d[None, :], o.to(o_ptr.dtype.element_ty), mask=(g < G)[:, None])
        else:
            row0 = (b * HKV + kvh) * num_parts * G_PAD
            row = row0 + part * G_PAD + g
            tl.store(acc_ptr + row[:, None] * D + d[None, :], acc)
            tl.store(ml_ptr + row * 2, m_i); tl.store(ml_ptr + row * 2 + 1, l_i)
            tl.debug_barrier()
            done = tl.atomic_add(count_ptr + b * HKV + kvh, 1, sem="acq_rel")
            if done == live - 1:
                tl.atomic_xchg(count_ptr + b * HKV + kvh, 0)
                o = _merge_partitions(acc_ptr, ml_ptr, row0, live, G_PAD, G2, D, PARTS)
                g2 = tl.arange(0, G2)
                h = kvh * G + g2
                tl.store(o_ptr + tok * stride_ot + h[:, None] * stride_oh + d[None, :], o.to(o_ptr.dtype.element_ty), mask=(g2 < G)[:, None])

# correctness of the pipelined kernel against the reference, then the graph sweep
from mini_vllm.paged_attention import PagedKVCache, TorchPagedAttention
orig_kernel = tk._decode_kernel
tk._decode_kernel = _decode_pipe
for B in (1, 3, 256):
    cache, meta, q, k, v, seq, ql = gb._random_step(B, 1, 2048, lambda i: 1)
    ref = TorchPagedAttention(PagedKVCache(cache.k.clone(), cache.v.clone()), meta)(0, q, k, v)
    res[f"pipe_err_B{B}"] = gb.rel_err(tk.TritonPagedAttention(cache, meta)(0, q, k, v), ref)
print({k: v for k, v in res.items() if "err" in k}, flush=True)
r = llm.llm_engine.runner
def ctx(n):
    nb = -(-n // 16)
    r.bt[0].zero_(); r.bt[0, :nb] = torch.arange(1, nb + 1, device="cuda", dtype=torch.int32)
    r.seq_lens[0] = n; r.pos[0] = n - 1; r.slots[0] = r.bt[0, (n - 1) // 16] * 16 + (n - 1) % 16
def t(reps=300): return round(gb.back_to_back_ms(r.graphs[1], reps=reps) * 1e3, 1)
CTX = (1, 128, 384, 640, 1024, 2048)
orig_part, orig_tiling = tk.decode_partition, dict(tk.DECODE_TILING)
for kern in ("pipe", "orig"):
    tk._decode_kernel = _decode_pipe if kern == "pipe" else orig_kernel
    for bn, w, st in ((64, 2, 1), (64, 4, 1), (128, 4, 1), (128, 8, 1), (64, 2, 4)):
        for part in (64, 128, 256, 512, 2048):
            if part < bn or (kern == "orig" and (part > 256 or st != 1)): continue
            key = f"{kern}_bn{bn}_w{w}_s{st}_part{part}"
            try:
                tk.DECODE_TILING.update(block_n=bn, num_warps=w, num_stages=st)
                tk.decode_partition = lambda num_programs, max_seq_len, num_sms, block_n=64, p=part: min(p, max_seq_len)
                r._capture(1)
                res[key] = {n: (ctx(n), t())[1] for n in CTX}
            except Exception as e: res[key] = repr(e)[:300]
            print(key, res[key], flush=True); save()
tk.decode_partition = orig_part; tk.DECODE_TILING.update(orig_tiling); tk._decode_kernel = orig_kernel
