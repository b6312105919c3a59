"""Experiment, not part of the package: one persistent kernel per decoder layer for 1-2 token steps.

The five kernels of chapter 04i become phases of one launch (qkv+RoPE+cache write | attention partitions | merge | o +
residual | gate_up + SwiGLU | down + residual), each phase's work units spread over a grid that fits on the GPU at
once, separated by grid-wide barriers, with the next phase's weights prefetched into L2 before each barrier.
Measured slower than 04i's separate kernels on an H200 (benchmarks/README.md, "persistent kernel"); kept so that the
next attempt starts from working, checked code. On the CPU (TRITON_INTERPRET=1) each phase is its own launch.

    TRITON_INTERPRET=1 python benchmarks/experiments/persistent_check.py      # against 04i's path, tiny fp32 model
    STAGES=test,layers,engine python3 benchmarks/experiments/persistent_bench.py   # on a GPU; writes $OUT/persist.json
"""
import torch

from mini_vllm.small_batch import SmallBatchLlamaModel, _pairs, _rows_dot, _w_chunk
from mini_vllm.triton_kernels import NUM_SMS, tl, triton

ON_GPU = torch.cuda.is_available()


@triton.jit
def _load_acquire(ptr):
    "One int32 read with acquire semantics at GPU scope (what the others wrote before releasing it is visible after)."
    v = tl.inline_asm_elementwise("ld.acquire.gpu.global.b32 $0, [$1];", "=r,l", [ptr + tl.arange(0, 1)],
                                  dtype=tl.int32, is_pure=False, pack=1)
    return tl.max(v, 0)


@triton.jit
def _grid_sync(bar_ptr, target):
    "Wait until the grid's arrival count reaches target (k times the grid size at the k-th barrier of a launch)."
    tl.debug_barrier()                                               # this program's stores are all issued
    tl.atomic_add(bar_ptr, 1, sem="release", scope="gpu")
    while _load_acquire(bar_ptr) < target: pass
    tl.debug_barrier()


@triton.jit
def _grid_done(bar_ptr, nprog):
    "The last program to finish resets the count for the next launch (every other program is past its last wait)."
    tl.debug_barrier()
    if tl.atomic_add(bar_ptr + 1, 1, sem="acq_rel", scope="gpu") == nprog - 1:
        tl.atomic_xchg(bar_ptr, 0, sem="relaxed", scope="gpu")
        tl.atomic_xchg(bar_ptr + 1, 0, sem="relaxed", scope="gpu")


@triton.jit
def _prefetch(ptr, n, LINE: tl.constexpr, PF: tl.constexpr):
    "Ask L2 for n contiguous elements from ptr, one request per 128-byte line; nothing waits for them."
    if PF:
        CHUNK: tl.constexpr = 256 * LINE
        for i in range(0, n, CHUNK):
            off = tl.minimum(i + tl.arange(0, 256) * LINE, n - 1)
            tl.inline_asm_elementwise("prefetch.global.L2 [$1];", "=r,l", [ptr + off], dtype=tl.int32,
                                      is_pure=False, pack=1)


@triton.jit
def _stamp(times_ptr, i, pid, TIMED: tl.constexpr):
    "Program 0 records the SM clock and the global timer (ns) at point i."
    if TIMED:
        z = tl.zeros([1], tl.int32)
        c = tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,r", [z], dtype=tl.int64, is_pure=False, pack=1)
        g = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [z], dtype=tl.int64, is_pure=False, pack=1)
        o = tl.arange(0, 1)
        tl.store(times_ptr + 2 * i + o, c, mask=(o == 0) & (pid == 0))
        tl.store(times_ptr + 2 * i + 1 + o, g, mask=(o == 0) & (pid == 0))


