"""Tile sweep for chapter 05's kernels on one GPU: the small-batch GEMV (04i) reading int8 and int4 weights, each as
the model calls it (qkv with RoPE and the cache write, o with the residual, gate/up with the norm and SwiGLU, down
with the residual), and qmm for larger batches (rows tiles x weight tiles x shares of K, each checked against the
dequantized weight), beside cuBLAS on bf16 weights. TinyLlama's shapes (--shape llama3_8b: Llama-3-8B's, for
qmm), bf16 activations, every call on its own
copy of the weights (so that they stream from HBM), timed inside CUDA graphs. Writes quant_sweep.json into --out
(rewritten as it goes); stops starting new sweeps after --budget-s seconds. Run from the repo root:
  python benchmarks/experiments/quant_sweep.py --out $OUT [--only gemv|qmm] [--shape llama3_8b --rows 256,128
      --formats int4]
"""
import argparse, json, os, sys, time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent), str(HERE)]   # repo root, benchmarks/, here
from gpu_bench import GEMV_SHAPES, _quant_copies, graph_us, rel_err  # noqa: E402
from int4_mma_bench import SHAPES  # noqa: E402

GEMV_CONFIGS = {   # (block_n, block_k in weights), each with 4 and 8 warps, 1 and 3 stages
    8: [(2, 4096), (4, 4096), (4, 2048), (8, 2048), (4, 1024), (8, 1024), (16, 1024), (16, 512), (32, 256)],
    4: [(4, None), (8, None), (16, None), (32, None), (64, None), (128, None)]}
QMM_ROWS = (64, 256, 16, 128, 2048, 32, 512, 8, 4, 8192)     # the decode sizes that matter most first


def qmm_configs(M):
    "qmm tilings for M rows: row tiles near M, 64-row weight tiles (128 with 8 warps for big row tiles), K in shares."
    p2 = 1 << max(0, (M - 1).bit_length())
    block_ms = [16] if M <= 16 else {32: [32], 64: [64], 128: [64, 128], 256: [64, 128, 256]}.get(p2, [128, 256])
    return [dict(block_m=bm, block_n=bn, block_k=64 if bm >= 256 else 128, num_warps=8 if bn == 128 else 4,
                 num_stages=4 if bm <= 32 else 3, split=split)
            for bm in block_ms for bn in (64, 128) for split in (1, 2, 4)
            if (bn == 64 or bm >= 128) and (split == 1 or M < 2048)]


