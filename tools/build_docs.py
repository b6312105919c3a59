"""Build the book's website into _site/, offline, from the notebooks' saved outputs.

Copies of nbs/*.ipynb are preprocessed into _docs_src/ (cells flagged `#| hide` dropped, nbdev's
directive lines removed, remote badge images swapped for local copies, links made to work on the site),
an API reference page is written for every mini_vllm module, and Sphinx (myst-nb, never executing a
notebook; sphinx-book-theme) turns them into HTML. Usage: `python tools/build_docs.py` (or `.ci/docs`).
"""
import json, re, shutil, subprocess, sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
NBS, DOCS = ROOT / "nbs", ROOT / "docs"
SRC, SITE = ROOT / "_docs_src", ROOT / "_site"
BUILD = ROOT / "_docs_build"  # Sphinx writes here (myst-nb also writes beside its outdir), then _site is copied
REPO_BLOB = "https://github.com/mini-vllm/mini_vllm/blob/main/"
BADGES = {"https://colab.research.google.com/assets/colab-badge.svg": "_static/colab-badge.svg",
          "https://kaggle.com/static/images/open-in-kaggle.svg": "_static/kaggle-badge.svg"}
DIRECTIVE = re.compile(r"^\s*#\s*\|\s*(.*)$")
MD_LINK = re.compile(r"(\]\()([^)\s]+)(\))")


def sidebar() -> list[tuple[str, list[str]]]:
    """The book's order from nbs/sidebar.yml: [(section caption, [notebook stems])], the front page first."""
    contents = yaml.safe_load((NBS / "sidebar.yml").read_text())["website"]["sidebar"]["contents"]
    out = []
    for item in contents:
        if isinstance(item, str): out.append(("", [Path(item).stem]))
        else: out.append((item["section"], [Path(p).stem for p in item["contents"]]))
    return out


def chapters() -> list[Path]:
    return sorted(p for p in NBS.glob("*.ipynb") if not p.name.startswith("_"))


def directives(src: str) -> tuple[dict, str]:
    """nbdev/Quarto `#|` lines at the top of a cell as {key: value}, and the source without them."""
    lines, flags = src.splitlines(), {}
    while lines and (m := DIRECTIVE.match(lines[0])):
        key, _, val = m.group(1).partition(":")
        flags[key.strip()] = val.strip() or True
        lines.pop(0)
    return flags, "\n".join(l for l in lines if not DIRECTIVE.match(l)).strip("\n")


def fix_link(target: str, base: Path) -> str:
    """A link of the notebooks, made to work on the site: chapters by their page, other repo files on GitHub."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")): return target
    path, _, anchor = target.partition("#")
    p = (base / path).resolve()
    if p.parent == DOCS / "static": return f"_static/{p.name}"           # the book's own pictures
    if p.parent == NBS and p.suffix == ".ipynb": return p.name + (f"#{anchor}" if anchor else "")
    if p.exists() and ROOT in p.parents:
        return REPO_BLOB + p.relative_to(ROOT).as_posix() + (f"#{anchor}" if anchor else "")
    return target


def markdown(src: str, base: Path) -> str:
    for remote, local in BADGES.items(): src = src.replace(remote, local)
    return MD_LINK.sub(lambda m: m.group(1) + fix_link(m.group(2), base) + m.group(3), src)


def process(nb_path: Path) -> dict:
    """A copy of one notebook as the site shows it; outputs are kept as saved, nothing is executed."""
    nb = json.loads(nb_path.read_text())
    base = ROOT if nb_path.stem == "index" else NBS  # index.ipynb is also README.md, whose links start at the root
    cells = []
    for c in nb["cells"]:
        src = "".join(c["source"])
        if c["cell_type"] == "markdown":
            cells.append({**c, "source": markdown(src, base)})
            continue
        if c["cell_type"] != "code": continue
        flags, code = directives(src)
        if "hide" in flags or str(flags.get("include", "")).lower() == "false": continue
        if not code and not c.get("outputs"): continue  # e.g. a cell holding only `#| default_exp`
        tags = []
        if str(flags.get("echo", "")).lower() == "false" or not code: tags.append("remove-input")
        elif str(flags.get("code-fold", "")).lower() in ("true", "show"): tags.append("hide-input")
        if str(flags.get("output", "")).lower() == "false": tags.append("remove-output")
        cells.append({**c, "source": code, "metadata": {"tags": tags} if tags else {}})
    nb["cells"] = cells
    nb["metadata"] = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                      "language_info": {"name": "python", "pygments_lexer": "ipython3"}}
    return nb


def toctrees(order, extra) -> str:
    """The site's navigation: one hidden toctree per section of nbs/sidebar.yml, then the API reference."""
    blocks = [(cap, stems) for cap, stems in order if cap] + ([("More", extra)] if extra else [])
    blocks.append(("Reference", ["api/index"]))
    return "\n".join(f"```{{toctree}}\n:hidden:\n:caption: {cap}\n\n" + "\n".join(stems) + "\n```\n"
                     for cap, stems in blocks)


