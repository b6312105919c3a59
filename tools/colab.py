"""Give every chapter notebook "Open in Colab" and "Open in Kaggle" badges and a first code cell that installs the book.

    python tools/colab.py            add or refresh them; running it twice changes nothing
    python tools/colab.py --check    exit 1 if a chapter lacks them or has an out-of-date copy
    python tools/colab.py --nbs DIR  work on the notebooks in DIR (a copy, say) instead of nbs/

Chapters are nbs/*.ipynb except index.ipynb, the appendix of lab notes (`*lab_notes*.ipynb`, no code) and scratch
notebooks (`_*.ipynb`). The badges cell comes first, then the chapter's title cell, then the install cell. The
repository's URL is pyproject.toml's [project.urls] Repository.

The install cell clones the repository, installs what the chapter needs (`requirements`: the core's packages, the
server's for chapters 06 and 08, and the distributions of the modules the chapter imports) under the constraints of
the clone's constraints-cpu.txt, the versions the book was tested with, then the book with `pip install --no-deps -e`
(not its loose dependency list, not the dev extra). Torch, triton and packages such as numpy that the platform
already has stay at the platform's versions. A chapter that imports a module MODULES does not know stops
this script: add its distribution there.
"""
import argparse, json, re, sys, tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BADGES_ID, INSTALL_ID = "colab-badges", "colab-install"
INSTALL_MARK = "# On Colab or Kaggle this installs the book"

COLAB, KAGGLE = "https://colab.research.google.com", "https://kaggle.com"
BADGES = "\n".join([
    "[![Open In Colab]({colab}/assets/colab-badge.svg)]({colab}/github/{gh}/blob/main/nbs/{name})",
    "[![Open In Kaggle]({kaggle}/static/images/open-in-kaggle.svg)]({kaggle}/kernels/welcome?src={repo}/blob/main/nbs/{name})"])

# What a chapter's install cell installs on Colab or Kaggle: only what the chapter needs, at the versions the book
# was tested with (constraints-cpu.txt of the clone), except for torch, triton and the packages of KEEP that the
# platform already has, which stay at the platform's versions; then the book itself with --no-deps (its declared
# dependencies are loose: they would bring the newest versions; installed last, pip has nothing to warn about).
NEED = ["transformers", "tokenizers", "gguf", "fastcore"]    # the book's core modules, always at the tested versions
KEEP = ["numpy", "tqdm", "accelerate", "safetensors"]         # ... and these, where the platform has none
SERVE = ["fastapi", "starlette", "uvicorn", "pydantic", "pydantic-core", "prometheus-client"]   # mini_vllm.serve
# a module a chapter imports -> the distributions it needs beyond those (KEEP_ALSO: the platform's where it has them)
MODULES = {"matplotlib": ["matplotlib"], "hypothesis": ["hypothesis"], "httpx": ["httpx"], "openai": ["openai"],
           "requests": ["requests"], "schemathesis": ["schemathesis"], "fastapi": ["fastapi", "starlette"],
           "starlette": ["starlette"], "uvicorn": ["uvicorn"], "pydantic": ["pydantic", "pydantic-core"],
           "prometheus_client": ["prometheus-client"],
           "xgrammar": ["xgrammar", "apache-tvm-ffi"],
           "jsonschema": ["jsonschema", "jsonschema-specifications", "referencing", "rpds-py", "attrs"],
           "zmq": ["pyzmq"], "msgpack": ["msgpack"], "vllm_router": ["vllm-router"],
           "load_test": ["httpx"], "workload": [],             # benchmarks/*.py, next to the notebooks in the clone
           "torch": [], "triton": [], "IPython": [],           # the platform's
           **{m: [] for m in NEED + KEEP}}
KEEP_ALSO = {"matplotlib", "requests"}
IMPORT = re.compile(r"^\s*(?:from\s+(\w+)[\w.]*\s+import|import\s+([\w.]+(?:\s*,\s*[\w.]+)*))", re.M)

