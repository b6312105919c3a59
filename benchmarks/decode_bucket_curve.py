"""What a decode step costs at each batch size it may be padded to, on a CUDA GPU (TinyLlama-1.1B shape, dummy bf16):
  1. cuBLAS alone: each of the model's five products (qkv, o, gate/up, down, LM head) at M = 8, 16, ..., 256 rows,
     every call on its own copy of the weights inside one CUDA graph (from HBM, as in a step), and the sum a step
     pays (22 layers of the four, plus the LM head);
  2. the engine's decode graphs, captured at every multiple of 8 up to 256 (not only chapter 04h's buckets) and
     replayed back to back with every row padding (one cached token each: the products, norms, RoPE and the LM head,
     next to no attention).
A bucket that costs more than a larger one is worth padding past. Writes decode_bucket_curve.json into --out.
  PYTHONPATH=/tmp/site MINI_VLLM_COMMIT=<commit> python3 benchmarks/decode_bucket_curve.py --out $OUT/curve
"""
import argparse, json, os, sys, tempfile
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent)); sys.path.insert(0, str(HERE))
import torch
from full_batch_gemm_sweep import SHAPES
from gpu_bench import back_to_back_ms, graph_us
from workload import tinyllama_config_dir

LAYERS = 22


def cublas_curve(ms):
    rows = {}
    for name, (N, K) in SHAPES.items():
        ws = [torch.randn(N, K, dtype=torch.bfloat16, device="cuda") / 30
              for _ in range(max(4, min(32, (400 << 20) // (N * K * 2))))]
        for M in ms:
            x, y = torch.randn(M, K, dtype=torch.bfloat16, device="cuda"), torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
            rows.setdefault(M, {})[name] = round(graph_us([lambda w=w: torch.mm(x, w.t(), out=y) for w in ws]), 2)
        del ws
    for M, r in rows.items():
        r["step_us"] = round(LAYERS * (r["qkv"] + r["o"] + r["gate_up"] + r["down"]) + r["lm_head"], 1)
    return rows


def graph_curve(ms, reps=20):
    from mini_vllm import LLM; from mini_vllm.fast import cuda_graphs as cg
    orig = cg.graph_buckets
    cg.graph_buckets = lambda B: list(ms)                     # every size asked for, captured
    try:
        llm = LLM(tinyllama_config_dir(Path(tempfile.mkdtemp()) / "tinyllama"), dtype="bfloat16", load_format="dummy",
                  max_num_seqs=max(ms), max_model_len=2048)
    finally:
        cg.graph_buckets = orig
    runner, out = llm.llm_engine.core.runner, {}
    for M in ms:                                              # every row padding (as after capture): seq_len 1
        out[M] = round(min(back_to_back_ms(runner.graphs[M], reps) for _ in range(3)) * 1e3, 1)   # best of three
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    p.add_argument("--ms", default=",".join(str(m) for m in range(8, 257, 8)))
    a = p.parse_args()
    ms = [int(m) for m in a.ms.split(",")]
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    res = dict(commit=os.environ.get("MINI_VLLM_COMMIT"), device=torch.cuda.get_device_name(0), torch=torch.__version__,
               command=" ".join(sys.argv))
    res["cublas_us"] = cublas_curve(ms)
    res["graph_replay_us"] = graph_curve(ms)
    print(f"{'M':>4} {'qkv':>7} {'o':>7} {'gate_up':>8} {'down':>7} {'lm_head':>8} {'cuBLAS step':>12} {'graph':>8}")
    for M in ms:
        r = res["cublas_us"][M]
        print(f"{M:4d} {r['qkv']:7.2f} {r['o']:7.2f} {r['gate_up']:8.2f} {r['down']:7.2f} {r['lm_head']:8.2f} "
              f"{r['step_us']:12.1f} {res['graph_replay_us'][M]:8.1f}", flush=True)
    (out / "decode_bucket_curve.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
