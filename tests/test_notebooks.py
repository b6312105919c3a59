"""Run every notebook of the book as a test, the way `nbdev-test` does.

Each notebook is one pytest test, executed in-process by `nbdev.test.test_nb`. Cells flagged
with a flag from `tst_flags` in pyproject.toml (`gpu`, `slow`) are skipped unless named in
MINI_VLLM_TEST_FLAGS, e.g. MINI_VLLM_TEST_FLAGS="gpu slow" on a GPU machine.
"""
import os
from pathlib import Path

import pytest
import torch

# Triton's CPU interpreter must be chosen before anything imports Triton (transformers' from_pretrained does).
if not torch.cuda.is_available(): os.environ.setdefault("TRITON_INTERPRET", "1")
from nbdev.config import get_config
from nbdev.test import test_nb as run_notebook

CFG = get_config(Path(__file__).resolve().parents[1])
NOTEBOOKS = sorted(p for p in Path(CFG.nbs_path).glob("*.ipynb") if not p.name.startswith("_"))
FORCE = os.environ.get("MINI_VLLM_TEST_FLAGS", "").split()
SKIP = [f for f in CFG.tst_flags.split() if f not in FORCE]


def test_the_book_has_notebooks():
    # nbdev-test exits 0 when no notebook is eligible: make sure this bridge really found the book.
    assert len(NOTEBOOKS) >= 8, NOTEBOOKS


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook(nb):
    ok, secs = run_notebook(nb, skip_flags=SKIP, force_flags=FORCE, basepath=CFG.config_path)
    assert ok, f"{nb.name} failed (its traceback is printed above)"
