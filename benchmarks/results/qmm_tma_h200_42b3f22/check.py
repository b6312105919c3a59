import torch
from mini_vllm.quant_kernels import qmm, qmm_tma, _takes_tma, TritonQuantLinear
from mini_vllm.quantization import QuantLinear
torch.manual_seed(0)
for N, K in ((2560, 2048), (2048, 2048), (11264, 2048)):
    lin = torch.nn.Linear(K, N, bias=False).cuda().to(torch.bfloat16)
    ql = QuantLinear(lin, 8)
    for M in (129, 200, 256, 512):
        x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        ref = x.float() @ ql.dequantize().float().T
        a, b = qmm_tma(x, ql.qweight, ql.scales), qmm(x, ql.qweight, ql.scales)
        e = lambda y: ((y.float() - ref).norm() / ref.norm()).item()
        print(N, K, M, "takes_tma", _takes_tma(x, ql.qweight), "rel err tma %.2e qmm %.2e" % (e(a), e(b)), flush=True)
        assert e(a) < 2 * e(b) + 1e-3
print("qmm_tma checked")
