"""`LLM(quantization="int4")`'s calibration (chapter 05c) on a GPU beside the same on the CPU, with nothing to carry:
a tiny random Llama and a byte-level BPE tokenizer of 512 tokens trained here on the book's calibration text.

Prints each calibration's time, the share of int4 integers equal between the two devices per layer (GPTQ picks
between two nearby integers by the sign of small differences, so a few may differ), whether the engine on the GPU
found the GPU's folder in the cache, and its greedy text. From the repo root:
  PYTHONPATH=$PWD python3 benchmarks/gptq_gpu.py            (a CPU-only machine: --device cpu)
"""
import argparse, os, tempfile, time
from pathlib import Path

import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from mini_vllm import LLM, SamplingParams
from mini_vllm.loading import save_tiny_model
from mini_vllm.quant.gptq import calibrated_checkpoint, calibration_text
from mini_vllm.quant.quantization import unpack_int4


def tiny_with_tokenizer(folder: Path) -> Path:
    "chapter 00a's tiny Llama (vocabulary 512) and a BPE tokenizer of 512 tokens trained on the calibration text."
    d = save_tiny_model(folder, "llama")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    tok.train_from_iterator([calibration_text()], trainers.BpeTrainer(
        vocab_size=512, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=["<s>", "</s>"]))
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", '
                                            '"eos_token": "</s>"}')
    return d


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    d = tiny_with_tokenizer(Path(tempfile.mkdtemp()) / "tiny")
    folders = {}
    for where in (a.device, "cpu"):
        os.environ["MINI_VLLM_CACHE"] = tempfile.mkdtemp()           # an empty cache: each calibrates
        t0 = time.perf_counter()
        folders[where] = calibrated_checkpoint(d, where)
        print(f"calibrated on {where}: {time.perf_counter() - t0:.1f} s", flush=True)
    here, cpu = (load_file(str(folders[w] / "model.safetensors")) for w in (a.device, "cpu"))
    G = 2 * next(t for k, t in here.items() if k.endswith("qweight")).shape[1] // next(
        t for k, t in here.items() if k.endswith("scales")).shape[1]
    same = {k: (unpack_int4(here[k], G) == unpack_int4(cpu[k], G)).float().mean().item()
            for k in here if k.endswith("qweight")}
    print(f"{len(same)} layers, groups of {G}: int4 integers equal between {a.device} and cpu, "
          f"least {min(same.values()):.4f}, mean {sum(same.values()) / len(same):.4f}")
    os.environ["MINI_VLLM_CACHE"] = str(folders[a.device].parents[1])
    llm = LLM(str(d), quantization="int4", device=a.device, dtype="bfloat16")
    print("the engine loaded the calibrated folder:", llm.llm_engine.core.model.path == folders[a.device])
    out = llm.generate("The engine", SamplingParams(temperature=0, max_tokens=12), use_tqdm=False)[0].outputs[0]
    print("greedy:", out.token_ids)


if __name__ == "__main__":
    main()
