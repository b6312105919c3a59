"""Check the built website (_site/) as a reader's browser sees it, offline.

1. Every chapter of the book and every module's API page has its HTML page.
2. Every HTML file is crawled: each local href/src must resolve to a file and each `#anchor` to an id there;
   no page may load a remote resource (an http(s) URL in a src= or in a stylesheet/script/icon link).
3. The front page, chapters with plots, the benchmarks chapter, an API page and a search are opened in
   headless Chromium (Debian's `chromium` driven by playwright; no browser is downloaded) from a local server:
   any console error, page error, failed or non-local request, or broken image fails; screenshots go to
   _site_screenshots/.
4. The book's form (STYLE.md, "A book, not a lab log"), each check printing its count and offenders:
   (a) no code block of a page (a chapter's code cell, an API page's) scrolls sideways in Chromium at the
       default viewport (1280 x 900); cell outputs and the source pages (_modules/, whose module docstrings nbdev
       writes on one line) that scroll are counted, never a failure;
   (b) no commit hash in the prose (markdown cells) of nbs/*.ipynb but the appendix (nbs/*lab_notes*.ipynb);
   (c) no markdown cell of more than 250 words;
   (d) every chapter (nbs/*.ipynb but index and the appendix) has a "## Summary" and a "## Exercises" heading;
   (e) README.md shows an image (`![alt](path)`; a badge such as Open in Colab does not count);
   (f) no code cell of more than 60 lines (a class that long is introduced in steps, `@patch`ing methods on).
   (b)-(f) read the notebooks only: `--notebooks` runs them without a site (tests/test_book_checks.py does).
   With `--report-only`, or CHECK_SITE_REPORT_ONLY=1 in the environment, (a)-(f) print WARN instead of FAIL
   and do not change the exit status; CHECK_SITE_REPORT_ONLY=a (letters) does so for those checks only.
Prints one line per check and `N passed, M failed`; exits 1 if any failed. Usage: `python tools/check_site.py
[--report-only] [--notebooks] [--show N]`.
"""
import argparse, functools, http.server, json, os, re, shutil, sys, threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
SITE, SHOTS = ROOT / "_site", ROOT / "_site_screenshots"
sys.path.insert(0, str(ROOT / "tools"))
from build_docs import chapters, modules, sidebar  # noqa: E402  (the book's order and the module list)

BROWSER_PAGES = [("index.html", "front page"), ("03_continuous_batching.html", "chapter with plots"),
                 ("04b_scheduler.html", "core chapter"), ("04f_paged_measured.html", "chapter with plots"),
                 ("05b0_quant_kernels.html", "GPU chapter with plots"),
                 ("07_benchmarks.html", "benchmarks chapter"), ("api/llm.html", "API reference")]
SEARCH = ("search.html?q=scheduler", "search")
LOADING_TAGS = ("img", "script", "iframe", "source", "video", "audio", "embed", "object", "input")
RESOURCE_RELS = {"stylesheet", "icon", "shortcut", "preload", "modulepreload", "apple-touch-icon", "manifest"}

NBS = ROOT / "nbs"
APPENDIX = "*lab_notes*.ipynb"        # the appendix of lab notes: history and commits belong there
MAX_MD_WORDS, MAX_CODE_LINES = 250, 60
HEADINGS = ("Summary", "Exercises")   # every chapter ends with these two
# 7 to 40 hex digits with a digit and a letter among them: an abbreviated or full commit
HASH = re.compile(r"(?<![\w.#-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])")
IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)[^)]*\)")


def figures(md: str) -> list[str]:
    "The images of markdown `![alt](path)`, badges (Open in Colab, shields) left out."
    return [m[0] for m in IMAGE.finditer(md) if not re.match(r"(?i)open in", m[1]) and "badge" not in m[2]]


