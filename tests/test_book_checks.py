"""The book's form checks (b)-(f) of tools/check_site.py, which read the notebooks only (no site, no browser).

Every chapter has its Summary and Exercises, no commit hash in its prose, no markdown cell over 250 words and no code
cell over 60 lines, and the README shows its figure: a notebook that loses one of these fails here.
"""
import subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import check_site  # noqa: E402


def test_form_checks_pass():
    r = subprocess.run([sys.executable, ROOT / "tools" / "check_site.py", "--notebooks"],
                       capture_output=True, text=True, timeout=120)
    print(r.stdout)                                     # pytest -s shows the counts and the offenders
    assert r.returncode == 0, r.stdout + r.stderr
    for check in ("(b)", "(c)", "(d)", "(e)", "(f)"):
        assert check in r.stdout, f"check {check} did not report"


def test_commit_hashes_are_found_in_prose():
    found = lambda s: [m.group() for m in check_site.HASH.finditer(s)]
    assert found("measured at commit `9633f28` on an H200") == ["9633f28"]
    assert found("see https://github.com/o/r/commit/0538757abc") == ["0538757abc"]
    assert found("a full one: 20a2d64f167a0d0538757a9633f2866d2126aaaa.") == [
        "20a2d64f167a0d0538757a9633f2866d2126aaaa"]
    assert not found("1234567 tokens, 0xdeadbeef1, deadbeef, #ff0000aa, v1.2.3abcdef, a-1e10abc7 key")


def test_words_and_images():
    assert check_site.words("Two [words](https://example.com/a/very/long/url) <b>here</b> <!-- not this -->") == 3
    assert check_site.figures("text ![A chart](nbs/images/tput.png 'Tokens/s') text") == [
        "![A chart](nbs/images/tput.png 'Tokens/s')"]
    badge = "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://x)"
    assert not check_site.figures(badge + " and [a link](x.png)")
