"""tools/run_cells.py --save-outputs and tools/merge_outputs.py on a small notebook with a `#| gpu` cell that prints
and plots: the outputs it saves, and a merge that copies them into the notebook only when the sources agree."""
import base64, json, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _nb(tmp: Path, gpu_src: str) -> Path:
    cell = lambda i, src: {"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                           "source": src.splitlines(keepends=True)}
    cells = [cell(0, "#| hide\nimport matplotlib.pyplot as plt"),
             {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": ["Why the next cell needs a GPU."]},
             cell(2, gpu_src),
             cell(3, "#| slow\nprint('a slow cell')"),
             cell(4, "x = 1\nx + 1")]
    (tmp / "nbs").mkdir(exist_ok=True)
    nb = tmp / "nbs" / "fake.ipynb"
    nb.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n")
    return nb


def _run(*args, cwd):
    return subprocess.run([sys.executable, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120)


GPU = "#| gpu\nprint('on the GPU')\nplt.plot([1, 2, 3])\nprint('done', file=sys.stderr)\n6 * 7"


def test_save_outputs_then_merge(tmp_path):
    nb = _nb(tmp_path, "import sys\n" + GPU)
    r = _run(ROOT / "tools/run_cells.py", "--flags", "gpu", "--save-outputs", tmp_path / "out", nb, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    cells = json.loads((tmp_path / "out" / "fake.ipynb").read_text())["cells"]
    outs = cells[2]["outputs"]
    assert [o["output_type"] for o in outs] == ["stream", "stream", "execute_result", "display_data"], outs
    assert (outs[0]["name"], "".join(outs[0]["text"])) == ("stdout", "on the GPU\n")
    assert (outs[1]["name"], "".join(outs[1]["text"])) == ("stderr", "done\n")
    assert "".join(outs[2]["data"]["text/plain"]) == "42"
    assert base64.b64decode(outs[3]["data"]["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    assert cells[3]["outputs"] == [] and cells[3]["execution_count"] is None           # #| slow: not run
    assert "".join(cells[4]["outputs"][0]["data"]["text/plain"]) == "2"
    assert [c.get("execution_count") for c in cells] == [1, None, 2, None, 3]

    target = nb.read_text()
    r = _run(ROOT / "tools/merge_outputs.py", tmp_path / "out" / "fake.ipynb", nb, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    merged = json.loads(nb.read_text())["cells"]
    assert len(merged[2]["outputs"]) == 4 and merged[2]["execution_count"] is None
    assert merged[4]["outputs"] == [], "only #| gpu cells are merged"

    nb.write_text(target.replace("on the GPU", "on the device"))                        # the code changed since
    before = nb.read_text()
    r = _run(ROOT / "tools/merge_outputs.py", tmp_path / "out" / "fake.ipynb", nb, cwd=tmp_path)
    assert r.returncode == 1 and "source differs" in r.stderr
    assert nb.read_text() == before


def test_an_error_stops_the_run_and_refuses_the_merge(tmp_path):
    nb = _nb(tmp_path, "#| gpu\nprint('before')\nraise RuntimeError('no GPU here')")
    r = _run(ROOT / "tools/run_cells.py", "--flags", "gpu", "--save-outputs", tmp_path / "out", nb, cwd=tmp_path)
    assert r.returncode == 1 and "failed: fake.ipynb" in r.stdout
    cells = json.loads((tmp_path / "out" / "fake.ipynb").read_text())["cells"]
    assert [o["output_type"] for o in cells[2]["outputs"]] == ["stream", "error"]
    assert cells[2]["outputs"][1]["ename"] == "RuntimeError"
    assert cells[4]["execution_count"] is None, "cells after the error do not run"
    r = _run(ROOT / "tools/merge_outputs.py", tmp_path / "out" / "fake.ipynb", nb, cwd=tmp_path)
    assert r.returncode == 1 and "error" in r.stderr
