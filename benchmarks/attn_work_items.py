"""Decode attention for a full batch of uneven contexts as a list of work items (an experiment beside chapter 04g1's
kernel). A context is cut into pieces of at most `chunk` tokens, all of a context's pieces the same length; each
(piece, kv head) is one unit of work. Units are handed out either one per program (a grid of exactly the units: no
program without work, unlike a grid of fixed partitions) or by a persistent grid whose programs take units in turn.
A context of one piece writes its output; the pieces of a longer one write their partial results and the last to
finish merges them (04g1's counters and merge). Items built on the host (longest context first) measure what balance
could buy; items built on the device by one small kernel (`build_items`, in request order, the largest pieces first
or the longest contexts first, the count read on the device) are what an engine's CUDA graph could replay: read by a
grid of the room the items could fill (one program per possible unit, those past the count exit at once) or by a
persistent grid, units taken every n-th or from a shared counter. The building kernel is timed alone. Compiled for
sm_90 on a CPU (triton 3.9), the items kernel takes 190 registers a thread at 2 warps (04g1's whole-context kernel
168), so a multiprocessor holds 5 of its programs (04g1's: 6); merging 8 pieces at a time instead of 4 took it to 244.

Same contexts as `attn_length_mix.py` (256 requests, the public workload's midway lengths, mean ~830 tokens, and
equal ones), TinyLlama's heads, bf16, pages in shuffled order, each call replayed inside a CUDA graph. From the repo
root, on a CUDA GPU:
  python3 benchmarks/attn_work_items.py --out $OUT/items [--chunks 512,1024,2048] [--programs 0,660]
With TRITON_INTERPRET=1 on a CPU, `--check` compares the kernel with chapter 04g1's on small random contexts.
"""
import argparse, json, os, sys
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent)); sys.path.insert(0, str(HERE))
import torch
from mini_vllm import triton_attention as ta
from mini_vllm.triton_attention import _attend_tiles, _merge_partitions, _store_heads
from mini_vllm.triton_kernels import tl, triton


@triton.jit
def _unit(u, o_ptr, acc_ptr, ml_ptr, count_ptr, q_ptr, k_ptr, v_ptr, bt_ptr, qsl_ptr, items_ptr, qk_scale, stride_qt,
          stride_qh, stride_ot, stride_oh, stride_bt, G: tl.constexpr, G_PAD: tl.constexpr, G2: tl.constexpr,
          HKV: tl.constexpr, D: tl.constexpr, BLOCK_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, PARTS: tl.constexpr,
          IEEE: tl.constexpr):
    "One unit of work: (item, kv head), kv heads side by side."
    g, d = tl.arange(0, G_PAD), tl.arange(0, D)
    item, kvh = u // HKV, u % HKV
    req = tl.load(items_ptr + item * 5)
    start = tl.load(items_ptr + item * 5 + 1)
    end = tl.load(items_ptr + item * 5 + 2)
    piece = tl.load(items_ptr + item * 5 + 3)                       # which of the context's pieces
    pieces = tl.load(items_ptr + item * 5 + 4)
    tok = tl.load(qsl_ptr + req)
    q = tl.load(q_ptr + tok * stride_qt + (kvh * G + g)[:, None] * stride_qh + d[None, :], mask=(g < G)[:, None],
                other=0.0)
    m_i, l_i, acc = (tl.full([G_PAD], float("-inf"), tl.float32), tl.zeros([G_PAD], tl.float32),
                     tl.zeros([G_PAD, D], tl.float32))
    m_i, l_i, acc = _attend_tiles(q, m_i, l_i, acc, k_ptr, v_ptr, bt_ptr, req, stride_bt, start, end, kvh,
                                  qk_scale, HKV, D, BLOCK_SIZE, BLOCK_N, IEEE)
    if pieces == 1:
        _store_heads(o_ptr, acc / l_i[:, None], tok, kvh, g, stride_ot, stride_oh, G, D)
    else:                                                           # the context's rows: (first item, kv head) on
        row0 = ((item - piece) * HKV + kvh * pieces) * G_PAD        # from the first piece's units, pieces in order
        row = row0 + piece * G_PAD + g
        gm = g < G                                                  # the merge reads the G2 rows of real heads
        tl.store(acc_ptr + row[:, None] * D + d[None, :], acc, mask=gm[:, None])
        tl.store(ml_ptr + row * 2, m_i, mask=gm)
        tl.store(ml_ptr + row * 2 + 1, l_i, mask=gm)
        tl.debug_barrier()
        done = tl.atomic_add(count_ptr + req * HKV + kvh, 1, sem="acq_rel")
        if done == pieces - 1:
            tl.store(count_ptr + req * HKV + kvh, 0)
            o = _merge_partitions(acc_ptr, ml_ptr, row0, pieces, G_PAD, G2, D, PARTS)
            _store_heads(o_ptr, o, tok, kvh, tl.arange(0, G2), stride_ot, stride_oh, G, D)


