"""Check the built website (_site/) as a reader's browser sees it, offline.

1. Every chapter of the book and every module's API page has its HTML page.
2. Every HTML file is crawled: each local href/src must resolve to a file and each `#anchor` to an id there;
   no page may load a remote resource (an http(s) URL in a src= or in a stylesheet/script/icon link).
3. The front page, chapters with plots, the benchmarks chapter, an API page and a search are opened in
   headless Chromium (Debian's `chromium` driven by playwright; no browser is downloaded) from a local server:
   any console error, page error, failed or non-local request, or broken image fails; screenshots go to
   _site_screenshots/.
Prints one line per check and `N passed, M failed`; exits 1 if any failed. Usage: `python tools/check_site.py`.
"""
import functools, http.server, os, re, shutil, sys, threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
SITE, SHOTS = ROOT / "_site", ROOT / "_site_screenshots"
sys.path.insert(0, str(ROOT / "tools"))
from build_docs import chapters, modules, sidebar  # noqa: E402  (the book's order and the module list)

BROWSER_PAGES = [("index.html", "front page"), ("03_continuous_batching.html", "chapter with plots"),
                 ("04f_paged_measured.html", "chapter with plots"), ("07_benchmarks.html", "benchmarks chapter"),
                 ("api/llm.html", "API reference")]
SEARCH = ("search.html?q=scheduler", "search")
LOADING_TAGS = ("img", "script", "iframe", "source", "video", "audio", "embed", "object", "input")
RESOURCE_RELS = {"stylesheet", "icon", "shortcut", "preload", "modulepreload", "apple-touch-icon", "manifest"}

results: list[tuple[bool, str]] = []


def check(ok: bool, what: str, detail: str = ""):
    results.append((bool(ok), what))
    print(f"{'PASS' if ok else 'FAIL'} {what}" + ("" if ok or not detail else f": {detail}"), flush=True)


class Page(HTMLParser):
    """The ids a page defines and the URLs it refers to: (attribute, url, is a loaded resource)."""
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.refs = set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if a.get(key): self.ids.add(a[key])
        if tag == "link" and a.get("href"):
            rels = set((a.get("rel") or "").lower().split())
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
            browser.close()
    finally:
        server.shutdown()


def visit(browser, origin: str, url: str, what: str):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, device_scale_factor=1)
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


def main():
    if not (SITE / "index.html").is_file(): sys.exit(f"no site at {SITE}: run python tools/build_docs.py first")
    check_pages_exist()
    check_links()
    check_in_browser()
    failed = sum(not ok for ok, _ in results)
    print(f"screenshots: {SHOTS.relative_to(ROOT)}/ ({', '.join(sorted(p.name for p in SHOTS.glob('*.png')))})")
    print(f"{len(results) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
