"""Sphinx configuration of the book's website; tools/build_docs.py runs it over preprocessed copies of nbs/.

Notebooks are never executed here: the site shows the outputs saved in them.
"""
import importlib.util, os, re, sys
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton: the API pages import every module
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

project = "mini_vllm"
author = "mini_vllm authors"
copyright = "mini_vllm authors, Apache-2.0"
REPO = "https://github.com/mini-vllm/mini_vllm"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
    "sphinx.ext.githubpages",  # writes .nojekyll
    "sphinx-mathjax-offline",  # MathJax from the package (its module name has hyphens), not from a CDN
]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]

# Saved outputs only: a notebook may need a GPU, a server or minutes of compute.
nb_execution_mode = "off"
nb_output_stderr = "show"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist", "html_image"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type"]

# The API reference imports the package; what cannot be imported on this machine is mocked.
OPTIONAL = ("triton", "fastapi", "uvicorn", "prometheus_client", "openai", "httpx")
autodoc_mock_imports = [m for m in OPTIONAL if importlib.util.find_spec(m) is None]
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"

html_theme = "sphinx_book_theme"
html_title = "mini_vllm"
html_static_path = ["static"]  # copied into the site's _static/ (a folder named _static would be gitignored here)
html_css_files = ["book.css"]
html_favicon = "static/favicon.svg"  # a <link rel="icon">: without one a browser asks for /favicon.ico, a 404
html_context = {"default_mode": "light"}  # without it the theme logs a console error on a reader's first visit
html_theme_options = {
    "repository_url": REPO,
    "repository_branch": "main",
    "path_to_docs": "nbs",
    "use_repository_button": True,
    "use_download_button": True,
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "navbar_persistent": [],  # the search field is in the sidebar already; no second one in a header bar
}


CODE = re.compile(r"(?<!`)`([^`]+)`(?!`)")
LINK = re.compile(r"\[([^\]]+)\]\((\S+?)\)")
CHAPTER = re.compile(r"File to edit: \.\./nbs/(\w+)\.ipynb")


def _code(m) -> str:
    s, i, j = m.string, m.start(), m.end()
    before = "\\ " if i and s[i - 1].isalnum() else ""
    after = "\\ " if j < len(s) and s[j].isalnum() else ""
    return f"{before}``{m.group(1)}``{after}"


def markdown_docstring(app, what, name, obj, options, lines):
    """nbdev docstrings are markdown: `code` and [text](url) become reST; a module links to its chapter."""
    for i, line in enumerate(lines):
        if what == "module" and line.startswith("Docs: http"):  # nbdev's link to a Quarto site: link the chapter
            m = CHAPTER.search(Path(obj.__file__).read_text()) if getattr(obj, "__file__", None) else None
            lines[i] = f"Written and explained in chapter :doc:`/{m.group(1)}`." if m else ""
        else:
            lines[i] = LINK.sub(r"`\1 <\2>`__", CODE.sub(_code, line))


def setup(app):
    app.connect("autodoc-process-docstring", markdown_docstring)
