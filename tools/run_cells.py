"""Run notebooks' code cells as plain Python scripts, without nbdev or IPython (e.g. on a GPU machine that lacks them).

    python tools/run_cells.py --flags gpu nbs/04g0_triton_kernels.ipynb nbs/04h_cuda_graphs.ipynb
    python tools/run_cells.py --flags gpu --save-outputs executed/ nbs/04g0_triton_kernels.ipynb

Cells flagged with a test flag (`#| gpu`, `#| slow`, `#| notest`) run only when named in --flags. Each notebook's
cells are written to one .py file next to it and run from the nbs/ folder (Triton needs its kernels in a file).
With --save-outputs DIR the cells run one at a time in one process, and a copy of each notebook is written to DIR
with the outputs of the cells that ran, as Jupyter saves them: printed text (`stream`), each matplotlib figure
the cell left open or showed (`display_data`, PNG), the value of a last bare expression (`execute_result`), or the
error that stopped the run (`error`). tools/merge_outputs.py copies the `#| gpu` cells' outputs into nbs/.
Needs the standard library only (matplotlib if the cells plot).
"""
import argparse, ast, base64, io, json, os, subprocess, sys, tempfile, traceback, types
from pathlib import Path

FLAGS = ("gpu", "slow", "notest")


def directives(src: str) -> set:
    "The cell's `#| name` directives."
    return {l[3:].split()[0] for l in src.splitlines() if l.startswith("#| ") and len(l) > 3}


def selected(nb: Path, flags: set) -> list[tuple[int, str]]:
    "(index, source) of the code cells to run: those without a test flag, or with one named in `flags`."
    cells = json.loads(nb.read_text())["cells"]
    out = []
    for i, c in enumerate(cells):
        if c["cell_type"] != "code": continue
        src = "".join(c["source"])
        if directives(src) & set(FLAGS) - flags: continue
        out.append((i, src))
    return out


def script(nb: Path, flags: set) -> str:
    return "\n\n".join(src for _, src in selected(nb, flags)) + "\n"


# --- running cells one at a time, with their outputs (in the child process) --------------------------------------

class _Tee(io.TextIOBase):
    "A stream that writes through to the real one and records (name, text) chunks in order."
    def __init__(self, real, name, chunks): self.real, self.name, self.chunks = real, name, chunks
    def write(self, s):
        self.real.write(s); self.real.flush()
        if s: self.chunks.append((self.name, s))
        return len(s)
    def flush(self): self.real.flush()
    def isatty(self): return False


def _figures(chunks):
    "Every open matplotlib figure as a PNG chunk, then closed (as Jupyter's inline backend does)."
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None: return
    for num in plt.get_fignums():
        fig, buf = plt.figure(num), io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        chunks.append(("png", (base64.b64encode(buf.getvalue()).decode(), repr(fig))))
    plt.close("all")


def _outputs(chunks) -> list[dict]:
    "nbformat outputs from recorded chunks: consecutive text of one stream merged."
    outs = []
    for kind, data in chunks:
        if kind in ("stdout", "stderr"):
            if outs and outs[-1].get("name") == kind: outs[-1]["text"] += data
            else: outs.append({"output_type": "stream", "name": kind, "text": data})
        elif kind == "png":
            outs.append({"output_type": "display_data", "data": {"image/png": data[0], "text/plain": data[1]},
                         "metadata": {}})
        elif kind == "result":
            outs.append({"output_type": "execute_result", "data": {"text/plain": data}, "metadata": {},
                         "execution_count": None})
        else: outs.append(data)                                       # an error output, ready made
    for o in outs:
        if "text" in o: o["text"] = o["text"].splitlines(keepends=True)
        if "text/plain" in o.get("data", {}): o["data"]["text/plain"] = o["data"]["text/plain"].splitlines(keepends=True)
    return outs