def modules() -> list[str]:
    return sorted(p.stem for p in (ROOT / "mini_vllm").glob("*.py") if not p.stem.startswith("_"))


def api_pages() -> dict[str, str]:
    """One page per module (sphinx.ext.autodoc over the names each module exports), and an index of them."""
    pages = {"api/index.md": "# API reference\n\nThe package as the notebooks export it, one module per chapter.\n\n"
             "```{toctree}\n:maxdepth: 1\n\n" + "\n".join(modules()) + "\n```\n"}
    for m in modules():
        pages[f"api/{m}.md"] = f"# mini_vllm.{m}\n\n```{{eval-rst}}\n.. automodule:: mini_vllm.{m}\n```\n"
    return pages


def write(path: Path, text: str):
    """Write only what changed, so that Sphinx rebuilds only the pages whose source changed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text: path.write_text(text)


def prepare():
    order, nbs = sidebar(), chapters()
    listed = {s for _, stems in order for s in stems}
    missing = sorted(listed - {p.stem for p in nbs})
    if missing: sys.exit(f"nbs/sidebar.yml names notebooks that do not exist: {missing}")
    extra = [p.stem for p in nbs if p.stem not in listed]
    if extra: print(f"note: not in nbs/sidebar.yml, listed under 'More': {extra}")
    files = {}
    for p in nbs:
        nb = process(p)
        if p.stem == "index":
            nav = toctrees(order, extra)
            nb["cells"].append({"cell_type": "markdown", "id": "site-toctrees", "metadata": {}, "source": nav})
        files[p.name] = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    files.update(api_pages())
    for svg in (DOCS / "static").glob("*.svg"): files[f"_static/{svg.name}"] = svg.read_text()
    old = [p for p in SRC.rglob("*") if p.is_file()] if SRC.exists() else []
    stale = [p for p in old if p.relative_to(SRC).as_posix() not in files]
    for old in stale: old.unlink()
    if stale and BUILD.exists(): shutil.rmtree(BUILD)  # Sphinx keeps the pages of removed sources: start afresh
    for rel, text in files.items(): write(SRC / rel, text)


def build() -> int:
    prepare()
    html = BUILD / "html"
    cmd = [sys.executable, "-m", "sphinx", "-E", "-b", "html", "-q", "-c", str(DOCS), "-d", str(BUILD / "doctrees"),
           str(SRC), str(html)]
    r = subprocess.run(cmd, cwd=ROOT)
    if r.returncode: return r.returncode
    if SITE.exists(): shutil.rmtree(SITE)  # a page removed from the book must not linger on the site
    shutil.copytree(html, SITE)
    print(f"site built: {SITE.relative_to(ROOT)}/ ({sum(1 for _ in SITE.rglob('*.html'))} HTML pages)")
    return 0


if __name__ == "__main__":
    sys.exit(build())
