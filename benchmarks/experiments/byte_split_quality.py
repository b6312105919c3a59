"""Chapter 05b's byte split on SmolLM2 (CPU, fp32): perplexity of 05a's text and logits' cosine with the fp32 model,
int8 weights (05a's round trip: the dequantized weight) with each linear layer's inputs as they are, rounded to
bf16, rounded per row to 16-bit integers as `byte_split` makes them (x ~ s q, s = max|x| / (127 * 256 + 127)), and
both (bf16 inputs, then `byte_split`, as in the engine). Emulated in PyTorch: the integer products are exact, so
only the inputs' rounding differs from fp32.
  python3 benchmarks/experiments/byte_split_quality.py > benchmarks/results/int8_split_mm_h200/byte_split_quality.txt
"""
import copy, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))     # the repo root
import torch
import torch.nn.functional as F
from mini_vllm.loading import load_tokenizer
from mini_vllm.model import CausalAttention, load_model
from mini_vllm.quant.quantization import QuantLinear, quantize_model

Q_MAX = 127 * 256 + 127
def rows16(x):
    "x rounded per row to 16-bit integers times the row's scale, as byte_split rounds it."
    s = x.abs().amax(-1, keepdim=True).clamp_min(1e-30) / Q_MAX
    return torch.round(x / s) * s


ROUND = {"fp32 inputs": lambda x: x, "inputs rounded to bf16": lambda x: x.bfloat16().float(),
         "inputs in 16 bits a row": rows16,
         "bf16, then 16 bits a row": lambda x: rows16(x.bfloat16().float())}     # as the engine's inputs are


class RoundedInputs(QuantLinear):
    "int8 weights multiplied dequantized, in fp32, on inputs rounded by ROUND[mode]."
    mode = "fp32 inputs"
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register_buffer("w", self.dequantize(torch.float32), persistent=False)
    def forward(self, x): return F.linear(ROUND[self.mode](x), self.w, self.bias)


@torch.inference_mode()
def read_text(m, ids, chunk=512):
    "Perplexity of the text read in chunks of `chunk` tokens, and each chunk's logits."
    nll, logits = 0.0, []
    for c in ids.split(chunk):
        lg = m.compute_logits(m(c[None], torch.arange(len(c))[None], CausalAttention())[0])
        nll += F.cross_entropy(lg[:-1], c[1:], reduction="sum").item()
        logits.append(lg)
    return torch.tensor(nll / (len(ids) - len(logits))).exp().item(), logits


def main():
    model = load_model(None, dtype="float32", device="cpu")                   # SmolLM2-135M
    text = (Path(__file__).resolve().parents[1] / "data" / "quality_text.txt").read_text()
    ids = torch.tensor(load_tokenizer(model.path).encode(text))
    ppl0, ref = read_text(model, ids)
    print(f"SmolLM2-135M, {len(ids)} tokens; fp32 perplexity {ppl0:.4f}")
    m = quantize_model(copy.deepcopy(model), "int8", linear_cls=RoundedInputs)
    for mode in ROUND:
        RoundedInputs.mode = mode
        ppl, lg = read_text(m, ids)
        cos = torch.cat([F.cosine_similarity(a, b, dim=-1) for a, b in zip(lg, ref)]).mean().item()
        print(f"int8 weights, {mode:25s} perplexity {ppl:.4f} ({ppl / ppl0 - 1:+.3%}), logits' cosine {cos:.6f}",
              flush=True)


if __name__ == "__main__":
    main()