# ---- the work units: each is one program of one of the five kernels of 04i --------------------------------------
@triton.jit
def _qkv_unit(u, x_ptr, w_ptr, b_ptr, nw_ptr, qkv_ptr, cos_ptr, sin_ptr, pos_ptr, slot_ptr, kc_ptr, vc_ptr,
              M, K, stride_x, stride_qkv, stride_cos, eps, H: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr,
              HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, M_PAD: tl.constexpr, BLOCK_H: tl.constexpr,
              BLOCK_K: tl.constexpr):
    HALF: tl.constexpr = D // 2
    head = u // (HALF // BLOCK_H)
    j0 = (u % (HALF // BLOCK_H)) * BLOCK_H
    j = j0 + tl.arange(0, BLOCK_H)
    n, _ = _pairs(head * D + j0, BLOCK_H, HALF)
    m = tl.arange(0, M_PAD)
    mm = m < M
    pos = tl.load(pos_ptr + m, mask=mm, other=0)
    c = tl.load(cos_ptr + pos[:, None] * stride_cos + j[None, :])
    s = tl.load(sin_ptr + pos[:, None] * stride_cos + j[None, :])
    slot = tl.load(slot_ptr + m, mask=mm, other=0).to(tl.int64)
    acc, ss = _rows_dot(x_ptr, w_ptr, _w_chunk(w_ptr, n, n >= 0, 0, K, EVEN_K, BLOCK_K), nw_ptr, n, n >= 0, m, mm, K,
                        stride_x, True, EVEN_K, M_PAD, 2 * BLOCK_H, BLOCK_K)
    y = (acc * tl.rsqrt(ss / K + eps)[:, None]).to(w_ptr.dtype.element_ty)
    if HAS_BIAS: y = y + tl.load(b_ptr + n)[None, :]
    x1, x2 = tl.split(tl.reshape(y.to(tl.float32), [M_PAD, BLOCK_H, 2]))
    if head < H + HKV:
        x1, x2 = x1 * c - x2 * s, x2 * c + x1 * s
    o1, o2 = x1.to(qkv_ptr.dtype.element_ty), x2.to(qkv_ptr.dtype.element_ty)
    dst = qkv_ptr + m[:, None] * stride_qkv + head * D + j[None, :]
    tl.store(dst, o1, mask=mm[:, None]); tl.store(dst + HALF, o2, mask=mm[:, None])
    if head >= H:
        if head < H + HKV: dst = kc_ptr + slot[:, None] * (HKV * D) + (head - H) * D + j[None, :]
        else: dst = vc_ptr + slot[:, None] * (HKV * D) + (head - H - HKV) * D + j[None, :]
        tl.store(dst, o1, mask=mm[:, None]); tl.store(dst + HALF, o2, mask=mm[:, None])


@triton.jit
def _qkv_prefetch(u, n_units, w_ptr, K, D: tl.constexpr, BLOCK_H: tl.constexpr, LINE: tl.constexpr, PF: tl.constexpr):
    if u < n_units:
        HALF: tl.constexpr = D // 2
        row = (u // (HALF // BLOCK_H)) * D + (u % (HALF // BLOCK_H)) * BLOCK_H
        _prefetch(w_ptr + row.to(tl.int64) * K, BLOCK_H * K, LINE, PF)
        _prefetch(w_ptr + (row + HALF).to(tl.int64) * K, BLOCK_H * K, LINE, PF)


@triton.jit
def _gemv_unit(u, x_ptr, w_ptr, b_ptr, nw_ptr, res_ptr, out_ptr, M, N, K, stride_x, stride_res, stride_out, eps,
               NORM: tl.constexpr, SILU_OUT: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr,
               EVEN_K: tl.constexpr, M_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    n = u * BLOCK_N + tl.arange(0, BLOCK_N)
    nm, m = n < N, tl.arange(0, M_PAD)
    mm = m < M
    if SILU_OUT:
        rows, idx = _pairs(u * BLOCK_N, BLOCK_N, N)
        rm = idx < N
        acc, ss = _rows_dot(x_ptr, w_ptr, _w_chunk(w_ptr, rows, rm, 0, K, EVEN_K, BLOCK_K), nw_ptr, rows, rm, m, mm, K,
                            stride_x, NORM, EVEN_K, M_PAD, 2 * BLOCK_N, BLOCK_K)
    else:
        rows, rm = n, nm
        acc, ss = _rows_dot(x_ptr, w_ptr, _w_chunk(w_ptr, rows, rm, 0, K, EVEN_K, BLOCK_K), nw_ptr, rows, rm, m, mm, K,
                            stride_x, NORM, EVEN_K, M_PAD, BLOCK_N, BLOCK_K)
    if NORM: acc = acc * tl.rsqrt(ss / K + eps)[:, None]
    y = acc.to(w_ptr.dtype.element_ty)
    if HAS_BIAS: y = y + tl.load(b_ptr + rows, mask=rm, other=0.0)[None, :]
    if SILU_OUT:
        g, up = tl.split(tl.reshape(y, [M_PAD, BLOCK_N, 2]))
        g = g.to(tl.float32)
        y = (g / (1.0 + tl.exp(-g))).to(up.dtype) * up
    mask = mm[:, None] & nm[None, :]
    if HAS_RES:
        y = tl.load(res_ptr + m[:, None] * stride_res + n[None, :], mask=mask, other=0.0).to(tl.float32) + y.to(tl.float32)
    tl.store(out_ptr + m[:, None] * stride_out + n[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gemv_prefetch(u, N, w_ptr, K, SILU_OUT: tl.constexpr, BLOCK_N: tl.constexpr, LINE: tl.constexpr, PF: tl.constexpr):
    if u * BLOCK_N < N:
        _prefetch(w_ptr + (u * BLOCK_N).to(tl.int64) * K, BLOCK_N * K, LINE, PF)
        if SILU_OUT: _prefetch(w_ptr + (N + u * BLOCK_N).to(tl.int64) * K, BLOCK_N * K, LINE, PF)


@triton.jit
def _attn_unit(b, kvh, part, acc_ptr, ml_ptr, q_ptr, k_ptr, v_ptr, bt_ptr, seq_lens_ptr, scale, stride_qt, stride_bt,
               num_parts, partition, G: tl.constexpr, G_PAD: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr,
               BLOCK_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, IEEE: tl.constexpr):
    "04g's decode partition for request b (its query row b), kv head kvh: partial sums into acc, (max, sum) into ml."
    seq_len = tl.load(seq_lens_ptr + b)
    g, d = tl.arange(0, G_PAD), tl.arange(0, D)
    q = tl.load(q_ptr + b * stride_qt + (kvh * G + g)[:, None] * D + d[None, :], mask=(g < G)[:, None], other=0.0)
    m_i = tl.full([G_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    start = part * partition
    end = tl.minimum(start + partition, seq_len)
    qk_scale = scale * 1.4426950408889634
    for n0 in range(start, end, BLOCK_N):
        n = n0 + tl.arange(0, BLOCK_N)
        nm = n < end
        page = tl.load(bt_ptr + b.to(tl.int64) * stride_bt + n // BLOCK_SIZE, mask=nm, other=0).to(tl.int64)
        off = (page * BLOCK_SIZE + n % BLOCK_SIZE) * HKV * D + kvh * D
        k = tl.load(k_ptr + off[:, None] + d[None, :], mask=nm[:, None], other=0.0)
        v = tl.load(v_ptr + off[:, None] + d[None, :], mask=nm[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee" if IEEE else "tf32") * qk_scale
        s = tl.where(nm[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee" if IEEE else "tf32")
        m_i = m_new
    row = (b * HKV * G_PAD + kvh * G_PAD + g) * num_parts + part
    tl.store(acc_ptr + row[:, None] * D + d[None, :], acc)
    tl.store(ml_ptr + row * 2, m_i); tl.store(ml_ptr + row * 2 + 1, l_i)


@triton.jit
def _merge_unit(b, h, o_ptr, acc_ptr, ml_ptr, stride_ot, num_parts, G: tl.constexpr, G_PAD: tl.constexpr,
                HKV: tl.constexpr, D: tl.constexpr, PARTS_PAD: tl.constexpr):
    kvh, g = h // G, h % G
    p, d = tl.arange(0, PARTS_PAD), tl.arange(0, D)
    pm = p < num_parts
    row = (b * HKV * G_PAD + kvh * G_PAD + g) * num_parts + p
    m = tl.load(ml_ptr + row * 2, mask=pm, other=float("-inf"))
    l = tl.load(ml_ptr + row * 2 + 1, mask=pm, other=0.0)
    w = tl.where(pm & (l > 0), tl.exp2(m - tl.max(m, 0)), 0.0)
    acc = tl.load(acc_ptr + row[:, None] * D + d[None, :], mask=pm[:, None], other=0.0)
    o = tl.sum(acc * w[:, None], 0) / tl.sum(l * w, 0)
    tl.store(o_ptr + b * stride_ot + h * D + d, o.to(o_ptr.dtype.element_ty))


# ---- the layer --------------------------------------------------------------------------------------------------
@triton.jit
def _layer_kernel(h_ptr, ln1_ptr, wqkv_ptr, bqkv_ptr, qkv_ptr, cos_ptr, sin_ptr, pos_ptr, slot_ptr, kc_ptr, vc_ptr,
                  bt_ptr, seq_lens_ptr, part_acc_ptr, part_ml_ptr, attn_ptr, wo_ptr, bo_ptr, ln2_ptr, wgu_ptr, bgu_ptr,
                  act_ptr, wd_ptr, bd_ptr, bar_ptr, times_ptr, M, C, I, eps, scale, stride_cos, stride_bt, num_parts, partition,
                  H: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, G_PAD: tl.constexpr, PARTS_PAD: tl.constexpr,
                  BLOCK_SIZE: tl.constexpr, ATT_BLOCK_N: tl.constexpr, IEEE: tl.constexpr,
                  HAS_QKV_BIAS: tl.constexpr, HAS_O_BIAS: tl.constexpr, HAS_MLP_BIAS: tl.constexpr,
                  M_PAD: tl.constexpr, BH: tl.constexpr, BN: tl.constexpr, BNG: tl.constexpr, BND: tl.constexpr,
                  BK: tl.constexpr, BKD: tl.constexpr, PF: tl.constexpr, DIST: tl.constexpr, LINE: tl.constexpr,
                  EVEN_C: tl.constexpr, EVEN_I: tl.constexpr, FIRST: tl.constexpr, LAST: tl.constexpr, SYNC: tl.constexpr, TIMED: tl.constexpr):
    pid, nprog = tl.program_id(0), tl.num_programs(0)
    G: tl.constexpr = H // HKV
    NQKV: tl.constexpr = (H + 2 * HKV) * D
    n_qkv = NQKV // (2 * BH)
    _stamp(times_ptr, 0, pid, TIMED)
    if FIRST <= 0 and 0 <= LAST:                 # 1: norm, q k v, RoPE, cache write
        for i in range(DIST): _qkv_prefetch(pid + i * nprog, n_qkv, wqkv_ptr, C, D, BH, LINE, PF)
        for u in range(pid, n_qkv, nprog):
            _qkv_prefetch(u + DIST * nprog, n_qkv, wqkv_ptr, C, D, BH, LINE, PF)
            _qkv_unit(u, h_ptr, wqkv_ptr, bqkv_ptr, ln1_ptr, qkv_ptr, cos_ptr, sin_ptr, pos_ptr, slot_ptr, kc_ptr, vc_ptr,
                      M, C, C, NQKV, stride_cos, eps, H, HKV, D, HAS_QKV_BIAS, EVEN_C, M_PAD, BH, BK)
        for i in range(DIST): _gemv_prefetch(pid + i * nprog, C, wo_ptr, H * D, False, BN, LINE, PF)
        _stamp(times_ptr, 1, pid, TIMED)
        if SYNC: _grid_sync(bar_ptr, 1 * nprog)
        _stamp(times_ptr, 2, pid, TIMED)
    if FIRST <= 1 and 1 <= LAST:                 # 2: attention, each program a (request, kv head, partition)
        for u in range(pid, M * HKV * num_parts, nprog):
            _attn_unit(u // (HKV * num_parts), (u // num_parts) % HKV, u % num_parts, part_acc_ptr, part_ml_ptr, qkv_ptr,
                       kc_ptr, vc_ptr, bt_ptr, seq_lens_ptr, scale, NQKV, stride_bt, num_parts, partition, G, G_PAD, HKV, D,
                       BLOCK_SIZE, ATT_BLOCK_N, IEEE)
        _stamp(times_ptr, 3, pid, TIMED)
        if SYNC: _grid_sync(bar_ptr, 2 * nprog)
        _stamp(times_ptr, 4, pid, TIMED)
    if FIRST <= 2 and 2 <= LAST:                 # 3: merge the partitions
        for u in range(pid, M * H, nprog):
            _merge_unit(u // H, u % H, attn_ptr, part_acc_ptr, part_ml_ptr, H * D, num_parts, G, G_PAD, HKV, D, PARTS_PAD)
        _stamp(times_ptr, 5, pid, TIMED)
        if SYNC: _grid_sync(bar_ptr, 3 * nprog)
        _stamp(times_ptr, 6, pid, TIMED)
    if FIRST <= 3 and 3 <= LAST:                 # 4: h += o_proj(attention)
        n_o = tl.cdiv(C, BN)
        for u in range(pid, n_o, nprog):
            _gemv_prefetch(u + DIST * nprog, C, wo_ptr, H * D, False, BN, LINE, PF)
            _gemv_unit(u, attn_ptr, wo_ptr, bo_ptr, ln2_ptr, h_ptr, h_ptr, M, C, H * D, H * D, C, C, eps,
                       False, False, HAS_O_BIAS, True, (H * D) % BK == 0, M_PAD, BN, BK)
        for i in range(DIST): _gemv_prefetch(pid + i * nprog, I, wgu_ptr, C, True, BNG, LINE, PF)
        _stamp(times_ptr, 7, pid, TIMED)
        if SYNC: _grid_sync(bar_ptr, 4 * nprog)
        _stamp(times_ptr, 8, pid, TIMED)
    if FIRST <= 4 and 4 <= LAST:                 # 5: act = silu(gate) * up of norm(h)
        n_g = tl.cdiv(I, BNG)
        for u in range(pid, n_g, nprog):
            _gemv_prefetch(u + DIST * nprog, I, wgu_ptr, C, True, BNG, LINE, PF)
            _gemv_unit(u, h_ptr, wgu_ptr, bgu_ptr, ln2_ptr, act_ptr, act_ptr, M, I, C, C, I, I, eps,
                       True, True, HAS_MLP_BIAS, False, EVEN_C, M_PAD, BNG, BK)
        for i in range(DIST): _gemv_prefetch(pid + i * nprog, C, wd_ptr, I, False, BND, LINE, PF)
        _stamp(times_ptr, 9, pid, TIMED)
        if SYNC: _grid_sync(bar_ptr, 5 * nprog)
        _stamp(times_ptr, 10, pid, TIMED)
    if FIRST <= 5 and 5 <= LAST:                 # 6: h += down(act)
        n_d = tl.cdiv(C, BND)
        for u in range(pid, n_d, nprog):
            _gemv_prefetch(u + DIST * nprog, C, wd_ptr, I, False, BND, LINE, PF)
            _gemv_unit(u, act_ptr, wd_ptr, bd_ptr, ln2_ptr, h_ptr, h_ptr, M, C, I, I, C, C, eps,
                       False, False, HAS_MLP_BIAS, True, EVEN_I, M_PAD, BND, BKD)
        _stamp(times_ptr, 11, pid, TIMED)
    if SYNC: _grid_done(bar_ptr, nprog)


LAYER_TILING = dict(programs_per_sm=1, bh=2, bn=4, bng=2, bnd=4, bk=2048, bkd=512, num_warps=8, pf=True, dist=2,
                    att_block_n=64, partition=64)


class PersistentLayers:
    "Buffers and launch of the per-layer persistent kernel for a Llama model (dev)."
    def __init__(self, model, max_m=2, **tiling):
        self.t = {**LAYER_TILING, **tiling}
        dev = model.embed_tokens.weight.device if hasattr(model, "embed_tokens") else model.model.embed_tokens.weight.device
        self.bar = torch.zeros(2, dtype=torch.int32, device=dev)
        self.times = torch.zeros(len(model.layers if hasattr(model, "layers") else model.model.layers), 12, 2,
                                 dtype=torch.int64, device=dev)

    def forward(self, model, h, positions, attn, max_seq_len):
        return self.forward_model(model.model, h, positions, attn, max_seq_len)

    def forward_model(self, m, h, positions, attn, max_seq_len):
        t = self.t
        M, C = h.shape
        a0 = m.layers[0].self_attn
        H, HKV, D = a0.nh, a0.nkv, a0.hd
        I = m.layers[0].mlp.down_proj.weight.shape[1]
        dt, dev = h.dtype, h.device
        partition = t["partition"]
        num_parts = triton.cdiv(max_seq_len, partition)
        G_PAD = max(16, triton.next_power_of_2(H // HKV))
        qkv = torch.empty(M, (H + 2 * HKV) * D, dtype=dt, device=dev)
        att = torch.empty(M, H * D, dtype=dt, device=dev)
        act = torch.empty(M, I, dtype=dt, device=dev)
        pacc = torch.empty(M * HKV * G_PAD * num_parts, D, dtype=torch.float32, device=dev)
        pml = torch.empty(M * HKV * G_PAD * num_parts, 2, dtype=torch.float32, device=dev)
        meta, cache = attn.meta, attn.cache
        nprog = (NUM_SMS * t["programs_per_sm"]) if ON_GPU else 3
        line = 128 // h.element_size()
        for layer in m.layers:
            a, mlp = layer.self_attn, layer.mlp
            args = [h, layer.input_layernorm.weight, a.qkv_proj.weight, a.qkv_proj.bias if a.qkv_proj.bias is not None else h,
                    qkv, m.rope_cos, m.rope_sin, positions, meta.slot_mapping, cache.k[a.layer], cache.v[a.layer],
                    meta.block_tables, meta.seq_lens, pacc, pml, att, a.o_proj.weight,
                    a.o_proj.bias if a.o_proj.bias is not None else h, layer.post_attention_layernorm.weight,
                    mlp.gate_up_proj.weight, mlp.gate_up_proj.bias if mlp.gate_up_proj.bias is not None else h, act,
                    mlp.down_proj.weight, mlp.down_proj.bias if mlp.down_proj.bias is not None else h, self.bar, self.times[a.layer],
                    M, C, I, layer.input_layernorm.eps, D ** -0.5, m.rope_cos.stride(0), meta.block_tables.stride(0),
                    num_parts, partition]
            kw = dict(H=H, HKV=HKV, D=D, G_PAD=G_PAD, PARTS_PAD=max(2, triton.next_power_of_2(num_parts)),
                      BLOCK_SIZE=cache.k.shape[2], ATT_BLOCK_N=t["att_block_n"], IEEE=dt == torch.float32,
                      HAS_QKV_BIAS=a.qkv_proj.bias is not None, HAS_O_BIAS=a.o_proj.bias is not None,
                      HAS_MLP_BIAS=mlp.down_proj.bias is not None, M_PAD=triton.next_power_of_2(M),
                      BH=min(t["bh"], D // 2), BN=t["bn"], BNG=t["bng"], BND=t["bnd"],
                      BK=min(t["bk"], triton.next_power_of_2(C)), BKD=min(t["bkd"], triton.next_power_of_2(I)),
                      EVEN_C=C % min(t["bk"], triton.next_power_of_2(C)) == 0,
                      EVEN_I=I % min(t["bkd"], triton.next_power_of_2(I)) == 0, PF=t["pf"] and ON_GPU, DIST=t["dist"], LINE=line, TIMED=t.get("timed", False) and ON_GPU, num_warps=t["num_warps"], num_stages=1)
            if ON_GPU:
                launch_layer(args, kw, nprog, t.get("last", 5), t.get("sync", True))
            else:                                                   # interpreted: programs run one after another
                for ph in range(6): _layer_kernel[(nprog,)](*args, FIRST=ph, LAST=ph, SYNC=False, **kw)
        return h


def _occupancy(compiled, num_warps):
    "Programs of this kernel that fit on one SM at once (registers and shared memory)."
    regs = max(1, compiled.n_regs) * 32 * num_warps
    smem = compiled.metadata.shared
    fit = 65536 // (((regs + 255) // 256) * 256)
    if smem: fit = min(fit, (228 * 1024) // (smem + 1024))
    return max(0, min(fit, 2048 // (32 * num_warps)))


_OCC = {}

def launch_layer(args, kw, nprog_wanted, last=5, sync=True):
    key = tuple(sorted(kw.items()))
    if key not in _OCC:
        c = _layer_kernel.warmup(*args, grid=(1,), FIRST=0, LAST=5, SYNC=True, **kw)
        c._init_handles()                                          # loads the module: registers are known from here
        _OCC[key] = _occupancy(c, kw["num_warps"])
        print(f"    layer kernel: {c.n_regs} regs, {c.n_spills} spills, {c.metadata.shared} B smem, {_OCC[key]} per SM", flush=True)
    assert _OCC[key] >= 1
    nprog = min(nprog_wanted, NUM_SMS * _OCC[key])
    _layer_kernel[(nprog,)](*args, FIRST=0, LAST=5, SYNC=True, **kw)


class PersistentLlamaModel(SmallBatchLlamaModel):
    "SmallBatchLlamaModel whose 1-2 token steps run one persistent kernel per layer."
    tiling = {}
    def forward(self, input_ids, positions, attn):
        import mini_vllm.small_batch as sb
        if input_ids.shape[0] > sb.GEMV_MAX_M: return super().forward(input_ids, positions, attn)
        if not hasattr(self, "_pl"): self._pl = PersistentLayers(self, **self.tiling)
        h = self.embed_tokens(input_ids)
        self._pl.forward_model(self, h, positions, attn, attn.max_seq_len)
        return self.norm(h)
