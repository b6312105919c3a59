"""The public benchmark workload and the model shapes of the GPU side-by-sides (configs only, dummy weights)."""
import json
from pathlib import Path

import torch

# TinyLlama/TinyLlama-1.1B-Chat-v1.0's config.json, field for field.
TINYLLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_hidden_layers": 22,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "rope_scaling": None,
    "hidden_act": "silu",
    "attention_bias": False,
    "initializer_range": 0.02,
    "pretraining_tp": 1,
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "torch_dtype": "bfloat16",
    "use_cache": True,
}

# Same family, small enough for a 2-core CPU smoke test; the vocab stays 32000 so workload ids are valid.
TINY_CONFIG = {**TINYLLAMA_CONFIG, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2}

GENERATION_CONFIG = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "max_length": 2048}

# meta-llama/Meta-Llama-3-8B's shape: the size where splitting a model over two GPUs pays (benchmarks/tp_bench.py).
LLAMA3_8B_CONFIG = {**TINYLLAMA_CONFIG, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
                    "max_position_embeddings": 8192, "rope_theta": 500000.0, "bos_token_id": 128000,
                    "eos_token_id": 128001}


# Qwen/Qwen3-0.6B's config.json, the model of nano-vllm's and mini-sglang's own benchmark (256 sequences, prompt and
# output lengths uniform in 100-1024: the public workload below). Its head_dim (128) is not hidden / heads (64).
QWEN3_0_6B_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "max_window_layers": 28,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000,
    "rope_scaling": None,
    "sliding_window": None,
    "use_sliding_window": False,
    "hidden_act": "silu",
    "attention_bias": False,
    "attention_dropout": 0.0,
    "initializer_range": 0.02,
    "tie_word_embeddings": True,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "torch_dtype": "bfloat16",
    "use_cache": True,
}

# HuggingFaceTB/SmolLM2-135M-Instruct's shape, the book's default model (its weights come from a GGUF file instead).
SMOLLM2_135M_CONFIG = {**TINYLLAMA_CONFIG, "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
                       "num_attention_heads": 9, "num_key_value_heads": 3, "vocab_size": 49152,
                       "max_position_embeddings": 8192, "rope_theta": 100000.0, "rms_norm_eps": 1e-5,
                       "tie_word_embeddings": True}

# The model shapes the GPU side-by-sides take (`--shape`), each with a small variant of the same architecture for a
# smoke test on a CPU (vocabularies kept, so workload ids stay valid).
SHAPES = {"tinyllama": TINYLLAMA_CONFIG, "llama3_8b": LLAMA3_8B_CONFIG, "qwen3_0.6b": QWEN3_0_6B_CONFIG,
          "smollm2_135m": SMOLLM2_135M_CONFIG}
SHAPE_NAMES = {"tinyllama": "TinyLlama-1.1B", "llama3_8b": "Llama-3-8B", "qwen3_0.6b": "Qwen3-0.6B",
               "smollm2_135m": "SmolLM2-135M"}
SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)


def shape_config(shape, tiny=False):
    """The config of a shape in SHAPES (its small variant with `tiny`)."""
    if shape not in SHAPES: raise ValueError(f"shape must be one of {', '.join(SHAPES)}, got {shape!r}")
    c = dict(SHAPES[shape])
    if tiny: c.update(SMALL, **({"head_dim": 32} if "head_dim" in c else {}))
    return c


def tinyllama_config_dir(path, tiny=False, config=None):
    """Write config.json and generation_config.json for TinyLlama-1.1B (or the tiny variant, or `config`) into `path`."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    config = config or (TINY_CONFIG if tiny else TINYLLAMA_CONFIG)
    gen = {**GENERATION_CONFIG, "bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"],
           "max_length": config["max_position_embeddings"]}                # each shape's own ids (TinyLlama's: as is)
    (path / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (path / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    return path


def shape_config_dir(path, shape="tinyllama", tiny=False):
    """`tinyllama_config_dir` for a shape in SHAPES."""
    return tinyllama_config_dir(path, config=shape_config(shape, tiny))


def draw_workload(n, prompt, output, seed=0, vocab=32000):
    """n (prompt_token_ids, output_len) pairs, lengths uniform in the inclusive ranges `prompt` and `output`; every
    request ignores EOS and generates exactly output_len.

    One generator, `g = torch.Generator().manual_seed(seed)` (CPU), drawn in this order:
    1. prompt_lens = torch.randint(prompt[0], prompt[1] + 1, (n,), generator=g)
    2. output_lens = torch.randint(output[0], output[1] + 1, (n,), generator=g)
    3. tokens = torch.randint(0, vocab, (sum(prompt_lens),), generator=g), split in request order.
    """
    g = torch.Generator().manual_seed(seed)
    prompt_lens = torch.randint(prompt[0], prompt[1] + 1, (n,), generator=g)
    output_lens = torch.randint(output[0], output[1] + 1, (n,), generator=g)
    tokens = torch.randint(0, vocab, (int(prompt_lens.sum()),), generator=g)
    return [(p.tolist(), int(o)) for p, o in zip(torch.split(tokens, prompt_lens.tolist()), output_lens)]


def public_workload(n=256, lo=100, hi=1024, seed=0, vocab=32000):
    """The public workload: n requests, prompt and output lengths uniform in [lo, hi] (`draw_workload`)."""
    return draw_workload(n, (lo, hi), (lo, hi), seed, vocab)


def cpu_workload(n=64, prompt=(32, 256), output=(64, 128), seed=0, vocab=49152):
    """The CPU side-by-side workload, in SmolLM2's vocabulary (`draw_workload`)."""
    return draw_workload(n, prompt, output, seed, vocab)


def workload_stats(workload):
    """Summary numbers of a workload, for the JSON header."""
    p = [len(ids) for ids, _ in workload]
    o = [out for _, out in workload]
    return {"requests": len(workload), "prompt_tokens": sum(p), "output_tokens": sum(o),
            "prompt_len_range": [min(p), max(p)], "output_len_range": [min(o), max(o)]}
