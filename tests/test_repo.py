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


# The layers (DESIGN.md): a module imports only modules of chapters before its own, in the book's reading order
# (nbs/sidebar.yml), and the core (00a-04f, the top-level modules but the command line) imports no later layer,
# save where an engine is built (build.py, inside its functions). No module-level import cycles.
import ast, json, re

CORE_LAST = "04f_paged_measured"     # the last chapter of the core


def _reading_order() -> list[str]:
    return re.findall(r"- (\w+)\.ipynb", (ROOT / "nbs" / "sidebar.yml").read_text())


def _modules() -> dict[str, str]:
    "Module name (mini_vllm.x.y) -> the notebook that exports it."
    out = {}
    for nb in (ROOT / "nbs").glob("*.ipynb"):
        cells = json.loads(nb.read_text())["cells"]
        src = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        if m := re.search(r"^#\| default_exp (\S+)", src, re.M):
            out["mini_vllm" + ("" if m[1] == "__init__" else "." + m[1])] = nb.stem
    return out


def _imports(module: str, top_level_only: bool) -> set[str]:
    "The mini_vllm modules `module` imports (at module level only, or anywhere)."
    path = ROOT / (module.replace(".", "/") + ("/__init__.py" if module == "mini_vllm" else ".py"))
    tree, pkg, found = ast.parse(path.read_text()), module.rsplit(".", 1)[0] if module != "mini_vllm" else module, set()
    nodes = tree.body if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        elif isinstance(node, ast.Import): names = [a.name for a in node.names]
        else: continue
        found |= {n for n in names if n.startswith("mini_vllm")}
    return found


def test_layers():
    mods, order = _modules(), _reading_order()
    rank = {m: order.index(nb) if nb in order else len(order) for m, nb in mods.items()}
    rank["mini_vllm"] = len(order)                  # the package's front door names what the chapters built
    core_end = order.index(CORE_LAST)
    for m in mods:
        for dep in _imports(m, top_level_only=m == "mini_vllm.build") & mods.keys():
            if dep == m: continue
            assert rank[dep] < rank[m], f"{m} ({mods[m]}) imports {dep} ({mods[dep]}), a chapter after its own"
        if rank[m] <= core_end and m != "mini_vllm.build":
            later = {d for d in _imports(m, top_level_only=False) & mods.keys() if rank[d] > core_end}
            assert not later, f"the core module {m} imports {later}: only build.py may reach the later chapters"


def test_no_import_cycles():
    mods = _modules()
    graph = {m: _imports(m, top_level_only=True) & mods.keys() - {m} for m in mods}
    seen, path = set(), []
    def visit(m):
        assert m not in path, f"import cycle: {' -> '.join(path[path.index(m):] + [m])}"
        if m in seen: return
        path.append(m)
        for d in graph[m]: visit(d)
        path.pop()
        seen.add(m)
    for m in graph: visit(m)


def test_code_fits_the_page():
    # Exported code lines at most 100 characters, one statement per line (CONTRIBUTING.md, "Lines").
    r = subprocess.run([sys.executable, ROOT / "tools" / "lines.py", ROOT / "mini_vllm"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
