#!/usr/bin/env bash
# Real vLLM 0.25.1 beside mini_vllm on one H200, in a few calls of at most 9 minutes each, one machine kept between
# them (/tmp survives from call to call). The wheels come from benchmarks/setup_vllm_h200.sh, in .vllm-parts/.
#
#   bash benchmarks/vllm_h200.sh STAGE ...
#
# Stages:
#   env         GPU, driver, Python and package versions into env.txt
#   receive     copy the .vllm-parts/part* (and SHA256SUMS) of this call's tree into /tmp/vllm_parts
#   install     check the parts, put the tar back together, pip install every wheel into /tmp/vsite (--no-deps),
#               check that vllm, its OpenAI server and mini_vllm's server import                       (~1-2 min)
#   offline     benchmarks/vllm_side_by_side.py: vLLM, mini_vllm (one step ahead), then transformers and vLLM at
#               256 sequences while its 480 s budget lasts                                             (~8 min)
#   serve       serve_vllm then serve_mini                                                             (~5-7 min)
#   serve_vllm  vLLM's OpenAI server (--load-format dummy --skip-tokenizer-init), benchmarks/load_test.py's ramp
#   serve_mini  the same ramp against `mini-vllm serve` (load_test.py --tinyllama starts it)
#   rates       serve_vllm then serve_mini with Poisson arrivals at request rates $RATES (default 4,16,64 per second,
#               64 requests each) instead of the closed-loop ramp: load_test_{vllm,mini_vllm}_h200_rates.json    (~5 min)
#   profile     benchmarks/gpu_profile_side_by_side.py, vLLM then mini_vllm, on $PROFILE_N requests (default 256) of
#               the public workload: GPU busy fraction and kernel time by class, profile.json (profile_<shape>.json
#               for another shape)                                                                          (~4 min)
#               (PROFILE_ENGINES="mini" for one of them, or mini-int8/mini-int4 too; PROFILE_LIMIT seconds each,
#               default 270)
# Run from the repo root. Everything for the caller goes under $OUT (default ./vllm_h200_out), at most 8 files per
# call: env.txt, receive.txt, install.log, offline.log, vllm_side_by_side_h200.json, offline_logs.tgz, serve.log,
# load_test_vllm_h200.json, load_test_mini_vllm_h200.json, serve_logs.tgz (whichever stages ran). No vLLM output goes
# through a pipe (its engine-core process outlives its parent and would hold the pipe open): it goes to files, and
# after every vLLM run its process group, then any process left on the GPU, is killed by id.
# Environment: CONC (the ramp's concurrencies, default 1,16,64,256), ENGINES (offline's engines, default
# vllm,mini_vllm,hf,vllm_seqs256, without hf for another shape; mini_vllm_sync is mini_vllm one step at a time), BUDGET (offline's seconds, default
# 480), APPEND=1 (offline keeps the engines of an earlier offline in its JSON), SBS_ARGS (more arguments for
# vllm_side_by_side.py: `--smoke --device cpu` checks the stage on a CPU), MINI_SERVE_ARGS (more arguments for
# `mini-vllm serve`, e.g. --no-async-scheduling: one step at a time), MINI_VLLM_COMMIT, REQS (requests per level of
# the ramp), ONE_PROCESS_TOO=1 (serve_vllm runs the ramp again with every client in one process:
# load_test_vllm_h200_one_process.json), SHAPE (the model's shape for every stage: tinyllama, the default, llama3_8b or
# qwen3_0.6b, workload.SHAPES; a shape other than TinyLlama's adds _<shape> to the names of the results files).
set -u
OUT=${OUT:-$PWD/vllm_h200_out}
PARTS=/tmp/vllm_parts VSITE=/tmp/vsite WORK=/tmp/vllm_work
CONC=${CONC:-1,16,64,256}
SHAPE=${SHAPE:-tinyllama}
LOAD=(--concurrency "$CONC") SUFFIX=""               # the closed-loop ramp; the rates stage sets Poisson arrivals
[ "$SHAPE" != tinyllama ] && SUFFIX=_$SHAPE
NAME=$(python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from workload import SHAPE_NAMES
print(SHAPE_NAMES['$SHAPE'])") || exit 1
[ -n "${REQS:-}" ] && LOAD+=(--requests-per-level "$REQS")
COMMIT=${MINI_VLLM_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
mkdir -p "$OUT" "$PARTS" "$WORK"
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 MINI_VLLM_COMMIT=$COMMIT
export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
[ -d "$VSITE" ] && export PYTHONPATH=$VSITE${PYTHONPATH:+:$PYTHONPATH}
if [ -f "$WORK/vllm_server.pid" ]; then           # a vLLM server an earlier call left running (that call was cut short)
    kill -KILL -- "-$(cat "$WORK/vllm_server.pid")" 2>/dev/null && echo "killed the vLLM server an earlier call left"
    rm -f "$WORK/vllm_server.pid"
fi

gpu_cleanup() {     # end what is left on the GPU (this run's vLLM engine cores: nothing else runs here), by id
    local pids p i
    for i in $(seq 1 10); do
        pids=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' ')
        [ -z "$pids" ] && return 0
        sleep 1
    done
    for p in $pids; do kill -9 "$p" 2>/dev/null && echo "killed leftover GPU process $p"; done
}

stop_group() {      # stop_group PID: SIGTERM to its process group, SIGKILL after 15 s
    local pid=$1 i
    kill -TERM -- "-$pid" 2>/dev/null
    for i in $(seq 1 15); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 1; done
    kill -KILL -- "-$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    gpu_cleanup
}

model_dir() {       # the shape's config.json (and generation_config.json), no tokenizer
    python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from workload import shape_config_dir
print(shape_config_dir('$WORK/$SHAPE', '$SHAPE'))"
}

wait_health() {     # wait_health URL PID SECONDS: 0 once URL/health answers 200, 1 if PID died or time ran out
    python3 - "$@" <<'EOF'
import os, sys, time, urllib.request
url, pid, limit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
t0 = time.time()
while time.time() - t0 < limit:
    try: state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError: state = "gone"
    if state in ("Z", "X", "gone"): print("server exited"); sys.exit(1)      # a zombie too: bash has not reaped it
    try:
        if urllib.request.urlopen(url + "/health", timeout=2).status == 200:
            print(f"server up in {time.time() - t0:.0f} s"); sys.exit(0)
    except Exception: pass
    time.sleep(1)
print(f"no answer in {limit:.0f} s"); sys.exit(1)
EOF
}

serve_vllm() {
    local port=8011 md t0=$SECONDS
    mkdir -p "$WORK/serve"; md=$(model_dir)
    # a session of its own, so that the engine core it starts goes with the group; output to a file, never a pipe
    setsid python3 -m vllm.entrypoints.openai.api_server --model "$md" --served-model-name "${NAME,,}-dummy" \
        --load-format dummy --skip-tokenizer-init --dtype bfloat16 --host 127.0.0.1 --port $port \
        --disable-uvicorn-access-log > "$WORK/serve/vllm_server.log" 2>&1 < /dev/null &
    local spid=$!
    echo $spid > "$WORK/vllm_server.pid"                 # for a later call, should this one be cut short
    if wait_health "http://127.0.0.1:$port" $spid 180; then
        timeout -s TERM 240 python3 benchmarks/load_test.py --url "http://127.0.0.1:$port" --prompt-mode ids \
            --label vllm_h200$SUFFIX "${LOAD[@]}" --input-len 512 --output-len 256 --max-seconds-per-level 30 \
            --warmup 256 --title "vLLM 0.25.1, $NAME config, dummy bf16 weights: prompts 512 tokens, outputs 256, streaming" \
            --out "$WORK/serve" > "$WORK/serve/load_test_vllm.log" 2>&1
        echo "[serve_vllm] load test rc=$?"
        if [ -n "${ONE_PROCESS_TOO:-}" ]; then   # the same levels again, every client in one process
            timeout -s TERM 120 python3 benchmarks/load_test.py --url "http://127.0.0.1:$port" --prompt-mode ids \
                --label vllm_h200_one_process$SUFFIX "${LOAD[@]}" --input-len 512 --output-len 256 \
                --max-seconds-per-level 30 --warmup 0 --clients-per-process 100000 --out "$WORK/serve" \
                > "$WORK/serve/load_test_vllm_one_process.log" 2>&1
            echo "[serve_vllm] one-process load test rc=$?"
            cp "$WORK/serve/load_test_vllm_h200_one_process$SUFFIX.json" "$OUT/" 2>/dev/null
            tail -4 "$WORK/serve/load_test_vllm_one_process.log"
        fi
    else
        tail -30 "$WORK/serve/vllm_server.log"
    fi
    stop_group $spid; rm -f "$WORK/vllm_server.pid"
    cp "$WORK/serve/load_test_vllm_h200$SUFFIX.json" "$OUT/" 2>/dev/null
    grep -v "^server up" "$WORK/serve/load_test_vllm.log" 2>/dev/null | tail -8
    echo "[serve_vllm] $((SECONDS - t0)) s"
}

serve_mini() {      # load_test.py starts `mini-vllm serve` itself (its own process) and stops it at the end
    local t0=$SECONDS
    mkdir -p "$WORK/serve"
    timeout -s TERM 240 python3 benchmarks/load_test.py --shape "$SHAPE" --prompt-mode ids --label mini_vllm_h200$SUFFIX \
        "${LOAD[@]}" --input-len 512 --output-len 256 --max-seconds-per-level 30 --warmup 256 \
        --out "$WORK/serve" -- --dtype bfloat16 --attention-backend triton ${MINI_SERVE_ARGS:-} > "$WORK/serve/load_test_mini.log" 2>&1
    echo "[serve_mini] load test rc=$?"
    gpu_cleanup
    cp "$WORK/serve/load_test_mini_vllm_h200$SUFFIX.json" "$OUT/" 2>/dev/null
    tail -8 "$WORK/serve/load_test_mini.log"
    echo "[serve_mini] $((SECONDS - t0)) s"
}

serve_both() {      # serve_vllm, then serve_mini if it still fits in this call (it takes about 2 minutes)
    serve_vllm
    if [ $SECONDS -lt 330 ]; then serve_mini; else echo "[$1] $SECONDS s gone: run serve_mini in a call of its own"; fi
    serve_summary
}

serve_summary() {   # both ramps side by side, and the logs and plots in one file
    python3 - "$WORK/serve" "$SUFFIX" <<'EOF'
import json, sys
from pathlib import Path
d, suffix = Path(sys.argv[1]), sys.argv[2]; runs = {}
for label in ("vllm_h200", "mini_vllm_h200"):
    f = d / f"load_test_{label}{suffix}.json"
    if f.exists():
        runs[label] = {r.get("concurrency", r.get("request_rate")): r for r in json.loads(f.read_text())["levels"]}
keys = [("output_tok_per_s", "tok/s"), ("ttft_p50_ms", "TTFT50"), ("ttft_p99_ms", "TTFT99"), ("tpot_p50_ms", "TPOT50"),
        ("itl_p50_ms", "ITL50"), ("mean_tokens_per_chunk", "tok/chunk"), ("failed", "failed")]
print("load  " + "  ".join(f"{l[:4]}:{h:>9}" for l in runs for _, h in keys))
for c in sorted({c for r in runs.values() for c in r}, key=float):
    print(f"{c:>4}  " + "  ".join(f"{str(runs[l].get(c, {}).get(k, '-')):>14}" for l in runs for k, _ in keys))
EOF
    (cd "$WORK/serve" && tar czf "$OUT/serve_logs$SUFFIX.tgz" --exclude='*.json' .)
}

for s in "$@"; do case $s in
env)
    { echo "commit $COMMIT"; date -u; nvidia-smi; nproc; free -g; df -h /tmp
      python3 -c "import sys, torch, triton, transformers; print(sys.version); print('torch', torch.__version__, 'triton',
triton.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))"; } >> "$OUT/env.txt" 2>&1
    tail -3 "$OUT/env.txt" ;;