@triton.jit(do_not_specialize=["stride_bt", "n_units", "n_progs"])
def _items_kernel(o_ptr, acc_ptr, ml_ptr, count_ptr, steal_ptr, q_ptr, k_ptr, v_ptr, bt_ptr, qsl_ptr, items_ptr,
                  n_items_ptr, n_units, n_progs, scale, stride_qt, stride_qh, stride_ot, stride_oh, stride_bt,
                  G: tl.constexpr, G_PAD: tl.constexpr, G2: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr,
                  BLOCK_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, PARTS: tl.constexpr, ON_DEVICE: tl.constexpr,
                  PERSISTENT: tl.constexpr, STEAL: tl.constexpr, IEEE: tl.constexpr):
    "A program per unit (PERSISTENT false: those past the count exit), or units taken in turn or from a counter."
    qk_scale = scale * 1.4426950408889634
    if ON_DEVICE: n_units = tl.load(n_items_ptr) * HKV             # the items were built on the device this step
    if PERSISTENT:
        if STEAL: u = tl.atomic_add(steal_ptr, 1, sem="relaxed")   # units taken from a shared counter as programs
        else: u = tl.program_id(0)                                  # free up, or every n_progs-th
        while u < n_units:
            _unit(u, o_ptr, acc_ptr, ml_ptr, count_ptr, q_ptr, k_ptr, v_ptr, bt_ptr, qsl_ptr, items_ptr, qk_scale,
                  stride_qt, stride_qh, stride_ot, stride_oh, stride_bt, G, G_PAD, G2, HKV, D, BLOCK_SIZE, BLOCK_N,
                  PARTS, IEEE)
            if STEAL: u = tl.atomic_add(steal_ptr, 1, sem="relaxed")
            else: u += n_progs
        if STEAL:                                                   # the last program out sets both counters back
            if tl.atomic_add(steal_ptr + 1, 1) == n_progs - 1:      # to zero for the next launch
                tl.store(steal_ptr, 0)
                tl.store(steal_ptr + 1, 0)
    else:
        u = tl.program_id(0)
        if u < n_units:
            _unit(u, o_ptr, acc_ptr, ml_ptr, count_ptr, q_ptr, k_ptr, v_ptr, bt_ptr, qsl_ptr, items_ptr, qk_scale,
                  stride_qt, stride_qh, stride_ot, stride_oh, stride_bt, G, G_PAD, G2, HKV, D, BLOCK_SIZE, BLOCK_N,
                  PARTS, IEEE)


