"""Copy the outputs of `#| gpu` cells from a notebook executed elsewhere (tools/run_cells.py --save-outputs) into nbs/.

    python tools/merge_outputs.py executed/04g0_triton_kernels.ipynb nbs/04g0_triton_kernels.ipynb

Each `#| gpu` cell of the target is matched in the executed copy by its id, else by its source; its source must be
the same there, or nothing is written (the outputs would belong to other code). Cells the executed copy did not run
keep their outputs; a cell that ended in an error refuses the merge. Other cells are left as they are. Standard
library only; run nbdev-clean afterwards as after any notebook edit.
"""
import argparse, json, sys
from pathlib import Path


def is_gpu(cell) -> bool:
    return cell["cell_type"] == "code" and any(l.startswith("#| gpu") for l in "".join(cell["source"]).splitlines())


def merge(executed: dict, target: dict) -> tuple[list[str], list[str]]:
    "Copy outputs into target's gpu cells, in place; (merged, problems). Nothing is changed when problems is not empty."
    src = lambda c: "".join(c["source"])
    by_id = {c.get("id"): c for c in executed["cells"] if c.get("id")}
    by_src = {src(c): c for c in executed["cells"] if c["cell_type"] == "code"}
    plan, problems = [], []
    for i, c in enumerate(target["cells"]):
        if not is_gpu(c): continue
        name = f"cell {i} ({c.get('id', 'no id')})"
        e = by_id.get(c.get("id")) or by_src.get(src(c))
        if e is None: problems.append(f"{name}: not in the executed notebook"); continue
        if src(e) != src(c): problems.append(f"{name}: its source differs in the executed notebook"); continue
        if e.get("execution_count") is None: continue                         # not run there: keep what it has
        if any(o["output_type"] == "error" for o in e.get("outputs", [])):
            problems.append(f"{name}: ended in an error in the executed notebook"); continue
        plan.append((c, e, name))
    if problems: return [], problems
    for c, e, _ in plan:
        c["outputs"] = [{**o, "execution_count": None} if o["output_type"] == "execute_result" else o for o in e["outputs"]]
        c["execution_count"] = None
    return [name for *_, name in plan], []


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("executed", type=Path)
    p.add_argument("target", type=Path)
    a = p.parse_args()
    target = json.loads(a.target.read_text())
    merged, problems = merge(json.loads(a.executed.read_text()), target)
    if problems:
        print(f"refused, {a.target} unchanged:", *problems, sep="\n  ", file=sys.stderr)
        sys.exit(1)
    a.target.write_text(json.dumps(target, indent=1, ensure_ascii=False) + "\n")
    print(f"{a.target}: outputs of {len(merged)} gpu cells merged", *merged, sep="\n  ")