receive)
    ls .vllm-parts/part* >/dev/null 2>&1 || echo "no .vllm-parts/part* in this call's tree"
    for f in .vllm-parts/part* .vllm-parts/SHA256SUMS; do [ -f "$f" ] && cp "$f" "$PARTS/"; done
    { echo "$(date -u) parts here:"; ls -l "$PARTS"
      [ -f "$PARTS/SHA256SUMS" ] && (cd "$PARTS" && sha256sum -c --ignore-missing SHA256SUMS); } > "$OUT/receive.txt" 2>&1
    have=$(ls "$PARTS"/part* 2>/dev/null | wc -l); want=$(grep -c part "$PARTS/SHA256SUMS" 2>/dev/null)
    echo "[receive] $have of $want parts in $PARTS: $(cd "$PARTS" && ls part* 2>/dev/null | tr '\n' ' ')"
    grep -i "fail" "$OUT/receive.txt" ;;
install)
    t0=$SECONDS
    if ! (cd "$PARTS" && sha256sum -c --quiet SHA256SUMS) > "$OUT/install.log" 2>&1; then
        echo "[install] parts missing or damaged:"; cat "$OUT/install.log"; exit 1
    fi
    rm -rf /tmp/vllm_wheels && mkdir -p /tmp/vllm_wheels && cat "$PARTS"/part* | tar -xf - -C /tmp/vllm_wheels
    echo "[install] $(ls /tmp/vllm_wheels/*.whl | wc -l) wheels"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$VSITE" \
        /tmp/vllm_wheels/*.whl >> "$OUT/install.log" 2>&1 || { echo "[install] pip failed:"; tail -20 "$OUT/install.log"; exit 1; }
    rm -rf /tmp/vllm_wheels
    export PYTHONPATH=$VSITE${PYTHONPATH:+:$PYTHONPATH}
    # imports only: no engine is built, so no engine-core process is left behind
    timeout 240 python3 - >> "$OUT/install.log" 2>&1 <<'EOF'
