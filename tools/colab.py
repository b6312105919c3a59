"""Give every chapter notebook "Open in Colab" and "Open in Kaggle" badges and a first code cell that installs the book.

    python tools/colab.py            add or refresh them; running it twice changes nothing
    python tools/colab.py --check    exit 1 if a chapter lacks them or has an out-of-date copy
    python tools/colab.py --nbs DIR  work on the notebooks in DIR (a copy, say) instead of nbs/

Chapters are nbs/*.ipynb except index.ipynb and scratch notebooks (`_*.ipynb`). The badges cell comes first, then
the chapter's title cell, then the install cell. The repository's URL is pyproject.toml's [project.urls] Repository.
"""
import argparse, json, sys, tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BADGES_ID, INSTALL_ID = "colab-badges", "colab-install"
INSTALL_MARK = "# On Colab or Kaggle this installs the book"

COLAB, KAGGLE = "https://colab.research.google.com", "https://kaggle.com"
BADGES = "\n".join([
    "[![Open In Colab]({colab}/assets/colab-badge.svg)]({colab}/github/{gh}/blob/main/nbs/{name})",
    "[![Open In Kaggle]({kaggle}/static/images/open-in-kaggle.svg)]({kaggle}/kernels/welcome?src={repo}/blob/main/nbs/{name})"])

INSTALL = "#| hide\n" + INSTALL_MARK + """ (a clone of its repository); in a checkout it does nothing.
import importlib.util, os, subprocess, sys
book = os.path.expanduser("~/mini-vllm")                     # where the clone goes
if importlib.util.find_spec("mini_vllm") is None:
    repo = os.environ.get("MINI_VLLM_REPO", "{repo}")
    if not os.path.isdir(book): subprocess.run(["git", "clone", "-q", "--depth", "1", repo, book], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", f"{{book}}[dev]"], check=True)
    sys.path.insert(0, book)                                  # importable now, without restarting Python
    importlib.invalidate_caches()
if importlib.util.find_spec("mini_vllm").origin.startswith(os.path.join(book, "")):
    os.chdir(os.path.join(book, "nbs"))                       # chapters read files relative to nbs/ (../benchmarks)"""


def repository() -> str:
    "The repository's URL, from pyproject.toml."
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"].rstrip("/")


def _cell(kind: str, cell_id: str, text: str) -> dict:
    lines = text.split("\n")
    src = [l + "\n" for l in lines[:-1]] + [lines[-1]]
    if kind == "markdown": return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": src}
    return {"cell_type": "code", "execution_count": None, "id": cell_id, "metadata": {}, "outputs": [], "source": src}


def _ours(c: dict) -> bool:
    src = "".join(c["source"])
    return c.get("id") in (BADGES_ID, INSTALL_ID) or "colab-badge.svg" in src or INSTALL_MARK in src


def with_colab(nb: dict, name: str, repo: str) -> dict:
    "The notebook with its badges first, then its title cell (if any), then the install cell."
    gh = repo.removeprefix("https://github.com/")
    cells = [c for c in nb["cells"] if not _ours(c)]
    title = 1 if cells and cells[0]["cell_type"] == "markdown" and "".join(cells[0]["source"]).startswith("# ") else 0
    badges = _cell("markdown", BADGES_ID, BADGES.format(colab=COLAB, kaggle=KAGGLE, gh=gh, repo=repo, name=name))
    install = _cell("code", INSTALL_ID, INSTALL.format(repo=repo))
    return {**nb, "cells": [badges, *cells[:title], install, *cells[title:]]}


def chapters(nbs: Path) -> list[Path]:
    return [p for p in sorted(nbs.glob("*.ipynb")) if p.name != "index.ipynb" and not p.name.startswith("_")]


def dumps(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"     # the layout nbdev-clean writes


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a chapter is missing or stale")
    p.add_argument("--nbs", type=Path, default=ROOT / "nbs", help="the notebooks' folder (default: nbs/)")
    a = p.parse_args()
    repo, stale = repository(), []
    for path in chapters(a.nbs):
        nb = json.loads(path.read_text())
        new = with_colab(nb, path.name, repo)
        if new == nb: continue
        stale.append(path.name)
        if not a.check: path.write_text(dumps(new))
    if a.check and stale:
        sys.exit(f"no or out-of-date Colab/Kaggle cells in {', '.join(stale)}: run python tools/colab.py")
    print(f"{len(stale)} notebook(s) {'to update' if a.check else 'updated'}")