def exec_cells(script_path: Path, cells: list[tuple[int, str]], result_path: Path) -> int:
    """Run the cells (each at its line in script_path, so that Triton finds its kernels' source) in one namespace;
    after each, write {cell index: outputs} to result_path. Stops at the first error, as nbdev's tests do."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        import matplotlib.pyplot as plt
        plt.show = lambda *a, **k: _figures(chunks)                    # a figure shown mid-cell appears there
    except ImportError: pass
    main = types.ModuleType("__main__")                                # the cells' own module, as a script's would be
    main.__file__ = str(script_path)
    sys.modules["__main__"], ns, results, line = main, main.__dict__, {}, 0
    real_out, real_err = sys.stdout, sys.stderr
    for idx, src in cells:
        chunks = []
        sys.stdout, sys.stderr = _Tee(real_out, "stdout", chunks), _Tee(real_err, "stderr", chunks)
        failed = False
        try:
            tree = ast.parse(src)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            body = ast.increment_lineno(ast.Module(body=tree.body, type_ignores=[]), line)   # lines as in the script
            exec(compile(body, str(script_path), "exec"), ns)
            if last is not None:
                expr = ast.increment_lineno(ast.Expression(last.value), line)
                value = eval(compile(expr, str(script_path), "eval"), ns)
                if value is not None and not src.rstrip().endswith(";"): chunks.append(("result", repr(value)))
            _figures(chunks)
        except BaseException as e:                                      # KeyboardInterrupt and SystemExit too
            failed = True
            tb = traceback.format_exc()
            real_err.write(tb)
            chunks.append(("error", {"output_type": "error", "ename": type(e).__name__, "evalue": str(e),
                                     "traceback": tb.splitlines()}))
        finally: sys.stdout, sys.stderr = real_out, real_err
        results[idx] = _outputs(chunks)
        result_path.write_text(json.dumps(results))                    # after every cell: a crash keeps the earlier ones
        line += src.count("\n") + 2                                     # the cell and the blank line joining cells
        if failed: return 1
    return 0


def save_copy(nb: Path, results: dict, out_dir: Path) -> Path:
    "A copy of nb in out_dir with the outputs of the cells that ran (execution counts in order), others untouched."
    d = json.loads(nb.read_text())
    n = 0
    for idx, outs in sorted((int(k), v) for k, v in results.items()):
        c = d["cells"][idx]
        n += 1
        c["outputs"], c["execution_count"] = outs, n
        for o in outs:
            if o["output_type"] == "execute_result": o["execution_count"] = n
    out_dir.mkdir(parents=True, exist_ok=True)
    dest = out_dir / nb.name
    dest.write_text(json.dumps(d, indent=1, ensure_ascii=False) + "\n")
    return dest


def run(nb: Path, flags: set, save_outputs: Path | None) -> bool:
    "Run one notebook's selected cells in a fresh process from its folder; True if all passed."
    cells = selected(nb, flags)
    with tempfile.NamedTemporaryFile("w", prefix="_run_", suffix=f"_{nb.stem}.py", dir=nb.parent, delete=False) as f:
        f.write("\n\n".join(src for _, src in cells) + "\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(nb.resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    script_path = Path(f.name)
    try:
        if save_outputs is None:
            r = subprocess.run([sys.executable, script_path.name], cwd=nb.parent, env=env)   # the repo root is importable
            return r.returncode == 0
        with tempfile.TemporaryDirectory() as tmp:
            cells_path, result_path = Path(tmp) / "cells.json", Path(tmp) / "outputs.json"
            cells_path.write_text(json.dumps(cells))
            r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--exec-cells", str(script_path.resolve()),
                                str(cells_path), str(result_path)], cwd=nb.parent, env=env)
            results = json.loads(result_path.read_text()) if result_path.exists() else {}
            dest = save_copy(nb, results, save_outputs)
            print(f"outputs of {len(results)} cells saved to {dest}", flush=True)
            return r.returncode == 0 and len(results) == len(cells)
    finally: script_path.unlink()


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--exec-cells":           # the child process of --save-outputs
        sp = Path(sys.argv[2])
        sys.path.insert(0, str(sp.parent))                             # as when the script itself is run
        sys.exit(exec_cells(sp, [tuple(c) for c in json.loads(Path(sys.argv[3]).read_text())], Path(sys.argv[4])))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("notebooks", nargs="+")
    p.add_argument("--flags", default="", help="space or comma separated flags to run, e.g. 'gpu slow'")
    p.add_argument("--save-outputs", type=Path, metavar="DIR", help="write copies of the notebooks with outputs here")
    a = p.parse_args()
    flags, failed = set(a.flags.replace(",", " ").split()), []
    for nb in map(Path, a.notebooks):
        print(f"=== {nb.name}", flush=True)
        if not run(nb, flags, a.save_outputs): failed.append(nb.name)
    print("failed:" if failed else "all passed", *failed)
    sys.exit(1 if failed else 0)
