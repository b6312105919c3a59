#!/usr/bin/env bash
# Wheels for real vLLM 0.25.1 on the H200 image (Python 3.12, torch 2.11, triton 3.6, transformers 5.17 already
# there), fetched on a machine with PyPI access and sent over in parts, since the H200 machine reaches no registry.
# vLLM 0.25.1 pins torch 2.11, the image's own, so only what the image lacks is brought, installed there with
# `--no-deps` by `benchmarks/vllm_h200.sh install`. Run from the repo root:
#
#   bash benchmarks/setup_vllm_h200.sh
#
# 1. downloads into .vllm-wheels/: with --no-deps vLLM itself and the packages that would drag in torch or CUDA
#    libraries; with their dependencies the rest of what vLLM's engine and OpenAI server import, and what
#    `mini-vllm serve` needs (fastcore, fastapi, uvicorn);
# 2. deletes every wheel of a package the image already has (IMAGE below) and keeps one version per package;
# 3. checks the closure: every Requires-Dist of every kept wheel (no extras, markers for CPython 3.12 on x86-64
#    Linux) is in the image or kept, with the version asked for where the version is known. What vLLM declares but
#    never imports for a dense model on one GPU (flashinfer, tilelang, cutlass-dsl and other kernel packages,
#    video/audio codecs, anthropic, mcp, opentelemetry) is left out on purpose: SKIP below;
# 4. packs the wheels into one tar, split into parts of at most PART_BYTES (46 MB) in .vllm-parts/ (part00, ...),
#    with SHA256SUMS beside them.
set -euo pipefail
cd "$(dirname "$0")/.."
W=${VLLM_WHEELS:-.vllm-wheels}
P=${VLLM_PARTS:-.vllm-parts}
PART_BYTES=${PART_BYTES:-46000000}   # a part + the tree (12.6 MiB on disk) under 64 MiB

PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp)
for n in 39 38 37 36 35 34 33 32 31 30 29 28 27 26 25 24 17 12 5; do PLAT+=(--platform "manylinux_2_${n}_x86_64"); done
PLAT+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)

# Without their dependencies: each asks for torch (or CUDA wheels) that the image has in the right version.
NODEPS=(vllm==0.25.1 compressed-tensors==0.17.0 "xgrammar>=0.2.1,<1.0.0")
# With their dependencies (one resolver run, so one version of each); the version bounds are vLLM 0.25.1's own.
WITHDEPS=("pydantic>=2.12.0" msgspec "pyzmq>=25.0.0" cbor2 blake3 cachetools "openai>=2.0.0" gguf depyf==0.20.0
          partial-json-parser setproctitle pybase64 ijson diskcache==5.6.3 lark==1.2.2 watchfiles python-json-logger
          "openai-harmony>=0.0.3" "mistral_common[image]>=1.11.5" "jsonschema>=4.23.0" "fastapi[standard]>=0.133.0,<0.137.0"
          "starlette>=1.0.1" "prometheus-fastapi-instrumentator>=8.0.0" "llguidance>=1.7.0,<1.8.0" outlines_core==0.2.14
          lm-format-enforcer==0.11.3 uvicorn loguru "apache-tvm-ffi>=0.1.11" sse-starlette
          "model-hosting-container-standards>=0.1.14,<1.0.0" jmespath supervisor fastcore python-multipart)

rm -rf "$W" "$P"; mkdir -p "$W" "$P"
echo "downloading (no deps): ${NODEPS[*]}"
python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$W" "${NODEPS[@]}" 2>&1 | grep -v "^WARNING: Location" || true
echo "downloading (with deps): ${WITHDEPS[*]}"
python3 -m pip download -q "${PLAT[@]}" -d "$W" "${WITHDEPS[@]}" 2>&1 | grep -v "^WARNING: Location" || true

# vLLM's wheel less three things this Python and GPU never load: the Rust front end (run only with
# VLLM_USE_RUST_FRONTEND=1), MiniMax-M3's Blackwell-only attention sources (third_party/fmha_sm100), and DeepGEMM's
# extension built for Python 3.13 and 3.14. 19 MB less, so 6 parts instead of 7. VLLM_STRIP=0 keeps the wheel whole.
if [ "${VLLM_STRIP:-1}" = 1 ]; then
    vw=$(realpath "$W"/vllm-0.25.1-*.whl)
    re='^vllm/(vllm-rs|third_party/fmha_sm100/|third_party/deep_gemm/_C\.cpython-31[34]-)'
    zip -q -d "$vw" 'vllm/vllm-rs' 'vllm/third_party/fmha_sm100/*' 'vllm/third_party/deep_gemm/_C.cpython-313-*' \
        'vllm/third_party/deep_gemm/_C.cpython-314-*'
    t=$(mktemp -d)
    (cd "$t" && unzip -q "$vw" vllm-0.25.1.dist-info/RECORD && grep -Ev "$re" vllm-0.25.1.dist-info/RECORD > R \
        && mv R vllm-0.25.1.dist-info/RECORD && zip -q "$vw" vllm-0.25.1.dist-info/RECORD)
    rm -rf "$t"
    if unzip -Z1 "$vw" | grep -Eq "$re"; then echo "stripping vLLM's wheel failed"; exit 1; fi