import importlib.metadata as md, re, sys
import vllm
print("vllm", vllm.__version__, "from", vllm.__file__)
from vllm import LLM, SamplingParams
import vllm.entrypoints.openai.api_server, vllm.v1.engine.core, vllm.v1.worker.gpu_model_runner
import vllm.model_executor.models.llama, vllm.v1.attention.backends.flash_attn
import mini_vllm.serve.server, fastcore
print("imports ok: vllm.LLM, its OpenAI server, engine core, GPU runner, flash-attn backend; mini_vllm.serve.server")
try:
    from vllm.vllm_flash_attn.flash_attn_interface import fa_version_unsupported_reason as why
    print("flash-attn 3 here:", why(3) or "supported", "; 2:", why(2) or "supported")
except Exception as e: print("flash-attn check failed:", repr(e))
# Requires-Dist of what was installed that is found nowhere (declared by vLLM but left out on purpose, or a gap)
from packaging.requirements import Requirement
have = {re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(): d.version for d in md.distributions()}
for d in md.distributions(path=["/tmp/vsite"]):
    for line in d.requires or []:
        r = Requirement(line)
        if r.marker and ("extra" in str(r.marker) or not r.marker.evaluate()): continue
        n = re.sub(r"[-_.]+", "-", r.name).lower()
        if n not in have: print(f"not installed: {d.metadata['Name']} needs {r}")
        elif r.specifier and not r.specifier.contains(have[n], prereleases=True):
            print(f"other version: {d.metadata['Name']} needs {r}, have {have[n]}")
