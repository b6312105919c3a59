"""How steady is the default int4 (05c's GPTQ: group 64, asymmetric, act order, clip search) from one CPU to another?

SmolLM2-135M calibrated on the first N tokens of the book's calibration text, with T torch threads (the order of
the sums changes with both the CPU's kernels and the thread count), then the quality text's perplexity against
fp32's, as chapter 05c reads it. The down projection reads 1,536 inputs: on fewer tokens its Hessian is singular
and only the damping holds GPTQ's solve together.

    python benchmarks/experiments/gptq_tokens.py --tokens 1024,2048,0 --threads 1,2 [--damp 0.01,0.1] \
        [--clip 1,0.8:0.05] --out F.json
(--tokens 0: the whole text). --clip L:S: each group's asymmetric grid from its range shrunk by the factor, of 1,
1 - S, ... down to L, that rounds the group's weights (as they stand when GPTQ reaches it) with the least sum of
|error|^2.4, row by row (the search of GPTQ's reference code, 05c's `clip` option; 0.8:0.05 is 05c's default);
1: the group's whole range, 05a's grid.
"""
import argparse, copy, json, platform, subprocess, sys, time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from mini_vllm.loading import load_tokenizer          # noqa: E402
from mini_vllm.model import CausalAttention, load_model   # noqa: E402
from mini_vllm.quant.gptq import DEFAULT_GPTQ, calibration_text, gptq_quantize_model   # noqa: E402
from mini_vllm.quant.quantization import QuantLinear   # noqa: E402


@torch.inference_mode()
def perplexity(m, ids, chunk: int = 512) -> float:
    "The quality text read in chunks of `chunk` tokens, as 05a and 05c read it."
    nll, chunks = 0.0, ids.split(chunk)
    for c in chunks:
        lg = m.compute_logits(m(c[None], torch.arange(len(c))[None], CausalAttention())[0])
        nll += F.cross_entropy(lg[:-1].float(), c[1:], reduction="sum").item()
    return torch.tensor(nll / (len(ids) - len(chunks))).exp().item()


def dequantized(m):
    "Each QuantLinear replaced by an fp32 nn.Linear of its dequantized weight (05c's as_fp32)."
    for parent in list(m.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, QuantLinear):
                lin = torch.nn.Linear(child.in_features, child.out_features, bias=child.bias is not None)
                lin.weight.data, lin.bias = child.dequantize(torch.float32), child.bias
                setattr(parent, name, lin)
    return m


def factors(spec: str) -> list[float]:
    "'1': [1.0]; 'L:S': 1, 1 - S, ... down to L."
    if spec == "1": return [1.0]
    low, step = map(float, spec.split(":"))
    return [1 - i * step for i in range(int(round((1 - low) / step)) + 1)]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", default="1024,2048,0", help="calibration tokens to try (0: the whole text)")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--damp", default="0.01", help="GPTQ's damping, a fraction of H's mean diagonal (several: a,b)")
    p.add_argument("--clip", default="0.8:0.05",
                   help="each group's range: 1 (whole), or L:S searched (several: a,b); 0.8:0.05 is 05c's default")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    model = load_model(None, dtype="float32", device="cpu")
    tok = load_tokenizer(model.path)
    ids = torch.tensor(tok.encode((ROOT / "benchmarks" / "data" / "quality_text.txt").read_text()))
    cal = torch.tensor(tok.encode(calibration_text()))
    fp32 = perplexity(model, ids)
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                         capture_output=True, text=True).stdout.strip()
    flags = open("/proc/cpuinfo").read().split("flags")[1].split("\n")[0].split()
    res = dict(cpu=cpu or platform.processor(), avx512=any(f.startswith("avx512") for f in flags),
               torch=torch.__version__, settings=DEFAULT_GPTQ, calibration_tokens_available=len(cal),
               fp32_perplexity=fp32, runs=[])
    print(f"{res['cpu']} (AVX-512: {res['avx512']}), torch {torch.__version__}; fp32 perplexity {fp32:.3f}; "
          f"calibration text {len(cal)} tokens")
    runs = [(int(n), int(t), float(d), c) for n in a.tokens.split(",") for t in a.threads.split(",")
            for d in a.damp.split(",") for c in a.clip.split(",")]
    for n, threads, damp, clip in runs:
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        m = gptq_quantize_model(copy.deepcopy(model), cal[:n] if n else cal,
                                **{**DEFAULT_GPTQ, "clip": tuple(factors(clip))}, damp=damp)
        secs = time.perf_counter() - t0
        ppl = perplexity(dequantized(m), ids)
        r = dict(tokens=n or len(cal), threads=threads, damp=damp, clip=clip, seconds=round(secs, 1),
                 perplexity=ppl, vs_fp32=ppl / fp32 - 1)
        res["runs"].append(r)
        print(f"{r['tokens']:5d} tokens, {threads} threads, damp {damp}, clip {clip}: {secs:5.1f} s, "
              f"perplexity {ppl:.3f} ({r['vs_fp32']:+.2%} vs fp32)", flush=True)
    if a.out: Path(a.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
