# The patched gemv (rows_dot_per_chunk.diff applied) against fp32 references under Triton's CPU interpreter: bf16,
# int8 and int4 weights, one and two input rows, one and four chunks of K. From the repo root, the patch applied:
#   python benchmarks/results/rows_dot_per_chunk/check_patch.py
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from mini_vllm import small_batch as sb
from mini_vllm.quantization import QuantLinear
torch.manual_seed(0)
worst = 0
for fmt in ("bf16", "int8", "int4"):
    for M in (1, 2):
        for (N, K, bk) in ((64, 256, 64), (32, 512, 128), (48, 256, 256)):
            lin = torch.nn.Linear(K, N, bias=False, dtype=torch.float32)
            x = torch.randn(M, K)
            if fmt == "bf16":
                y = sb.gemv(x, lin.weight.detach(), block_n=4, block_k=bk, num_warps=4)
                ref = x @ lin.weight.detach().T
            else:
                q = QuantLinear(lin, 8 if fmt == "int8" else 4, 64, True)
                y = sb.gemv(x, q.qweight, scales=q.scales, zeros=q.zeros, group_size=q.group_size, block_n=4,
                            block_k=bk, num_warps=4)
                ref = x @ q.dequantize(torch.float32).T
            err = ((y.float() - ref).abs().max() / ref.abs().max()).item()
            worst = max(worst, err)
            print(fmt, M, N, K, bk, f"{err:.1e}")
print("worst", worst)