EOF
    rc=$?
    grep -E "^vllm |imports ok|flash-attn|Error|error" "$OUT/install.log" | head -20
    echo "[install] rc=$rc $((SECONDS - t0)) s (full report in install.log)" ;;
offline)
    t0=$SECONDS
    gpu_cleanup
    timeout -s TERM 540 python3 benchmarks/vllm_side_by_side.py --out "$WORK/offline" --budget "${BUDGET:-480}" \
        ${ENGINES:+--engines "$ENGINES"} --shape "$SHAPE" ${APPEND:+--append} ${SBS_ARGS:-} \
        > "$OUT/offline$SUFFIX.log" 2>&1
    echo "[offline] rc=$? $((SECONDS - t0)) s"
    gpu_cleanup
    cp "$WORK/offline/vllm_side_by_side_h200$SUFFIX.json" "$OUT/" 2>/dev/null
    (cd "$WORK/offline" && tar czf "$OUT/offline_logs$SUFFIX.tgz" _*) 2>/dev/null
    grep -E "tok/s|ms/token|done in|skipped|error|_over_" "$OUT/offline$SUFFIX.log" | cut -c1-160 ;;
profile)    # each engine in a process of its own; vLLM's engine core runs inside it (no engine-core process left)
    t0=$SECONDS
    for e in ${PROFILE_ENGINES:-vllm mini}; do
        gpu_cleanup
        timeout -s KILL "${PROFILE_LIMIT:-270}" python3 benchmarks/gpu_profile_side_by_side.py $e "${PROFILE_N:-256}" "$SHAPE" \
            > "$WORK/profile_$e$SUFFIX.log" 2>&1
        echo "[profile] $e rc=$? $((SECONDS - t0)) s"
    done
    python3 - "$WORK" "$SUFFIX" "$OUT/profile$SUFFIX.json" <<'EOF'