results: list[tuple[str, str]] = []     # (PASS, FAIL or WARN; what)
_RO = os.environ.get("CHECK_SITE_REPORT_ONLY", "")
REPORT_ONLY = set("abcdef") if _RO == "1" else set(_RO) & set("abcdef")   # "a": only (a) warns
SHOW = 12                               # offenders listed per form check (--show)


def check(ok: bool, what: str, detail: str = "", soft: bool = False) -> bool:
    """Record and print one check. `soft`: a form check (a)-(f), a warning only in report-only mode."""
    letter = what[1] if what.startswith("(") else ""
    word = "PASS" if ok else "WARN" if soft and letter in REPORT_ONLY else "FAIL"
    results.append((word, what))
    print(f"{word} {what}" + ("" if ok or not detail else f": {detail}"), flush=True)
    return ok


def report(what: str, offenders: list[str], soft: bool = True, info: bool = False, show: int | None = None):
    """One line for a form check, with its count, then its offenders one a line (at most `show`).
    `info`: listed only, never a failure (the outputs' and sources' widths)."""
    n, show = len(offenders), SHOW if show is None else min(show, SHOW)
    if info: print(f"INFO {what}: {n}", flush=True)
    else: check(not n, f"{what}: {n}", soft=soft)
    for o in offenders[:show]: print(f"       {o}")
    if n > show: print(f"       ... and {n - show} more")


class Page(HTMLParser):
    """The ids a page defines and the URLs it refers to: (attribute, url, is a loaded resource)."""
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.refs, self.icon = set(), [], False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if a.get(key): self.ids.add(a[key])
        if tag == "link" and a.get("href"):
            rels = set((a.get("rel") or "").lower().split())
            self.icon |= "icon" in rels
            self.refs.append(("href", a["href"], bool(rels & RESOURCE_RELS)))
        elif a.get("href") and tag == "a": self.refs.append(("href", a["href"], False))
        for key in ("src", "data"):
            if a.get(key) and tag in LOADING_TAGS:
                self.refs.append((key, a[key], True))
        if a.get("srcset"):
            for part in a["srcset"].split(","): self.refs.append(("srcset", part.strip().split(" ")[0], True))


@functools.cache
def parse(path: Path) -> Page:
    p = Page()
    p.feed(path.read_text(errors="replace"))
    return p


def check_pages_exist():
    for _, stems in sidebar():
        for s in stems: check((SITE / f"{s}.html").is_file(), f"page {s}.html (nbs/sidebar.yml)")
    listed = {s for _, stems in sidebar() for s in stems}
    for nb in chapters():
        if nb.stem not in listed: check((SITE / f"{nb.stem}.html").is_file(), f"page {nb.stem}.html (nbs/{nb.name})")
    for m in modules(): check((SITE / "api" / f"{m}.html").is_file(), f"API page api/{m}.html")
    for extra in ("search.html", "genindex.html", "searchindex.js", "api/index.html"):
        check((SITE / extra).is_file(), f"site file {extra}")


def notebooks() -> list[Path]:
    "nbs/*.ipynb but scratch notebooks (`_*.ipynb`)."
    return sorted(p for p in NBS.glob("*.ipynb") if not p.name.startswith("_"))


def is_appendix(nb: Path) -> bool: return nb.match(APPENDIX)


def cells(nb: Path, kind: str) -> list[tuple[int, str, str]]:
    "(index, id, source) of the notebook's cells of `kind` (markdown or code)."
    return [(i, c.get("id", ""), "".join(c["source"])) for i, c in enumerate(json.loads(nb.read_text())["cells"])
            if c["cell_type"] == kind]


def words(md: str) -> int:
    """Words of a markdown cell as a reader reads them: link targets, HTML tags and comments left out."""
    md = re.sub(r"<!--.*?-->", " ", md, flags=re.S)
    md = re.sub(r"\]\([^)]*\)", "]", md)
    md = re.sub(r"<[^>]+>", " ", md)
    return sum(1 for w in md.split() if re.search(r"\w", w))


