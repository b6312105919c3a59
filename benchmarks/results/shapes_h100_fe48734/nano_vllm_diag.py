"nano-vllm alone on the public workload (smoke=False; smoke=True for the smoke test): NANO_VLLM_SRC=.nano python3 THIS"
import faulthandler, sys, os, json, types
faulthandler.dump_traceback_later(75, exit=True)   # a stack dump if it runs past 75 s
sys.path.insert(0, "benchmarks")
import vllm_side_by_side as v
from workload import shape_config_dir
d = shape_config_dir("/tmp/nano_diag", "qwen3_0.6b")
a = types.SimpleNamespace(shape="qwen3_0.6b", smoke=False, dtype="bfloat16", device="cuda")
res = {}
v.child_nano_vllm(str(d), a, res, lambda: None)
print(json.dumps(res, default=str)[:2000])
