"""Run every notebook of the book as a test, the way `nbdev-test` does, each in a process of its own.

Each notebook is one pytest test, executed by `nbdev.test.test_nb` in a fresh Python process, so that the memory
one chapter's engines hold goes back to the system before the next chapter starts. Cells flagged with a flag from
`tst_flags` in pyproject.toml (`gpu`, `slow`) are skipped unless named in MINI_VLLM_TEST_FLAGS, e.g.
MINI_VLLM_TEST_FLAGS="gpu slow" on a GPU machine. The run ends with each notebook's time and peak memory
(conftest.py prints them).
"""
import json, subprocess, sys, time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "nbs").glob("*.ipynb") if not p.name.startswith("_"))
RUN_ONE = """
import json, os, resource, sys, torch
from pathlib import Path
# Triton's CPU interpreter must be chosen before anything imports Triton (transformers' from_pretrained does).
if not torch.cuda.is_available(): os.environ.setdefault("TRITON_INTERPRET", "1")
from nbdev.config import get_config
from nbdev.test import test_nb
cfg, force = get_config(Path.cwd()), os.environ.get("MINI_VLLM_TEST_FLAGS", "").split()
skip = [f for f in cfg.tst_flags.split() if f not in force]
ok, secs = test_nb(sys.argv[1], skip_flags=skip, force_flags=force, basepath=cfg.config_path)
peak = lambda who: resource.getrusage(who).ru_maxrss * 1024
Path(sys.argv[2]).write_text(json.dumps([peak(resource.RUSAGE_SELF), peak(resource.RUSAGE_CHILDREN)]))
sys.exit(0 if ok else 1)
"""
RESULTS = []   # (notebook, seconds, peak RSS of its process, peak RSS of the largest process it started), bytes


def test_the_book_has_notebooks():
    # nbdev-test exits 0 when no notebook is eligible: make sure this bridge really found the book.
    assert len(NOTEBOOKS) >= 8, NOTEBOOKS


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook(nb, tmp_path):
    t0, peaks = time.monotonic(), tmp_path / "peak.json"
    r = subprocess.run([sys.executable, "-c", RUN_ONE, str(nb), str(peaks)], cwd=ROOT)
    own, children = json.loads(peaks.read_text()) if peaks.exists() else (0, 0)
    RESULTS.append((nb.stem, time.monotonic() - t0, own, children))
    assert r.returncode == 0, f"{nb.name} failed (its traceback is printed above)"
