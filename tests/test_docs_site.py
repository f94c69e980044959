"""The documentation site: `mkdocs build --strict` builds it, every link in it leads to a page and an anchor that
exist, and every page loads in headless Chromium without a console message (served over HTTP, as a reader's
browser would get it)."""

from __future__ import annotations

import functools
import http.server
import json
import re
import shutil
import subprocess
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from console import REPO

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs) -> None:
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        for key in ("href", "src"):
            if attrs.get(key) and tag in ("a", "img", "link", "script"):
                self.links.append(attrs[key])


@functools.cache
def _parsed(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def broken_links(site: Path) -> list[str]:
    """Every relative link of the site's pages whose file, or whose #anchor on it, does not exist."""
    broken = []
    for page in sorted(site.rglob("*.html")):
        for link in _parsed(page).links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith("//"):
                continue  # another site (the theme's fonts are off: nothing is fetched from elsewhere)
            base = site if parts.path.startswith("/") else page.parent  # the 404 page links from the site's root
            target = (base / unquote(parts.path).lstrip("/")).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{page.relative_to(site)}: {link} (no such file)")
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in _parsed(target).ids:
                broken.append(f"{page.relative_to(site)}: {link} (no such anchor)")
    return broken


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    mkdocs = shutil.which("mkdocs")
    if mkdocs is None:
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]' (the README's CI set-up installs it)")
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run([mkdocs, "build", "--strict", "--quiet", "--site-dir", str(out)], cwd=REPO,
                           capture_output=True, text=True, env={"NO_MKDOCS_2_WARNING": "1", **_env()}, timeout=300)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return out


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def test_no_link_of_the_site_is_broken(site):
    assert (site / "index.html").is_file() and (site / "settings" / "index.html").is_file()
    assert broken_links(site) == []


def test_the_link_check_finds_a_missing_page_and_a_missing_anchor(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text('<h2 id="here">x</h2><a href="#here">ok</a><a href="../b/">b</a>'
                                               '<a href="#gone">x</a><img src="pic.png">', encoding="utf-8")
    assert broken_links(tmp_path) == ["a/index.html: ../b/ (no such file)", "a/index.html: #gone (no such anchor)",
                                      "a/index.html: pic.png (no such file)"]


HARNESS_PAGE = "harness.html"  # the test's own page, written into the built site
_HARNESS = """<!doctype html><html><head><meta charset="utf-8"><title>harness</title></head><body>
<pre id="result">waiting</pre><script>
const pages = %s, seen = {};
pages.forEach(function (path) {
  const frame = document.createElement("iframe");
  frame.style.width = "1280px";  // a laptop's window: the code blocks must show every command whole
  frame.style.height = "800px";
  frame.onload = function () {
    const doc = frame.contentDocument;
    const clipped = Array.from(doc.querySelectorAll("pre > code")).filter(function (code) {
      return code.scrollWidth > code.clientWidth + 1;
    }).map(function (code) { return code.textContent.split("\\n")[0].slice(0, 60); });
    seen[path] = {title: doc.title, headings: doc.querySelectorAll("article h1").length, clipped: clipped};
    if (Object.keys(seen).length === pages.length) {
      document.getElementById("result").textContent = JSON.stringify(seen);
    }
  };
  frame.src = path;
  document.body.appendChild(frame);
});
</script></body></html>"""


def test_every_page_loads_in_chromium_without_a_console_message(site):
    browser = next(filter(None, map(shutil.which, BROWSERS)), None)
    if browser is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium; the README's CI set-up installs it)")
    pages = sorted(str(p.relative_to(site).parent) + "/" for p in site.rglob("index.html")
                   if p.parent.name not in ("search", "assets"))
    (site / HARNESS_PAGE).write_text(_HARNESS % json.dumps(["/" + p.lstrip("./") for p in pages]), encoding="utf-8")
    handler = functools.partial(_QuietHandler, directory=str(site))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/{HARNESS_PAGE}"
        loaded = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                 "--disable-dev-shm-usage", f"--user-data-dir={site.parent / 'profile'}",
                                 "--enable-logging=stderr", "--v=0", "--virtual-time-budget=30000", "--dump-dom", url],
                                capture_output=True, text=True, timeout=180)
        server.shutdown()
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    found = re.search(r'<pre id="result">(.*?)</pre>', loaded.stdout, flags=re.S)
    assert found and found.group(1) != "waiting", f"not every page loaded: {loaded.stderr[-3000:]}"
    seen = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert len(seen) == len(pages) >= 14
    for path, page in seen.items():
        assert page["title"].endswith("xsyn") and page["headings"] == 1, (path, page)
        assert page["clipped"] == [], f"{path}: code blocks cut off at 1280 px: {page['clipped']}"
    console = [line for line in loaded.stderr.splitlines() if "CONSOLE" in line]
    assert console == [], "console messages:\n" + "\n".join(console)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def test_the_built_pages_speak_in_user_words(site):
    """The API pages are made from docstrings: they too speak to users only."""
    from test_docs_commands import PROCESS_WORDS

    hits = []
    for page in sorted(site.rglob("*.html")):
        text = re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8"))
        hits += [f"{page.relative_to(site)}: ...{text[max(0, m.start() - 50):m.end() + 30]}..."
                 for m in PROCESS_WORDS.finditer(text)]
    assert not hits, "\n".join(hits)


def test_every_page_wraps_its_command_blocks_rather_than_hiding_their_ends(site):
    """At 1280 px the theme cut long commands off behind a scroll bar shown only on hover; the site's stylesheet
    wraps them. (The Chromium test above measures that no block is cut off.)"""
    pages = [p for p in site.rglob("*.html") if "<pre" in p.read_text(encoding="utf-8") and p.name != HARNESS_PAGE]
    assert len(pages) >= 5
    for page in pages:
        sheets = [link for link in _parsed(page).links if link.endswith(".css")]
        assert any(link.endswith("stylesheets/extra.css") for link in sheets), (page, sheets)
    css = (site / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    rule = re.search(r"\.md-typeset pre > code \{([^}]*)\}", css)
    assert rule and "white-space: pre-wrap" in rule.group(1) and "overflow-wrap: anywhere" in rule.group(1)