INSTALL = "#| hide\n" + INSTALL_MARK + """ from a clone; in a checkout it does nothing.
import importlib.util, os, subprocess, sys
book = os.path.expanduser("~/mini-vllm")                      # where the clone goes
if importlib.util.find_spec("mini_vllm") is None:
    from importlib.metadata import distributions
    repo = os.environ.get("MINI_VLLM_REPO", "{repo}")
    if not os.path.isdir(book):
        subprocess.run(["git", "clone", "-q", "--depth", "1", repo, book], check=True)
    # What this chapter needs, at the versions the book was tested with (constraints-cpu.txt);
    # torch, triton and what the platform has of `keep` stay at the platform's versions.
    need = {need}
    keep = {keep}
    have = {{(d.name or "").lower().replace("_", "-"): d.version for d in distributions()}}
    held = [n for n in ["torch", "triton"] + keep if n in have]
    tested = open(os.path.join(book, "constraints-cpu.txt")).read().splitlines()
    pins = [l for l in tested if l.split("==")[0] not in held] + [f"{{n}}=={{have[n]}}" for n in held]
    with open(os.path.join(book, "platform-constraints.txt"), "w") as f:
        f.write("\\n".join(pins))
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    missing = [n for n in keep + ["torch"] if n not in have]
    subprocess.run(pip + ["-c", f.name] + need + missing, check=True)
    subprocess.run(pip + ["--no-deps", "-e", book], check=True)         # the book alone, last
    sys.path.insert(0, book)                                   # importable now, without a restart
    importlib.invalidate_caches()
if importlib.util.find_spec("mini_vllm").origin.startswith(os.path.join(book, "")):
    os.chdir(os.path.join(book, "nbs"))      # chapters read files relative to nbs/ (../benchmarks)"""


def _pylist(names: list[str], indent: int = 11, width: int = 100) -> str:
    "A list of strings as Python source, wrapped to `width` with continuation lines under its first item."
    lines, line = [], "["
    for i, n in enumerate(names):
        item = repr(n) + ("," if i < len(names) - 1 else "]")
        if len(line) + len(item) + 1 + indent > width and line != "[":
            lines.append(line.rstrip())
            line = " " * (indent + 1)
        line += item + " "
    return "\n".join(lines + [line.rstrip() if names else "[]"])


def requirements(nb: dict) -> tuple[list[str], list[str]]:
    """What the chapter's install cell installs: (at the tested versions, where the platform has none). NEED and
    KEEP, the server's packages for a chapter that writes or uses mini_vllm.serve or the command line (06, 08),
    and the distributions of the modules its code cells import."""
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    mods = {n.strip().split(".")[0] for m in IMPORT.finditer(code) for n in (m[1] or m[2]).split(",")}
    mods -= set(sys.stdlib_module_names) | {"mini_vllm", ""}
    unknown = sorted(mods - MODULES.keys())
    if unknown: sys.exit(f"tools/colab.py: which distribution holds {unknown}? Add it to MODULES")
    serve = re.search(r"^#\s*\|\s*default_exp\s+(serve\.|cli\b)|^\s*(from|import)\s+mini_vllm\.(serve|cli)\b",
                      code, re.M)
    extra = (SERVE if serve else []) + [d for m in sorted(mods) for d in MODULES[m]]
    need = NEED + [d for d in dict.fromkeys(extra) if d not in NEED + KEEP and d not in KEEP_ALSO]
    return need, KEEP + sorted({d for d in extra if d in KEEP_ALSO})


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
    need, keep = requirements({**nb, "cells": cells})
    install = _cell("code", INSTALL_ID, INSTALL.format(repo=repo, need=_pylist(need), keep=_pylist(keep)))
    return {**nb, "cells": [badges, *cells[:title], install, *cells[title:]]}


def chapters(nbs: Path) -> list[Path]:
    return [p for p in sorted(nbs.glob("*.ipynb"))
            if p.name != "index.ipynb" and not p.name.startswith("_") and not p.match("*lab_notes*.ipynb")]


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
