"""Exported code lines over 100 characters (after nbdev's generated header) and `;`-joined statements, per module.

    python3 tools/lines.py [mini_vllm]      # exits 1 if there is any
"""
import io, sys, tokenize
from pathlib import Path

LIMIT = 100


def check(path: Path) -> tuple[list[int], list[int]]:
    "The numbers of the lines of `path` that are too long, and of those with a `;` between statements."
    src = path.read_text()
    lines = src.splitlines()
    body = next((i for i, l in enumerate(lines) if l.startswith("# %% ../")), 0)    # after nbdev's header
    long = [i + 1 for i, l in enumerate(lines) if len(l) > LIMIT and i >= body]
    tokens = tokenize.generate_tokens(io.StringIO(src).readline)
    joined = sorted({t.start[0] for t in tokens if t.type == tokenize.OP and t.string == ";"})
    return long, joined


if __name__ == "__main__":
    bad = 0
    for p in sorted(Path(sys.argv[1] if len(sys.argv) > 1 else "mini_vllm").rglob("*.py")):
        if p.name == "_modidx.py": continue
        long, joined = check(p)
        bad += len(long) + len(joined)
        if long or joined: print(f"{p}: lines over {LIMIT} characters {long[:8]}, with ';' {joined[:8]}")
    print(f"{bad} lines to mend")
    sys.exit(1 if bad else 0)