def book_checks() -> dict[str, int]:
    """(b)-(f): the notebooks' prose and cells, no site needed. Returns each check's count of offenders."""
    nbs = notebooks()
    where = lambda nb, i, cid: f"nbs/{nb.name} cell {i}" + (f" ({cid})" if cid else "")
    hashes, long_md, endings, long_code = [], [], [], []
    for nb in nbs:
        for i, cid, src in cells(nb, "markdown"):
            if not is_appendix(nb):
                for m in {m.group(): m for m in HASH.finditer(src)}.values():     # each hash once a cell
                    line = src[:m.start()].count("\n")
                    hashes.append(f"{where(nb, i, cid)}: {m.group()} in "
                                  f"{src.splitlines()[line].strip()[:90]!r}")
            if (n := words(src)) > MAX_MD_WORDS: long_md.append(f"{where(nb, i, cid)}: {n} words")
        if nb.stem != "index" and not is_appendix(nb):
            heads = {l.strip() for _, _, src in cells(nb, "markdown") for l in src.splitlines()}
            missing = [h for h in HEADINGS if not any(re.fullmatch(rf"##\s+{h}\b.*", l) for l in heads)]
            if missing: endings.append(f"nbs/{nb.name}: no " + " and no ".join(f"'## {h}'" for h in missing))
        for i, cid, src in cells(nb, "code"):
            if (n := len(src.rstrip().splitlines())) > MAX_CODE_LINES:
                export = " (exported)" if re.search(r"^#\s*\|\s*export", src, re.M) else ""
                long_code.append(f"{where(nb, i, cid)}: {n} lines{export}")
    readme = (ROOT / "README.md").read_text()
    images = figures(readme)
    print(f"     (the form of {len(nbs)} notebooks and README.md; appendix: "
          f"{[p.name for p in nbs if is_appendix(p)] or 'none yet'})")
    report("(b) commit hashes in chapter prose", hashes)
    report(f"(c) markdown cells over {MAX_MD_WORDS} words", long_md)
    report("(d) chapters without '## Summary' and '## Exercises'", endings)
    report("(e) README.md without an image ![...](...)", [] if images else ["README.md: no ![...](...)"])
    report(f"(f) code cells over {MAX_CODE_LINES} lines", long_code)
    return {"b": len(hashes), "c": len(long_md), "d": len(endings), "e": 0 if images else 1, "f": len(long_code)}


def broken_refs(html: Path) -> list[str]:
    """Local links that lead nowhere, anchors that name no id, and resources loaded from the network."""
    bad = []
    for attr, url, resource in parse(html).refs:
        parts = urlsplit(url)
        if parts.scheme in ("http", "https") or url.startswith("//"):
            if resource: bad.append(f"remote resource {attr}={url}")
            continue
        if parts.scheme or not (parts.path or parts.fragment): continue  # mailto:, javascript:, data:, "#"
        target = (html.parent / unquote(parts.path)).resolve() if parts.path else html
        if target.is_dir(): target = target / "index.html"
        if SITE.resolve() not in target.parents and target != SITE.resolve():
            bad.append(f"{attr}={url} leaves the site")
        elif not target.is_file():
            bad.append(f"{attr}={url} (no file {target.relative_to(SITE.resolve())})")
        elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in parse(target).ids:
            bad.append(f"{attr}={url} (no id {parts.fragment!r} in {target.relative_to(SITE.resolve())})")
    return bad


def check_links():
    pages = sorted(p for p in SITE.rglob("*.html") if "_static" not in p.relative_to(SITE).parts)  # theme templates
    refs = 0
    for html in pages:
        bad = broken_refs(html.resolve())
        refs += len(parse(html.resolve()).refs)
        more = f" (+{len(bad) - 5} more)" if len(bad) > 5 else ""
        check(not bad, f"links of {html.relative_to(SITE)}", "; ".join(bad[:5]) + more)
    no_icon = [str(p.relative_to(SITE)) for p in pages if not parse(p.resolve()).icon]
    check(not no_icon, "every page names its icon (else a browser asks for /favicon.ico: a 404)",
          f"{len(no_icon)} pages without <link rel=icon>, e.g. {no_icon[:3]}")
    print(f"     ({len(pages)} pages, {refs} links and resources crawled)")


