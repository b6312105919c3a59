"""Render nbs/index.ipynb (the book's front page) into README.md.

nbdev-readme needs Quarto, which cannot be installed here; this does the same job for a
front page of markdown and small code cells. A cell flagged `#| code-fold: true` or `#| echo: false`
shows its text output without its code; plots stay on the website (`.ci/docs`), not in the README, except
that a cell flagged `#| readme-image: PATH` (a file the cell saves) shows that file after its output.
`--check` exits 1 when README.md is stale.
"""
import json, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = "<!-- Generated from nbs/index.ipynb by tools/make_readme.py: edit the notebook, not this file. -->\n\n"


def _text_outputs(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        if any(k.startswith("image/") for k in o.get("data", {})): continue  # a plot: its text/plain is "<Figure ...>"
        t = o.get("text") or o.get("data", {}).get("text/plain") or ""
        parts.append("".join(t))
    return "".join(parts).rstrip("\n")


def render(nb_path=ROOT / "nbs" / "index.ipynb") -> str:
    cells, out = json.loads(Path(nb_path).read_text())["cells"], []
    for c in cells:
        src = "".join(c["source"])
        if c["cell_type"] == "markdown":
            out.append(src.strip("\n"))
            continue
        lines = src.splitlines()
        if any(l.strip() in ("#| hide", "#|hide") for l in lines) or any(l.startswith("#| default_exp") for l in lines):
            continue
        code = "\n".join(l for l in lines if not l.startswith("#|")).strip("\n")
        image = next((l.split(":", 1)[1].strip() for l in lines if l.startswith("#| readme-image:")), None)
        if any(l.replace(" ", "") in ("#|code-fold:true", "#|echo:false") for l in lines): code = ""
        if code: out.append(f"```python\n{code}\n```")
        if outputs := _text_outputs(c): out.append(f"```\n{outputs}\n```")
        if image: out.append(f"![the figure this cell draws]({image})")
    return HEADER + "\n\n".join(out) + "\n"


if __name__ == "__main__":
    readme, text = ROOT / "README.md", render()
    if "--check" in sys.argv:
        if not readme.exists() or readme.read_text() != text:
            sys.exit("README.md is out of date with nbs/index.ipynb: run python tools/make_readme.py")
    else:
        readme.write_text(text)