import json, sys
from pathlib import Path
work, suffix, dest = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]); res = {}
for e in ("vllm", "mini", "mini-int8", "mini-int4"):
    if not (work / f"profile_{e}{suffix}.log").exists(): continue
    text = (work / f"profile_{e}{suffix}.log").read_text(errors="replace")
    try: res[e] = json.JSONDecoder().raw_decode(text[text.rindex('{\n"engine"'):])[0]   # log lines may follow
    except ValueError: res[e] = dict(error="no JSON", log_tail=text[-3000:])
    r = res[e]
    print(e, {k: r.get(k) for k in ("tok_s_unprofiled", "seconds_profiled", "gpu_busy_fraction", "ms_by_class", "error")})
dest.write_text(json.dumps(res, indent=1))
EOF
    ;;
serve) serve_both serve > "$OUT/serve$SUFFIX.log" 2>&1; cat "$OUT/serve$SUFFIX.log" ;;
serve_vllm) { serve_vllm; serve_summary; } > "$OUT/serve$SUFFIX.log" 2>&1; cat "$OUT/serve$SUFFIX.log" ;;
serve_mini) { serve_mini; serve_summary; } > "$OUT/serve$SUFFIX.log" 2>&1; cat "$OUT/serve$SUFFIX.log" ;;
rates)      # the same servers under Poisson arrivals (vLLM's benchmark_serving shape), 64 requests per rate
    LOAD=(--request-rate "${RATES:-4,16,64}" --requests-per-level 64) SUFFIX=${SUFFIX}_rates
    serve_both rates > "$OUT/rates$SUFFIX.log" 2>&1; cat "$OUT/rates$SUFFIX.log" ;;
*) echo "unknown stage $s (env receive install offline serve serve_vllm serve_mini rates profile)" ;;
esac; done
ls -la "$OUT"
