"""The host's time in the pieces of the overlapped loop's steps (chapter 04k) on a CUDA GPU, 320 requests of the
public workload's draw, TinyLlama-1.1B shape, dummy bf16: each function below wrapped with a timer, 400 engine steps
from the 100th (the batch full), calls and milliseconds per function. Then, with a wait after each launch, the GPU
time of steps on the device path. From the repo root:
  PYTHONPATH=/tmp/site python3 benchmarks/experiments/host_pieces_gpu.py > $OUT/host_pieces.txt
"""
import sys, tempfile, time, json
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent), str(HERE)]   # repo root, benchmarks/, here
import torch, triton
import mini_vllm.fast.cuda_graphs as cg, mini_vllm.model_runner as mr
import mini_vllm.paged_attention as pa, mini_vllm.fast.triton_attention as ta
from mini_vllm.model import LlamaDecoderLayer
import mini_vllm.sampling as sm
from mini_vllm import LLM, SamplingParams
from workload import public_workload, tinyllama_config_dir
T = {}; ON = [False]
def wrap(owner, name, key=None):
    fn = getattr(owner, name); key = key or f"{getattr(owner,'__name__',type(owner).__name__)}.{name}"
    def w(*a, **k):
        if not ON[0]: return fn(*a, **k)
        t = time.perf_counter()
        try: return fn(*a, **k)
        finally:
            e = T.setdefault(key, [0, 0.0]); e[0] += 1; e[1] += time.perf_counter() - t
    setattr(owner, name, w)
cfg = tinyllama_config_dir(Path(tempfile.mkdtemp()) / "tl")
llm = LLM(cfg, dtype="bfloat16", load_format="dummy", attention_backend="triton", max_num_seqs=256, max_model_len=2048,
          max_num_batched_tokens=16384, async_scheduling=True)
eng = llm.llm_engine; core = eng.core; run = core.runner
print(type(run).__name__, type(run.model).__name__)
warm = public_workload(n=64)
llm.generate([q for q, _ in warm], SamplingParams(temperature=0, max_tokens=64, ignore_eos=True), use_tqdm=False)
wrap(mr.ModelRunner, "prepare"); wrap(pa.AttentionMetadata, "build"); wrap(mr.ModelRunner, "forward_sample")
wrap(mr.ModelRunner, "logits", "ModelRunner.logits(eager)")
wrap(pa, "block_table_tensor"); wrap(sm.SamplingTensors, "from_params"); wrap(sm, "to_device")
wrap(ta.TritonPagedAttention, "__init__", "TPA.__init__"); wrap(ta.TritonPagedAttention, "_attend")
wrap(LlamaDecoderLayer, "forward", "layer.forward"); wrap(triton.runtime.jit.JITFunction, "run", "triton.run")
wrap(torch.nn.Linear, "forward", "Linear.forward"); wrap(cg.CUDAGraphRunner, "_grow_tables")
wrap(core, "_launch", "launch"); wrap(core.scheduler, "schedule", "schedule"); wrap(mr.ModelRunner, "collect", "collect")
wrap(type(run.model), "compute_logits")
work = public_workload(n=320)
for p, n in work: eng.add_request(p, SamplingParams(temperature=0, max_tokens=n, ignore_eos=True))
for _ in range(100): eng.step()
torch.cuda.synchronize()
hosts = []                                       # per launch after the first: True when the host prepared it
orig_advance = core.advance                      # 04h's device path; None: the host's
def spy(last, out):
    r = orig_advance(last, out); hosts.append(r is None); return r
core.advance = spy
ON[0] = True; t0 = time.perf_counter(); n = 0
while n < 400 and eng.has_unfinished_requests(): eng.step(); n += 1
torch.cuda.synchronize(); dt = time.perf_counter() - t0; ON[0] = False
print(f"{n} steps {dt*1e3:.1f} ms, host-path steps {sum(hosts)}")
for k, (c, s) in sorted(T.items(), key=lambda kv: -kv[1][1]): print(f"{k:40s} calls {c:6d} total {s*1e3:9.1f} ms  per call {s/c*1e6:8.1f} us")
# GPU time of one mixed step: sync, launch a host-path step, sync
ON[0] = False
gpu = []
for _ in range(200):
    if not eng.has_unfinished_requests(): break
    out = core.scheduler.schedule()                # OverlappedEngineCore.step, with a wait after the launch
    if not out.requests: break
    n_host = len(hosts)
    torch.cuda.synchronize(); a = time.perf_counter()
    launched = core._launch(out); b = time.perf_counter()
    torch.cuda.synchronize(); c = time.perf_counter()
    dev = len(hosts) > n_host and not hosts[-1]
    core.scheduler.launched(out); done = core._drain(); core.in_flight = (out, launched)
    _, ends = eng.output_processor.process(done)
    if ends: eng._finish(ends)
    gpu.append((dev, len(out.requests), sum(out.num_new_tokens), round((b-a)*1e3, 3), round((c-a)*1e3, 3)))
print("host-path steps synced (batch, tokens, launch host ms, launch->done ms):", [g[1:] for g in gpu if not g[0]][:20])
print("device-path steps synced mean launch host / done ms:",
      sum(g[3] for g in gpu if g[0]) / max(1, sum(g[0] for g in gpu)), sum(g[4] for g in gpu if g[0]) / max(1, sum(g[0] for g in gpu)))