def chromium_path() -> str | None:
    return os.environ.get("CHROMIUM") or next(filter(None, map(shutil.which, (
        "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"))), None)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args): pass


def check_in_browser():
    from playwright.sync_api import sync_playwright
    exe = chromium_path()
    check(exe is not None, "a Chromium to check the pages with", "install Debian's chromium or set CHROMIUM")
    if exe is None: return
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(SITE)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    SHOTS.mkdir(exist_ok=True)
    for old in SHOTS.glob("*.png"): old.unlink()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
            for url, what in BROWSER_PAGES + [SEARCH]:
                visit(browser, origin, url, what)
            check_code_width(browser, origin)
            browser.close()
    finally:
        server.shutdown()


def visit(browser, origin: str, url: str, what: str):
    ctx = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
    page, problems = ctx.new_page(), []
    ctx.route("**/*", lambda route: route.continue_() if route.request.url.startswith(origin)
              else (problems.append(f"non-local request {route.request.url}"), route.abort()))
    page.on("console", lambda m: m.type == "error" and problems.append(f"console error: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: r.url.startswith(origin)
            and problems.append(f"failed request {r.url}: {r.failure}"))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"HTTP {r.status} {r.url}"))
    name = re.sub(r"[^A-Za-z0-9]+", "_", url.split(".html")[0]).strip("_")
    resp = page.goto(f"{origin}/{url}", wait_until="networkidle")
    if resp is None or not resp.ok: problems.append(f"no page at {url}")
    if url.startswith("search.html"):
        try:
            page.wait_for_selector("#search-results li", timeout=15000)
        except Exception:
            problems.append("search found nothing")
        hits = page.locator("#search-results li").count()
    imgs = page.evaluate("""() => Array.from(document.images).map(i => ({src: i.currentSrc || i.src,
                            ok: i.complete && i.naturalWidth > 0, content: !!i.closest('.cell_output')}))""")
    problems += [f"broken image {i['src']}" for i in imgs if not i["ok"]]
    plots = [i for i in imgs if i["content"]]
    page.screenshot(path=str(SHOTS / f"{name}.png"))
    if plots:
        page.locator(".cell_output img").first.scroll_into_view_if_needed()
        page.mouse.wheel(0, -120)
        page.wait_for_timeout(300)
        page.screenshot(path=str(SHOTS / f"{name}_plot.png"))
    title = page.title()
    ctx.close()
    extra = f", {hits} search hits" if url.startswith("search.html") else f", {len(plots)} plots"
    check(not problems, f"browser: {url} ({what}: '{title}', {len(imgs)} images{extra})", "; ".join(problems[:6]))


VIEWPORT = {"width": 1280, "height": 900}    # the default width every page is checked at
# Per `pre` block: how far it scrolls sideways, whether it is a cell's output, its longest line and how many
# characters of the code font fit its width. Folded (<details>) cells are opened first.
OVERFLOW_JS = """() => {
  document.querySelectorAll('details').forEach(d => d.open = true);
  return Array.from(document.querySelectorAll('pre')).filter(p => p.offsetParent !== null).map(p => {
    const cs = getComputedStyle(p), probe = document.createElement('span');
    probe.textContent = '0'.repeat(100);
    p.appendChild(probe);
    const ch = probe.getBoundingClientRect().width / 100;
    probe.remove();
    const pad = parseFloat(cs.paddingLeft) + parseFloat(cs.paddingRight);
    const lines = p.textContent.split('\\n');
    const longest = lines.reduce((a, l) => l.length > a.length ? l : a, '');
    const box = p.closest('.highlight') || p;
    return {over: Math.max(p.scrollWidth - p.clientWidth, box.scrollWidth - box.clientWidth),
            output: !!p.closest('.cell_output'), cols: Math.floor((p.clientWidth - pad) / ch),
            longest: longest.length, line: longest.trim().slice(0, 60)};
  });
}"""


