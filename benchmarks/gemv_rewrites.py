"""Two conversions of chapter 05's integer weights inside 04i's GEMV, counted by `sass_gemv.py --rewrite` and timed
here in the engine at batch 1, not kept in the book:
  int8_prmt  int8 bytes moved into floats four at a time, one `prmt` each (inline PTX), instead of the compiler's
             extraction and logic: the same fp32 values
  int4_ffma  int4 weights dequantized by one multiply-add from the float f = 1 + q/16: (q - 8) s = 16 s f - 24 s, exact
             for bf16 scales, instead of a subtraction and a multiplication
On a CUDA GPU, one engine a process (Triton keys its cache on the code it first compiled), dummy weights from seed 0:
  python3 benchmarks/gemv_rewrites.py --out DIR --shape llama3_8b --quantization int8 [--rewrite int8_prmt]
writes DIR/<shape>_<quantization>_<rewrite>.json: batch-1 ms/token (128-token prompt, 512 greedy tokens, as
gpu_bench.py's batch1) and the tokens, which a rewrite must leave unchanged.
"""
import argparse, json, os, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1])); sys.path.insert(0, str(Path(__file__).resolve().parent))
import triton, triton.language as tl
from mini_vllm import small_batch as sb


@triton.jit
def _int8_weights_prmt(w):
    "Int8 weights as fp32: four bytes at a time, each byte (top bit flipped) put into the mantissa of 2^23 by a prmt."
    u = tl.inline_asm_elementwise(
        asm="""{
        .reg .b32 t, m;
        mov.b32 m, 0x4B000000;
        xor.b32 t, $4, 0x80808080;
        prmt.b32 $0, t, m, 0x7440;
        prmt.b32 $1, t, m, 0x7441;
        prmt.b32 $2, t, m, 0x7442;
        prmt.b32 $3, t, m, 0x7443;
        }""", constraints="=r,=r,=r,=r,r", args=[w], dtype=tl.int32, is_pure=True, pack=4)
    return u.to(tl.float32, bitcast=True) - 8388736.0


@triton.jit
def _int4_weights_ffma(w, s_ptr, z_ptr, n, nm, k0, K, GROUP: tl.constexpr, HAS_ZERO: tl.constexpr, BLOCK_K: tl.constexpr):
    "As 05's _int4_weights, each weight one multiply-add from f = 1 + q/16: (q - 8) s = 16 s f - 24 s."
    s = sb._per_byte(s_ptr, n, nm, k0, K, GROUP, BLOCK_K)
    b, c = w.to(tl.int32), s * -24.0
    if HAS_ZERO: c = c + sb._per_byte(z_ptr, n, nm, k0, K, GROUP, BLOCK_K)
    lo = ((b & 15) << 19 | 0x3F800000).to(tl.float32, bitcast=True)
    hi = ((b & 240) << 15 | 0x3F800000).to(tl.float32, bitcast=True)
    return lo * (s * 16.0) + c, hi * (s * 16.0) + c


def apply(name: str) -> str:
    "Put a rewrite in place of 05's conversion (before anything is compiled); returns its name."
    if name == "int8_prmt": sb._int8_weights = _int8_weights_prmt
    elif name == "int4_ffma": sb._int4_weights = _int4_weights_ffma
    elif name != "none": raise ValueError(f"rewrite must be none, int8_prmt or int4_ffma, got {name!r}")
    return name


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--shape", default="tinyllama", choices=("tinyllama", "llama3_8b"))
    p.add_argument("--quantization", required=True, choices=("int8", "int4"))
    p.add_argument("--rewrite", default="none", choices=("none", "int8_prmt", "int4_ffma"))
    args = p.parse_args()
    apply(args.rewrite)
    import torch
    from mini_vllm import LLM, SamplingParams
    from workload import LLAMA3_8B_CONFIG, tinyllama_config_dir
    cfg = tinyllama_config_dir(Path(tempfile.mkdtemp()) / args.shape,
                               config=LLAMA3_8B_CONFIG if args.shape == "llama3_8b" else None)
    torch.manual_seed(0)
    llm = LLM(cfg, dtype="bf16", load_format="dummy", attention_backend="triton", max_num_seqs=8, max_model_len=2048,
              quantization=args.quantization, seed=0)
    prompt = torch.randint(0, 32000, (128,), generator=torch.Generator().manual_seed(1)).tolist()
    run = lambda n: llm.generate([prompt], SamplingParams(temperature=0, max_tokens=n, ignore_eos=True), use_tqdm=False)
    run(64); run(1)                                                    # warm-up; the prompt then from the prefix cache
    t = {}
    for n in (1, 513):
        torch.cuda.synchronize(); t0 = time.perf_counter(); out = run(n); torch.cuda.synchronize()
        t[n] = time.perf_counter() - t0
    res = dict(shape=args.shape, quantization=args.quantization, rewrite=args.rewrite, gpu=torch.cuda.get_device_name(0),
               commit=os.environ.get("MINI_VLLM_COMMIT"), ms_per_token=(t[513] - t[1]) / 512 * 1e3,
               tokens=out[0].outputs[0].token_ids)
    print(f"{args.shape} {args.quantization} {args.rewrite}: {res['ms_per_token']:.3f} ms/token", flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / f"{args.shape}_{args.quantization}_{args.rewrite}.json").write_text(json.dumps(res))


if __name__ == "__main__":
    main()
