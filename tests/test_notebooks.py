"""Run every notebook of the book as a test, the way `nbdev-test` does, each in a process of its own.

Each notebook is one pytest test, executed by `nbdev.test.test_nb` in a fresh Python process, so that the memory
one chapter's engines hold goes back to the system before the next chapter starts. Cells flagged with a flag from
`tst_flags` in pyproject.toml (`gpu`, `slow`) are skipped unless named in MINI_VLLM_TEST_FLAGS, e.g.
MINI_VLLM_TEST_FLAGS="gpu slow" on a GPU machine. The run ends with each notebook's time and peak memory
(conftest.py prints them).

The selected notebooks run MINI_VLLM_TEST_WORKERS at a time (by default as many as the machine has cores, at
most 2; one where the flags name `gpu`, so that two notebooks never share a GPU), each then with one torch thread
(OMP_NUM_THREADS=1): two processes of two threads each on two cores slow each other down many times over, and
Triton's CPU interpreter, much of the suite's time, runs on one thread. A notebook's output is printed by its
test, after it ends. MINI_VLLM_TEST_WORKERS=1: one at a time, the output as it comes.
"""
import os, subprocess, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "nbs").glob("*.ipynb") if not p.name.startswith("_"))
RUN_ONE = """
import os, sys, torch
from pathlib import Path
# Triton's CPU interpreter must be chosen before anything imports Triton (transformers' from_pretrained does).
if not torch.cuda.is_available(): os.environ.setdefault("TRITON_INTERPRET", "1")
from nbdev.config import get_config
from nbdev.test import test_nb
cfg, force = get_config(Path.cwd()), os.environ.get("MINI_VLLM_TEST_FLAGS", "").split()
skip = [f for f in cfg.tst_flags.split() if f not in force]
ok, secs = test_nb(sys.argv[1], skip_flags=skip, force_flags=force, basepath=cfg.config_path)
sys.exit(0 if ok else 1)
"""
RESULTS = []   # (notebook, seconds, peak resident memory of its process and all it started at once, bytes)


def tree_rss(root: int) -> int:
    "Resident bytes of process `root` and every process below it, now (Linux /proc)."
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try: parent[int(d)] = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError): pass
    tree, grew = {root}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in tree} - tree
        tree |= more
        grew = bool(more)
    pages = 0
    for p in tree:
        try: pages += int(Path(f"/proc/{p}/statm").read_text().split()[1])
        except (OSError, IndexError, ValueError): pass
    return pages * os.sysconf("SC_PAGE_SIZE")


def watch_peak(proc: subprocess.Popen, every: float = 0.25) -> list:
    "Sample the resident memory of `proc`'s process tree until it ends; the peak lands in the returned list."
    peak = [0]
    def run():
        while proc.poll() is None:
            peak[0] = max(peak[0], tree_rss(proc.pid))
            time.sleep(every)
    threading.Thread(target=run, daemon=True).start()
    return peak


def test_the_book_has_notebooks():
    # nbdev-test exits 0 when no notebook is eligible: make sure this bridge really found the book.
    assert len(NOTEBOOKS) >= 8, NOTEBOOKS


WORKERS = int(os.environ.get("MINI_VLLM_TEST_WORKERS", 1 if "gpu" in os.environ.get("MINI_VLLM_TEST_FLAGS", "")
                             else min(2, os.cpu_count() or 1)))


def run_notebook(nb: Path):
    "Run one notebook in a process of its own: (seconds, peak bytes, return code, its output or None)."
    t0 = time.monotonic()
    alone = WORKERS == 1                              # else one thread each, output kept for the test to print
    p = subprocess.Popen([sys.executable, "-c", RUN_ONE, str(nb)], cwd=ROOT,
                         env=None if alone else dict(os.environ, OMP_NUM_THREADS="1"),
                         stdout=None if alone else subprocess.PIPE,
                         stderr=None if alone else subprocess.STDOUT, text=True)
    peak = watch_peak(p)
    out = p.communicate()[0]
    return time.monotonic() - t0, peak[0], p.returncode, out


@pytest.fixture(scope="session")
def runs(request):
    """Every selected notebook started, WORKERS at once: notebook -> its future. Those not begun when the
    session ends (pytest -x, an interrupt) are cancelled."""
    pool = ThreadPoolExecutor(WORKERS)
    selected = [i.callspec.params["nb"] for i in request.session.items
                if "nb" in getattr(getattr(i, "callspec", None), "params", {})]
    yield {nb: pool.submit(run_notebook, nb) for nb in selected}
    pool.shutdown(wait=False, cancel_futures=True)


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook(nb, runs):
    secs, peak, rc, out = runs[nb].result()
    if out: print(out)
    RESULTS.append((nb.stem, secs, peak))
    assert rc == 0, f"{nb.name} failed (its traceback is printed above)"