def work_items(seq_lens: list[int], chunk: int, block_n: int = 64, longest_first: bool = True) -> list[list[int]]:
    "(request, start, end, piece, pieces) for every piece: a context in ceil(len / chunk) pieces of equal tiles."
    order = sorted(range(len(seq_lens)), key=lambda b: -seq_lens[b]) if longest_first else range(len(seq_lens))
    cdiv, items = lambda a, b: -(-a // b), []
    for b in order:
        L = seq_lens[b]
        size = cdiv(cdiv(L, cdiv(L, chunk)), block_n) * block_n      # equal pieces of whole tiles, at most chunk
        n = cdiv(L, size)
        items += [[b, p * size, min(L, (p + 1) * size), p, n] for p in range(n)]
    return items


@triton.jit
def _pieces(seq_lens_ptr, reqs_ptr, b, B, chunk, BLOCK_N: tl.constexpr):
    "(request, its length, its pieces, their size) for the lanes b: equal pieces of whole tiles, at most chunk."
    bm = b < B
    req = tl.load(reqs_ptr + b, mask=bm, other=0)
    L = tl.load(seq_lens_ptr + req, mask=bm, other=0)
    n = tl.cdiv(L, chunk)                                           # an empty context: no items
    size = tl.maximum(tl.cdiv(tl.cdiv(L, tl.maximum(n, 1)), BLOCK_N) * BLOCK_N, BLOCK_N)
    return req, L, tl.cdiv(L, size), size


@triton.jit
def _build_items(items_ptr, n_items_ptr, seq_lens_ptr, reqs_ptr, B, chunk, B_PAD: tl.constexpr,
                 MAX_PIECES: tl.constexpr, BLOCK_N: tl.constexpr, SORT: tl.constexpr):
    """work_items on the device: one program, a lane per request, offsets by a prefix sum in request order, or with
    SORT 1 the largest pieces first, 2 the longest contexts first (a request's offset: the pieces of every request
    whose key is larger, or as large and earlier, counted pairwise 32 requests at a time)."""
    b = tl.arange(0, B_PAD)
    bm = b < B
    req, L, n, size = _pieces(seq_lens_ptr, reqs_ptr, b, B, chunk, BLOCK_N)
    if SORT:
        key = size if SORT == 1 else L
        first = tl.zeros([B_PAD], tl.int32)
        for j0 in range(0, B_PAD, 32):
            j = j0 + tl.arange(0, 32)
            _, Lj, nj, sj = _pieces(seq_lens_ptr, reqs_ptr, j, B, chunk, BLOCK_N)
            kj = sj if SORT == 1 else Lj
            before = (kj[None, :] > key[:, None]) | ((kj[None, :] == key[:, None]) & (j[None, :] < b[:, None]))
            first += tl.sum(tl.where(before, nj[None, :], 0), 1)
    else:
        first = tl.cumsum(n, 0) - n
    for p in tl.static_range(MAX_PIECES):
        live = bm & (p < n)
        row = items_ptr + (first + p) * 5
        tl.store(row, req, mask=live)
        tl.store(row + 1, p * size, mask=live)
        tl.store(row + 2, tl.minimum(L, (p + 1) * size), mask=live)
        tl.store(row + 3, n * 0 + p, mask=live)
        tl.store(row + 4, n, mask=live)
    tl.store(n_items_ptr, tl.sum(n, 0))


def build_items(seq_lens, reqs, chunk: int, max_seq_len: int, block_n: int = 64, sort: str = ""):
    """(items, n_items) on the device: room for every request's most pieces (so `items.shape[0] * kv heads` programs
    cover every unit, the rest exit), the count written by the kernel; `sort`: "size" the largest pieces first,
    "length" the longest contexts first (as `work_items`), "" in request order."""
    B, max_pieces = reqs.shape[0], triton.next_power_of_2(triton.cdiv(max_seq_len, chunk))   # few compiles
    items = torch.empty(max(1, B * max_pieces), 5, dtype=torch.int32, device=reqs.device)
    n_items = torch.empty(1, dtype=torch.int32, device=reqs.device)
    _build_items[(1,)](items, n_items, seq_lens, reqs, B, chunk, B_PAD=max(32, triton.next_power_of_2(B)),
                       MAX_PIECES=max_pieces, BLOCK_N=block_n,
                       SORT={"": 0, "size": 1, "length": 2}[sort])
    return items, n_items


_STEAL = {}    # device -> (next unit, programs done): zero between launches


def items_attention(out, q, k_cache, v_cache, block_tables, query_start_loc, items: torch.Tensor, scale: float,
                    programs: int = 0, block_n: int = 64, num_warps: int = 2, num_stages: int = 4, n_items=None,
                    num_rows: int | None = None, steal: bool = False):
    """Decode attention over the work items (an (n, 5) int32 tensor); programs 0: one per unit. With `n_items` (a
    device count from build_items) only the first n_items rows of `items` are work, and `programs` must be given.
    `steal`: programs take units from a shared counter instead of every programs-th."""
    if q.device not in _STEAL: _STEAL[q.device] = torch.zeros(2, dtype=torch.int32, device=q.device)
    H, D = q.shape[1], q.shape[2]
    HKV, BS = k_cache.shape[2], k_cache.shape[1]
    G = H // HKV
    G_PAD, G2 = max(16, triton.next_power_of_2(G)), triton.next_power_of_2(G)
    n_units = items.shape[0] * HKV
    acc = torch.empty(n_units * G_PAD, D, dtype=torch.float32, device=q.device)
    ml = torch.empty(n_units * G_PAD, 2, dtype=torch.float32, device=q.device)
    n_progs = programs or n_units
    counts = ta._arrival_counts(q.device, (num_rows or block_tables.shape[0]) * HKV)
    _items_kernel[(n_progs,)](out, acc, ml, counts, _STEAL[q.device], q, k_cache, v_cache, block_tables,
                              query_start_loc, items, n_items if n_items is not None else items, n_units, n_progs,
                              scale, q.stride(0), q.stride(1), out.stride(0), out.stride(1), block_tables.stride(0),
                              G=G, G_PAD=G_PAD, G2=G2, HKV=HKV, D=D, BLOCK_SIZE=BS, BLOCK_N=block_n,
                              PARTS=4, ON_DEVICE=n_items is not None, STEAL=steal,
                              PERSISTENT=steal or n_progs < items.shape[0] * HKV,
                              IEEE=q.dtype == torch.float32, num_warps=num_warps, num_stages=num_stages)


def check():
    "On the interpreter: the items kernel against 04g1's, contexts of 1-300 tokens cut into pieces of 64 and 128."
    from mini_vllm.paged_attention import AttentionMetadata
    torch.manual_seed(0)
    H, HKV, D, BS = 8, 2, 16, 16
    seq = [1, 17, 64, 65, 130, 300]
    nblocks = sum(-(-s // BS) for s in seq) + 2
    k, v = torch.randn(nblocks, BS, HKV, D), torch.randn(nblocks, BS, HKV, D)
    perm = torch.randperm(nblocks).tolist()
    meta = AttentionMetadata.build([1] * len(seq), seq, [[perm.pop() for _ in range(-(-s // BS))] for s in seq], BS,
                                   "cpu")
    q = torch.randn(len(seq), H, D)
    want = torch.empty_like(q)
    reqs = torch.arange(len(seq), dtype=torch.int32)
    ta.paged_decode_attention(want, q, k, v, meta.block_tables, meta.seq_lens, meta.query_start_loc, reqs, 0.25,
                              max(seq))
    for chunk, programs in ((64, 0), (128, 0), (64, 5), (4096, 3)):
        got = torch.full_like(q, float("nan"))
        items = torch.tensor(work_items(seq, chunk, block_n=32), dtype=torch.int32)
        items_attention(got, q, k, v, meta.block_tables, meta.query_start_loc, items, 0.25, programs, block_n=32)
        err = (got - want).abs().max().item()
        print(f"chunk {chunk}, programs {programs or 'one per unit'}: {len(items)} items, largest difference {err:.1e}")
        assert err < 1e-4, err
        dev_items, n_items = build_items(meta.seq_lens, reqs, chunk, 512, block_n=32, sort="length")
        assert dev_items[:len(items)].tolist() == work_items(seq, chunk, block_n=32), "the host's order"
        dev_items, n_items = build_items(meta.seq_lens, reqs, chunk, 512, block_n=32, sort="size")
        sizes = [-(-(-(-seq[b] // n)) // 32) * 32 for b, _, _, _, n in dev_items[:len(items)].tolist()]
        assert sizes == sorted(sizes, reverse=True), "sorted items: the largest pieces first"
        got = torch.full_like(q, float("nan"))                      # one program per unit of the room, the rest exit
        items_attention(got, q, k, v, meta.block_tables, meta.query_start_loc, dev_items, 0.25,
                        dev_items.shape[0] * k.shape[2], block_n=32, n_items=n_items)
        assert (got - want).abs().max().item() < 1e-4
        dev_items, n_items = build_items(meta.seq_lens, reqs, chunk, 512, block_n=32)
        assert n_items.item() == len(items)
        assert sorted(map(tuple, dev_items[:len(items)].tolist())) == sorted(map(tuple, items.tolist()))
        got = torch.full_like(q, float("nan"))
        items_attention(got, q, k, v, meta.block_tables, meta.query_start_loc, dev_items, 0.25, programs or 7,
                        block_n=32, n_items=n_items)
        assert (got - want).abs().max().item() < 1e-4
        for _ in range(2):                                          # twice: the counters are back at zero
            got = torch.full_like(q, float("nan"))
            items_attention(got, q, k, v, meta.block_tables, meta.query_start_loc, dev_items, 0.25, programs or 7,
                            block_n=32, n_items=n_items, steal=True)
            assert (got - want).abs().max().item() < 1e-4
    print("items built on the device, taken in turn or from a shared counter: the same items, the same outputs")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    p.add_argument("--chunks", default="512,1024,2048")
    p.add_argument("--programs", default="0,660", help="0: one program per unit; else a persistent grid "
                   "(660: the 5 programs a multiprocessor holds at 190 registers a thread, compiled for sm_90)")
    p.add_argument("--tilings", default="2:4,4:4", help="WARPS:STAGES of the device items' kernel")
    p.add_argument("--check", action="store_true", help="compare with 04g1's kernel (TRITON_INTERPRET=1 on a CPU)")
    a = p.parse_args()
    if a.check: return check()
    from attn_length_mix import B, BS, HKV, MAX_LEN, step
    from gpu_bench import graph_us
    g = torch.Generator(device="cuda").manual_seed(0)
    c = torch.Generator().manual_seed(0)
    prompt, output = torch.randint(100, 1025, (B,), generator=c), torch.randint(100, 1025, (B,), generator=c)
    mixed = (prompt + (torch.rand(B, generator=c) * output).long()).clamp(max=MAX_LEN).tolist()
    x = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")
    copy_gb_s = 2 * (1 << 27) / graph_us([lambda: x[: 1 << 27].copy_(x[1 << 27:])]) / 1e3
    res = dict(commit=os.environ.get("MINI_VLLM_COMMIT"), device=torch.cuda.get_device_name(0),
               copy_gb_per_s=round(copy_gb_s), mean_context=sum(mixed) / B, rows=[])
    for name, seq in (("mixed", mixed), ("equal", [round(sum(mixed) / B)] * B)):
        cache, meta, q, kv_bytes = step(seq, g)
        want, o = torch.empty_like(q), torch.empty_like(q)
        r = torch.arange(B, dtype=torch.int32, device="cuda")
        base = lambda: ta.paged_decode_attention(want, q, cache.k[0], cache.v[0], meta.block_tables, meta.seq_lens,
                                                 meta.query_start_loc, r, 0.125, MAX_LEN)
        base(); torch.cuda.synchronize()
        runs = [("04g1", None, None, graph_us([base] * 8))]
        for chunk in map(int, a.chunks.split(",")):
            items = torch.tensor(work_items(seq, chunk), dtype=torch.int32, device="cuda")
            for programs in map(int, a.programs.split(",")):
                call = lambda: items_attention(o, q, cache.k[0], cache.v[0], meta.block_tables, meta.query_start_loc,
                                               items, 0.125, programs)
                o.zero_(); call(); torch.cuda.synchronize()
                err = (o.float() - want.float()).abs().max().item()
                if err > 2e-2: print("  wrong", name, chunk, programs, err, flush=True); continue
                runs.append((f"items, {len(items)}", chunk, programs or "one per unit", graph_us([call] * 8)))
            room = build_items(meta.seq_lens, r, chunk, MAX_LEN)[0].shape[0] * HKV
            call = lambda: items_attention(o, q, cache.k[0], cache.v[0], meta.block_tables, meta.query_start_loc,
                                           items, 0.125, room)         # a grid of the engine's room, the rest exit
            runs.append((f"items, {len(items)}", chunk, f"room ({room})", graph_us([call] * 8)))
            pad = torch.zeros(room // HKV, 5, dtype=torch.int32, device="cuda")   # the host's items read as the
            pad[:len(items)] = items                                        # device's: the count in memory
            n_host = torch.tensor([len(items)], dtype=torch.int32, device="cuda")
            call = lambda: items_attention(o, q, cache.k[0], cache.v[0], meta.block_tables, meta.query_start_loc,
                                           pad, 0.125, room, n_items=n_host)
            o.zero_(); call(); torch.cuda.synchronize()
            assert (o.float() - want.float()).abs().max().item() < 2e-2
            runs.append((f"items, {len(items)}, count on the device", chunk, f"room ({room})", graph_us([call] * 8)))
            for sort in ("", "size", "length"):                     # as the engine would: on the device, in request
                runs.append((f"build items on the device{', sorted by ' + sort if sort else ''}", chunk, 1, graph_us(
                    [lambda: build_items(meta.seq_lens, r, chunk, MAX_LEN, sort=sort)])))   # order or sorted
                dev_items, n_items = build_items(meta.seq_lens, r, chunk, MAX_LEN, sort=sort)
                for programs in [0] + [int(v) for v in a.programs.split(",") if int(v)]:
                    for steal in ((False,) if programs == 0 else (False, True)):
                        for tiling in a.tilings.split(","):
                            w, st = map(int, tiling.split(":"))
                            call = lambda: items_attention(o, q, cache.k[0], cache.v[0], meta.block_tables,
                                                           meta.query_start_loc, dev_items, 0.125, programs or room,
                                                           num_warps=w, num_stages=st, n_items=n_items, steal=steal)
                            o.zero_(); call(); torch.cuda.synchronize()
                            err = (o.float() - want.float()).abs().max().item()
                            kind = (f"device items{', by ' + sort if sort else ''}{', stolen' if steal else ''}, "
                                    f"{n_items.item()}, {w} warps, {st} stages")
                            if err > 2e-2: print("  wrong", name, chunk, programs, kind, err, flush=True); continue
                            runs.append((kind, chunk, programs or f"room ({room})", graph_us([call] * 8)))
        for kind, chunk, programs, us in runs:
            row = dict(contexts=name, kernel=kind, chunk=chunk, programs=programs, us=round(us, 1),
                       fraction_of_copy=round(kv_bytes / us / 1e3 / copy_gb_s, 3))
            res["rows"].append(row)
            print(json.dumps(row), flush=True)
        del cache
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    (out / "attn_work_items.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