fi

W="$W" python3 - <<'EOF'
"""Prune the wheels the image has, keep one version per package, check the dependency closure."""
import os, re, sys, zipfile
from email.parser import Parser
from pathlib import Path
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

# The H200 image's Python packages, as listed there on 2026-11-17 (names only).
IMAGE = """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools
formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna
imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver
lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe
matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals
networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13
nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft
pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments
pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers
statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm
tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope
triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl
zipp""".split()
IMAGE = {canonicalize_name(n) for n in IMAGE}
# Versions seen there (pip list), to check version bounds against; the others are taken as satisfying.
IMAGE_VERSIONS = {"torch": "2.11.0", "triton": "3.6.0", "transformers": "5.17.0", "tokenizers": "0.23.2",
                  "numpy": "2.5.2", "safetensors": "0.8.0", "huggingface-hub": "1.33.0", "tiktoken": "0.14.0",
                  "sentencepiece": "0.2.2", "torchvision": "0.26.0", "torchaudio": "2.11.0"}
# Declared by vLLM 0.25.1 (or a dependency) but not imported on the path measured here: kernels for other models,
# GPUs or features (flashinfer is off: VLLM_USE_FLASHINFER_SAMPLER=0), media codecs, other APIs, tracing.
SKIP = {canonicalize_name(n) for n in """flashinfer-python flashinfer-cubin tilelang nvidia-cudnn-frontend nvtx
fastsafetensors nvidia-cutlass-dsl quack-kernels tokenspeed-mla humming-kernels torchcodec pynvvideocodec anthropic
mcp opentelemetry-sdk opentelemetry-api opentelemetry-exporter-otlp opentelemetry-semantic-conventions-ai""".split()}

wdir = Path(os.environ["W"])
wheels = {}
for f in sorted(wdir.glob("*.whl")):
    name, ver, *_ = parse_wheel_filename(f.name)
    wheels.setdefault(canonicalize_name(name), []).append((ver, f))
removed, dupes = [], []
for name, vs in sorted(wheels.items()):
    if name in IMAGE:
        for _, f in vs: f.unlink()
        removed.append(name); continue
    vs.sort()
    for _, f in vs[:-1]: f.unlink(); dupes.append(f.name)   # keep the newest version only
    wheels[name] = vs[-1]
wheels = {n: v for n, v in wheels.items() if n not in IMAGE}
print(f"removed {len(removed)} packages the image has: {' '.join(removed)}")
if dupes: print("older versions removed:", " ".join(dupes))

env = default_environment()
env.update(python_version="3.12", python_full_version="3.12.3", implementation_name="cpython",
           platform_python_implementation="CPython", sys_platform="linux", platform_system="Linux",
           platform_machine="x86_64", os_name="posix", extra="")
missing, wrong, skipped = [], [], set()
for name, (ver, f) in sorted(wheels.items()):
    with zipfile.ZipFile(f) as z:
        meta = Parser().parsestr(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode())
    for line in meta.get_all("Requires-Dist") or []:
        r = Requirement(line)
        if r.marker and ("extra" in str(r.marker) or not r.marker.evaluate(env)): continue
        dep = canonicalize_name(r.name)
        if dep in SKIP: skipped.add(dep); continue
        if dep in wheels:
            have = wheels[dep][0]
        elif dep in IMAGE:
            if dep not in IMAGE_VERSIONS: continue
            have = IMAGE_VERSIONS[dep]
        else:
            missing.append(f"{name} {ver} needs {r}"); continue
        if r.specifier and not r.specifier.contains(str(have), prereleases=True):
            wrong.append(f"{name} {ver} needs {r}, have {dep} {have}")
print(f"left out on purpose (declared, not imported here): {' '.join(sorted(skipped))}")
for m in missing: print("MISSING:", m)
for m in wrong: print("VERSION:", m)
print(f"closure: {len(wheels)} wheels, {len(missing)} missing, {len(wrong)} version mismatches")
sys.exit(1 if missing else 0)
EOF

n=$(ls "$W"/*.whl | wc -l)
tar -cf - -C "$W" . | split -b "$PART_BYTES" -d -a 2 - "$P/part"
(cd "$P" && sha256sum part* > SHA256SUMS)
echo "$n wheels, $(du -cb "$W"/*.whl | tail -1 | cut -f1) bytes; $(ls "$P"/part* | wc -l) parts in $P:"
ls -l "$P"