def code_pages() -> list[str]:
    "The pages whose code blocks are checked: every chapter, every API page and every source (viewcode) page."
    pages = [f"{nb.stem}.html" for nb in chapters()] + [f"api/{m}.html" for m in modules()]
    return pages + sorted(p.relative_to(SITE).as_posix() for p in (SITE / "_modules").rglob("*.html"))


def check_code_width(browser, origin: str):
    """(a) No code block scrolls sideways at the default width; outputs that scroll are counted only."""
    ctx = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
    ctx.route("**/*", lambda route: route.continue_() if route.request.url.startswith(origin) else route.abort())
    page, wide, outputs, sources, blocks, cols = ctx.new_page(), [], [], [], 0, set()
    for url in code_pages():
        page.goto(f"{origin}/{url}", wait_until="load")
        for b in page.evaluate(OVERFLOW_JS):
            blocks += 1
            if not b["output"] and b["cols"] > 0: cols.add(b["cols"])
            if b["over"] > 1:
                kind = outputs if b["output"] else sources if url.startswith("_modules/") else wide
                kind.append(f"{url}: {b['over']}px too wide, longest line {b['longest']} characters: {b['line']!r}")
    ctx.close()
    fit = f"{min(cols)}-{max(cols)}" if cols else "?"
    print(f"     ({len(code_pages())} pages, {blocks} blocks; a code block fits {fit} characters at "
          f"{VIEWPORT['width']} px)")
    report(f"(a) code blocks that scroll sideways at {VIEWPORT['width']} px", wide)
    report("    cell outputs that scroll sideways (report only)", outputs, info=True, show=5)
    report("    source pages (_modules/) that scroll sideways: nbdev's module docstrings (report only)", sources,
           info=True, show=3)
    if not wide: return
    longer = sum(int(w.split("longest line ")[1].split()[0]) > 100 for w in wide)
    print(f"     ({longer} of the {len(wide)} blocks have a line of more than 100 characters)")


def main():
    global REPORT_ONLY, SHOW
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report-only", action="store_true",
                    help="the form checks (a)-(f) warn instead of failing (also: CHECK_SITE_REPORT_ONLY=1)")
    ap.add_argument("--notebooks", action="store_true", help="only the checks (b)-(f) of the notebooks; no site")
    ap.add_argument("--show", type=int, default=SHOW, help=f"offenders listed per form check (default {SHOW})")
    a = ap.parse_args()
    REPORT_ONLY, SHOW = (set("abcdef") if a.report_only else REPORT_ONLY), a.show
    if a.notebooks:
        book_checks()
        return finish()
    if not (SITE / "index.html").is_file(): sys.exit(f"no site at {SITE}: run python tools/build_docs.py first")
    check_pages_exist()
    check_links()
    book_checks()
    check_in_browser()
    finish(shots=True)


def finish(shots: bool = False):
    count = {w: sum(r == w for r, _ in results) for w in ("PASS", "FAIL", "WARN")}
    if shots:
        print(f"screenshots: {SHOTS.relative_to(ROOT)}/ ({', '.join(sorted(p.name for p in SHOTS.glob('*.png')))})")
    warned = (f", {count['WARN']} warned (report-only: {', '.join(sorted(REPORT_ONLY))})"
              if REPORT_ONLY else "")
    print(f"{count['PASS']} passed, {count['FAIL']} failed{warned}")
    sys.exit(1 if count["FAIL"] else 0)


if __name__ == "__main__":
    main()
