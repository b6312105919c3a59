"""The host's cost of one small copy to the GPU (chapter 00b's `to_device`), per call, on a CUDA GPU: through the
reused pinned buffer (`Staging`, lists written through numpy) against the values made a tensor and pinned on their
own for each copy (`pin_each`). Lists of 16, 256 and 4,096 ints and a list of two 256-int lists, 2,000 calls each,
two rounds alternating; the pieces of `pin_each` timed alone too. From the repo root:
  python3 benchmarks/to_device_gpu.py > $OUT/to_device.txt
"""
import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch
from mini_vllm.sampling import to_device


def pin_each(values, device, dtype=None):
    "`to_device` as it was before `Staging`: the values made a tensor and pinned on their own for each copy."
    t = torch.as_tensor(values, dtype=dtype)
    return t.pin_memory().to(device, non_blocking=True) if torch.device(device).type == "cuda" else t.to(device)


def per_call_us(fn, n=2000) -> float:
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(n): fn()
    dt = time.perf_counter() - t0
    torch.cuda.synchronize()
    return dt / n * 1e6


def main():
    cases = {"16 ints": list(range(16)), "256 ints": list(range(256)), "4096 ints": list(range(4096)),
             "2 x 256 ints": [list(range(256)), list(range(256))]}
    to_device(cases["16 ints"], "cuda", torch.long); pin_each(cases["16 ints"], "cuda", torch.long)
    print(f"{torch.cuda.get_device_name(0)}, commit {os.environ.get('MINI_VLLM_COMMIT', '?')}; microseconds per call")
    print(f"{'values':14s}{'round':>6s}{'to_device':>11s}{'pin_each':>10s}{'as_tensor':>11s}{'pin_memory':>12s}{'.to':>7s}")
    for r in (1, 2):
        for name, x in cases.items():
            t = torch.as_tensor(x, dtype=torch.long); p = t.pin_memory()
            print(f"{name:14s}{r:>6d}{per_call_us(lambda: to_device(x, 'cuda', torch.long)):>11.1f}"
                  f"{per_call_us(lambda: pin_each(x, 'cuda', torch.long)):>10.1f}"
                  f"{per_call_us(lambda: torch.as_tensor(x, dtype=torch.long)):>11.1f}"
                  f"{per_call_us(lambda: t.pin_memory()):>12.1f}{per_call_us(lambda: p.to('cuda', non_blocking=True)):>7.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
