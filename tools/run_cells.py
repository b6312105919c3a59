"""Run notebooks' code cells as plain Python scripts, without nbdev or IPython (e.g. on a GPU machine that lacks them).

    python tools/run_cells.py --flags gpu nbs/04g_triton_kernels.ipynb nbs/04h_cuda_graphs.ipynb

Cells flagged with a test flag (`#| gpu`, `#| slow`, `#| notest`) run only when named in --flags. Each notebook's
cells are written to one .py file next to it and run from the nbs/ folder (Triton needs its kernels in a file).
"""
import argparse, json, os, subprocess, sys, tempfile
from pathlib import Path

FLAGS = ("gpu", "slow", "notest")


def script(nb: Path, flags: set) -> str:
    out = []
    for c in json.loads(nb.read_text())["cells"]:
        if c["cell_type"] != "code": continue
        src = "".join(c["source"])
        directives = {l[3:].split()[0] for l in src.splitlines() if l.startswith("#| ") and len(l) > 3}
        if directives & set(FLAGS) - flags: continue
        out.append(src)
    return "\n\n".join(out) + "\n"


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("notebooks", nargs="+")
    p.add_argument("--flags", default="", help="space or comma separated flags to run, e.g. 'gpu slow'")
    a = p.parse_args()
    flags, failed = set(a.flags.replace(",", " ").split()), []
    for nb in map(Path, a.notebooks):
        with tempfile.NamedTemporaryFile("w", prefix="_run_", suffix=f"_{nb.stem}.py", dir=nb.parent, delete=False) as f: f.write(script(nb, flags))
        print(f"=== {nb.name}", flush=True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(nb.resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
        r = subprocess.run([sys.executable, Path(f.name).name], cwd=nb.parent, env=env)   # the repo root is importable
        Path(f.name).unlink()
        if r.returncode: failed.append(nb.name)
    print("failed:" if failed else "all passed", *failed)
    sys.exit(1 if failed else 0)