def model_calls(kind, x, h, nw, rope, copies, fmt, tiling):
    "The calls the model makes for one kind of layer, one per weight copy."
    from mini_vllm.fast.small_batch import gemv, qkv_rope_write
    pairs = [(w, {}) for w in copies["bf16"]] if fmt == "bf16" else copies[fmt]
    if kind == "qkv":
        cos, sin, pos, slots, kc, vc = rope
        t = dict(tiling, block_h=min(32, max(1, tiling["block_n"] // 2)))
        return [lambda w=w, q=q: qkv_rope_write(x, nw, 1e-5, w, None, cos, sin, pos, slots, kc, vc, 32, 4, 64,
                                                pdl=False, **q, **t) for w, q in pairs]
    if kind == "swiglu": return [lambda w=w, q=q: gemv(x, w, silu_out=True, norm_weight=nw, eps=1e-5, **q, **tiling)
                                 for w, q in pairs]
    return [lambda w=w, q=q: gemv(x, w, residual=h, out=h, **q, **tiling) for w, q in pairs]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    p.add_argument("--budget-s", type=float, default=420)
    p.add_argument("--only", choices=("gemv", "qmm"), default=None, help="one of the two sweeps")
    p.add_argument("--shape", choices=("tinyllama", "llama3_8b"), default="tinyllama",
                   help="the products' shapes (llama3_8b: qmm only)")
    p.add_argument("--rows", default=None, help="qmm's row counts, e.g. 256,128 (default: QMM_ROWS)")
    p.add_argument("--formats", default="int8,int4", help="qmm's formats")
    p.add_argument("--tiling-out", default=None,
                   help="write here, for the first format, the one qmm tiling per row count with the least time over "
                        "the four shapes, as gpu_bench's --qmm-tiling takes it (QMM_TILING's entry for those rows)")
    args = p.parse_args()
    if args.shape != "tinyllama" and args.only != "qmm": p.error("--shape llama3_8b sweeps qmm only: add --only qmm")
    shapes = GEMV_SHAPES if args.shape == "tinyllama" else SHAPES[args.shape]
    rows = [int(m) for m in args.rows.split(",")] if args.rows else QMM_ROWS
    formats = args.formats.split(",")
    from mini_vllm.loading import ModelConfig
    from mini_vllm.model import rope_tables
    from mini_vllm.quant.quant_kernels import qmm
    out, t0 = Path(args.out), time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    res = {"env": {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "command": " ".join(sys.argv),
                   "commit": os.environ.get("MINI_VLLM_COMMIT", "unknown")}, "gemv": {}, "qmm": {}, "best": {}}
    save = lambda: (out / "quant_sweep.json").write_text(json.dumps(res, indent=1))
    torch.manual_seed(0)
    cos, sin = (t.cuda() for t in rope_tables(ModelConfig("llama", 32000, 2048, 22, 32, 4, 64, 5632, 2048, 1e-5)))
    kinds = {} if args.only == "qmm" else {"qkv": "qkv", "o": "narrow", "gate_up": "swiglu", "down": "deep"}
    for name, kind in kinds.items():
        N, K = GEMV_SHAPES[name]
        lin = torch.nn.Linear(K, N, bias=False, device="cuda", dtype=torch.bfloat16)
        torch.nn.init.normal_(lin.weight, std=0.02)
        copies = _quant_copies(lin, max(2, (256 << 20) // (N * K * 2)))
        out_n = N // 2 if kind == "swiglu" else N
        for M in (1, 2):
            x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
            h = torch.randn(M, out_n, device="cuda", dtype=torch.bfloat16)
            nw = torch.ones(K, device="cuda", dtype=torch.bfloat16)
            kc = torch.zeros(64, 16, 4, 64, device="cuda", dtype=torch.bfloat16)
            rope = (cos, sin, torch.arange(M, device="cuda"), torch.arange(M, device="cuda"), kc, kc.clone())
            for fmt, bits in (("bf16", 16), ("int8", 8), ("int4", 4)):
                if time.perf_counter() - t0 > args.budget_s: break
                configs = [(None, None)] if fmt == "bf16" else GEMV_CONFIGS[bits]   # bf16: 04i's tiling
                timings = {}
                for bn, bk in configs:
                    for warps, stages in ([(None, None)] if fmt == "bf16" else [(4, 1), (8, 1), (4, 3), (8, 3)]):
                        tiling = {} if warps is None else dict(block_n=bn, block_k=bk, num_warps=warps,
                                                               num_stages=stages)
                        try: us = graph_us(model_calls(kind, x, h, nw, rope, copies, fmt, tiling))
                        except Exception as e: us = repr(e)[:200]
                        timings[f"{bn}x{bk}_w{warps}_s{stages}"] = us
                ok = {k: v for k, v in timings.items() if isinstance(v, float)}
                best = min(ok, key=ok.get) if ok else None
                res["gemv"][f"{name}_M{M}_{fmt}"] = timings
                res["best"][f"{name}_M{M}_{fmt}"] = (best, ok.get(best))
                print(f"{name} M={M} {fmt}: best {best} {ok.get(best, float('nan')):.1f} us of {len(timings)}",
                      flush=True)
                save()
        del copies
        torch.cuda.empty_cache()
    layers = {}                                  # qmm: every shape for each row count, most important first
    for name in ([] if args.only == "gemv" else ("qkv", "o", "gate_up", "down")):
        N, K = shapes[name]
        lin = torch.nn.Linear(K, N, bias=False, device="cuda", dtype=torch.bfloat16)
        torch.nn.init.normal_(lin.weight, std=0.02)
        layers[name] = (K, _quant_copies(lin, max(2, (256 << 20) // (N * K * 2))))
    for M in rows if layers else ():
        for name, (K, copies) in layers.items():
            if time.perf_counter() - t0 > args.budget_s: break
            x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
            row = {"cublas_bf16": graph_us([lambda w=w: torch.nn.functional.linear(x, w) for w in copies["bf16"]])}
            for fmt in formats:
                layer, q0 = copies[fmt + "_layer"], copies[fmt][0][1]
                ref = x.float() @ layer.dequantize(torch.float32).T
                row[fmt + "_default"] = graph_us([lambda w=w, q=q: qmm(x, w, **q) for w, q in copies[fmt]])
                for t in qmm_configs(M):
                    key = (f"{fmt}_{t['block_m']}x{t['block_n']}x{t['block_k']}_w{t['num_warps']}_s{t['num_stages']}"
                           f"_k{t['split']}")
                    try:
                        err = rel_err(qmm(x, layer.qweight, **q0, **t), ref)
                        row[key] = graph_us([lambda w=w, q=q: qmm(x, w, **q, **t) for w, q in copies[fmt]])
                        if err > 2e-2: row[key] = f"error {err:.1e}"
                    except Exception as e: row[key] = repr(e)[:200]
            res["qmm"][f"{name}_M{M}"] = row
            for fmt in formats:
                ok = {k: v for k, v in row.items() if k.startswith(fmt + "_") and k != fmt + "_default"
                      and isinstance(v, float)}
                b = min(ok, key=ok.get) if ok else None
                res["best"][f"qmm_{name}_M{M}_{fmt}"] = (b, ok.get(b))
                print(f"qmm {name} M={M} {fmt}: best {b} {ok.get(b, float('nan')):.1f} us, QMM_TILING "
                      f"{row[fmt + '_default']:.1f}; cuBLAS bf16 {row['cublas_bf16']:.1f}", flush=True)
            save()
    res["seconds"] = time.perf_counter() - t0
    save()
    if args.tiling_out:
        Path(args.tiling_out).write_text(json.dumps(uniform_tiling(res["qmm"], formats[0], rows)))


def uniform_tiling(qmm_rows: dict, fmt: str, rows) -> dict:
    """For each row count, the tiling whose time summed over the shapes is least, keyed by the QMM_TILING entry
    that covers those rows; kept only where it beats that entry's own sum."""
    from mini_vllm.quant.quant_kernels import QMM_TILING
    best = {}
    for M in rows:
        runs = [r for k, r in qmm_rows.items() if k.endswith(f"_M{M}")]
        keys = [k for k in runs[0] if k.startswith(fmt + "_") and all(isinstance(r.get(k), float) for r in runs)]
        total = {k: sum(r[k] for r in runs) for k in keys}
        k = min((k for k in total if k != fmt + "_default"), key=total.get, default=None)
        top = next(top for top, _ in QMM_TILING if top is None or M <= top)
        if k is None or total[k] >= total.get(fmt + "_default", float("inf")): continue
        bm, bn, bk = (int(v) for v in k.split("_")[1].split("x"))
        w, st, sp = (int(v[1:]) for v in k.split("_")[2:5])
        best[str(top)] = dict(block_m=bm, block_n=bn, block_k=bk, num_warps=w, num_stages=st, split=sp)
        print(f"rows {M}: {k} {total[k]:.1f} us over the shapes against QMM_TILING's {total[fmt + '_default']:.1f}",
              flush=True)
    return best


if __name__ == "__main__":
    main()
