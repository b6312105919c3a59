#!/usr/bin/env bash
# Run one chapter as a fresh Colab runtime would: a blank venv holding only torch (Colab's is preinstalled), the
# chapter's notebook alone in an empty folder, its install cell first (added by tools/colab.py), then every other
# code cell in order, with no path leading back to this checkout. The install cell clones the COMMITTED state of
# this repository (MINI_VLLM_REPO=file://...), into a home folder of its own, with an empty model cache.
#   tools/colab_check.sh [nbs/01b_decode.ipynb]      a few minutes; pip reaches PyPI
#   KEEP=1 tools/colab_check.sh ...                  keep the temporary folder to look at afterwards
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
nb="$root/${1:-nbs/01b_decode.ipynb}"
name="$(basename "$nb" .ipynb)"
python="${PYTHON:-python3}"
tmp="$(mktemp -d)"
[ -n "${KEEP:-}" ] && echo "keeping $tmp" || trap 'rm -rf "$tmp"' EXIT

echo "== a blank venv with torch only"
"$python" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q -c "$root/constraints-cpu.txt" torch==2.13.0

echo "== $name.ipynb alone in an empty folder, with its Colab cells"
mkdir "$tmp/work" "$tmp/home"
cp "$nb" "$tmp/work/"
"$python" "$root/tools/colab.py" --nbs "$tmp/work"
"$python" - "$root/tools" "$tmp/work/$name.ipynb" "$tmp/work/_run_$name.py" <<'EOF'
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from run_cells import script                        # the notebook's code cells as one script, flagged cells left out
Path(sys.argv[3]).write_text(script(Path(sys.argv[2]), set()))
EOF

echo "== running its cells (the first one installs the book from file://$root)"
cd "$tmp/work"
# A home of its own: the clone (~/mini-vllm) and the model cache (~/.cache/mini_vllm) start empty.
# pip keeps the caller's configuration and download cache.
env -u PYTHONPATH -u MINI_VLLM_CACHE HOME="$tmp/home" MINI_VLLM_REPO="file://$root" OMP_NUM_THREADS=1 \
    XDG_CONFIG_HOME="${XDG_CONFIG_HOME:-$HOME/.config}" PIP_CACHE_DIR="${PIP_CACHE_DIR:-$HOME/.cache/pip}" \
    "$tmp/venv/bin/python" "_run_$name.py"
echo "== $name.ipynb ran in a fresh venv"
