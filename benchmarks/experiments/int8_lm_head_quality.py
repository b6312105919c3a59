"""What int8 costs SmolLM2-135M's perplexity with its LM head quantized too (05a's quantize_model(lm_head=True)) and
without, on the book's quality text (benchmarks/data/quality_text.txt), read in chunks of 512 tokens as chapter 05a
reads it: fp32 layers holding the weights the integers stand for, so that the error is the format's, not a kernel's.
On a CPU, from the repo root:
  python benchmarks/experiments/int8_lm_head_quality.py [--out FILE.json]
"""
import argparse, copy, json, sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))     # the repo root
from mini_vllm.loading import load_tokenizer  # noqa: E402
from mini_vllm.model import CausalAttention, load_model  # noqa: E402
from mini_vllm.quant.quantization import QuantLinear, quantize_model  # noqa: E402


class RoundTripLinear(QuantLinear):
    "A QuantLinear multiplying by its dequantized fp32 weight (05a's)."
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register_buffer("w", self.dequantize(torch.float32), persistent=False)

    def forward(self, x): return F.linear(x, self.w.to(x.dtype), self.bias)


@torch.inference_mode()
def perplexity(m, ids, chunk=512) -> float:
    nll, n = 0.0, 0
    for c in ids.split(chunk):
        logits = m.compute_logits(m(c[None], torch.arange(len(c))[None], CausalAttention())[0])
        nll += F.cross_entropy(logits[:-1], c[1:], reduction="sum").item()
        n += len(c) - 1
    return torch.tensor(nll / n).exp().item()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    model = load_model(None, dtype="float32", device="cpu")      # SmolLM2-135M, the book's default
    text = (Path(__file__).resolve().parents[1] / "data" / "quality_text.txt").read_text()
    ids = torch.tensor(load_tokenizer(model.path).encode(text))
    res = {"tokens": len(ids), "fp32": perplexity(model, ids)}
    print(f"SmolLM2-135M, {len(ids)} tokens: fp32 perplexity {res['fp32']:.3f}")
    for head in (False, True):
        m = quantize_model(copy.deepcopy(model), "int8", linear_cls=RoundTripLinear, lm_head=head)
        name = "int8, LM head too" if head else "int8, LM head fp32"
        res[name] = perplexity(m, ids)
        print(f"{name:20s} {res[name]:.3f} ({res[name] / res['fp32'] - 1:+.2%})")
    if args.out: Path(args.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
