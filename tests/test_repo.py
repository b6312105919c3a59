"""The package, the notebooks and the README must agree with what the notebooks generate."""
import shutil, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _copy(tmp):
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp / name)
    for d in ("nbs", "mini_vllm"):
        shutil.copytree(ROOT / d, tmp / d, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    return tmp


def _differing(a: Path, b: Path, pattern: str):
    files = sorted({p.relative_to(a) for p in a.glob(pattern)} | {p.relative_to(b) for p in b.glob(pattern)})
    return [str(f) for f in files if not ((a / f).exists() and (b / f).exists() and (a / f).read_bytes() == (b / f).read_bytes())]


def test_package_equals_notebook_export(tmp_path):
    tmp = _copy(tmp_path)
    shutil.rmtree(tmp / "mini_vllm")
    subprocess.run([BIN / "nbdev-export"], cwd=tmp, check=True, capture_output=True)
    assert not _differing(ROOT / "mini_vllm", tmp / "mini_vllm", "*.py"), "run nbdev-export and commit mini_vllm/"


def test_notebooks_are_clean(tmp_path):
    tmp = _copy(tmp_path)
    subprocess.run([BIN / "nbdev-clean"], cwd=tmp, check=True, capture_output=True)
    assert not _differing(ROOT / "nbs", tmp / "nbs", "*.ipynb"), "run nbdev-clean and commit nbs/"


def test_readme_matches_index_notebook():
    r = subprocess.run([sys.executable, ROOT / "tools" / "make_readme.py", "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_chapters_open_in_colab_and_kaggle():
    r = subprocess.run([sys.executable, ROOT / "tools" / "colab.py", "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
