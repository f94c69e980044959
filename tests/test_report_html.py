"""`xsyn report --html`: one self-contained page, checked as text and in a real browser (headless Chromium)."""

import base64
import html
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from markdown_it import MarkdownIt
from test_report import labelled, write_run

from xsyn.cli import main
from xsyn.report import ReportError
from xsyn.report.html import Part, html_page
from xsyn.utils import plots

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


LOSS = {"en": 0, "de": 20, "fr": 24, "ja": 40}  # examples fewer right than in English
GAT_GAIN = {"en": 0, "de": 2, "fr": 6, "ja": 10}  # ... of which gat gets these right (gains vary for the analyses)


def example_runs(root):
    """Two seeds of gat and of a none baseline on en, de, fr and ja (per-example files: bootstrap marks), with
    language pairs (heatmaps) and, for gat seed 1, real training curves."""
    runs, baselines = [], []
    for variant, shift, found in (("gat", 4.0, runs), ("none", 0.0, baselines)):
        losses = [(lang, loss, GAT_GAIN[lang] if variant == "gat" else 0) for lang, loss in LOSS.items()]
        for seed, right in ((1, 160), (2, 164)):
            right += int(2 * shift) * 2
            pairs = {"en": {"en": 80.0 + shift, "de": 60.0 + shift}, "de": {"en": 70.0 + shift, "de": 75.0}}
            found.append(write_run(root / f"{variant}-seed{seed}", "eval", variant=variant, seed=seed,
                                   per_language={lang: (right - loss + gain) / 2 for lang, loss, gain in losses},
                                   pairs=pairs,
                                   examples={lang: labelled(set(range(right - loss + gain)))
                                             for lang, loss, gain in losses}))
    records = [{"step": s, "lr": 1e-4 * (1 - s / 40), "loss": 2.0 / (1 + s)} for s in range(0, 40, 4)]
    (root / "gat-seed1" / "training_curves.png").write_bytes(plots.training_curves_png(records, title="gat seed 1"))
    for run in runs + baselines:
        results = json.loads((run / "results.json").read_text())
        (run / "results.json").write_text(json.dumps({**results, "run_dir": str(run.parent)}))
    return runs, baselines


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("html")
    runs, baselines = example_runs(root / "runs")
    args = ["report", *map(str, runs), *[a for b in baselines for a in ("--baseline", str(b))],
            "--resamples", "50", "--analysis", "family,typology", "--permutations", "100", "--html",
            "--output-dir", str(root / "out")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return root / "out"


def _sections(markdown):
    return re.findall(r"^#{1,3} (.+)$", markdown, flags=re.M)


def test_the_page_holds_every_section_and_every_figure_inline_and_nothing_from_elsewhere(report_dir):
    page = (report_dir / "report.html").read_text(encoding="utf-8")
    markdown = (report_dir / "report.md").read_text(encoding="utf-8")
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
    # the bars, two score heatmaps, the delta heatmap, one run's curves; the family chart, the typology scatters of
    # languages and of language pairs
    assert len(linked) == 8 and sum(path.startswith("analysis/") for path in linked) == 3
    inlined = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert [base64.b64decode(data) for data in inlined] == [(report_dir / path).read_bytes() for path in linked]
    # nothing the browser would fetch: every src/href is inline data or a link into the page
    assert set(re.findall(r'(?:src|href)="([^"#:]*)[:#]?', page)) <= {"data", ""}
    assert "default-src 'none'" in page
    headings = re.findall(r'<h(\d) id="([^"]+)">(.*?)</h\1>', page.split("<main")[1])
    assert [html.unescape(text) for _, _, text in headings] == _sections(markdown)
    contents = re.findall(r'<li class="level\d"><a href="#([^"]+)">', page)
    assert contents == [anchor for level, anchor, _ in headings if int(level) <= 2]
    assert "<td>+9.0*‡</td>" in page and page.count('<table class="sortable">') == markdown.count("\n|---")
    assert '<h2 id="where-syntax-helps">Where syntax helps</h2>' in page and "rho = " in page


def test_an_experiment_page_demotes_its_task_reports_and_links_into_itself(tmp_path):
    (tmp_path / "pawsx").mkdir()
    (tmp_path / "pawsx" / "bars.png").write_bytes(b"\x89PNG bars")
    index = Part("# My table\n\nFull report: [pawsx/report.md](pawsx/report.md).\n", tmp_path)
    task = Part("# xsyn report\n\n## pawsx · test\n\n![bars](bars.png)\n", tmp_path / "pawsx", demote=1,
                source="pawsx/report.md")
    page = html_page([index, task], "My table")
    assert '<a href="#pawsx-report-md">pawsx/report.md</a>' in page and 'id="pawsx-report-md"' in page
    assert '<h1 id="my-table">' in page and '<h2 id="xsyn-report">' in page and '<h3 id="pawsx-test">' in page
    bars = base64.b64encode((tmp_path / "pawsx" / "bars.png").read_bytes()).decode()
    assert f'src="data:image/png;base64,{bars}"' in page
    with pytest.raises(ReportError, match=r"pawsx/gone\.png: the report links this image but it is not there"):
        html_page([Part("![gone](gone.png)\n", tmp_path / "pawsx")], "x")


# The probe: errors of any kind (a script error, console.error, a blocked fetch) and, after the page's own script
# ran, each section's box, the header buttons, and the first table's order after sorting by avg (up, down, reset).
_HOOK = """<script>
window.__errors = [];
window.addEventListener("error", function (e) { window.__errors.push("error: " + e.message); });
window.addEventListener("securitypolicyviolation", function (e) { window.__errors.push("blocked: " + e.blockedURI); });
var __log = console.error;
console.error = function (m) { window.__errors.push("console: " + m); __log.apply(console, arguments); };
</script>"""
_PROBE = """<script>
(function () {
  var table = document.querySelector("table.sortable"), header = table.tHead.rows[0].cells;
  var avg = Array.prototype.findIndex.call(header, function (th) { return th.textContent.trim() === "avg"; });
  var orders = [];
  try {
    for (var i = 0; i < 3; i++) {
      header[avg].querySelector("button").click();
      orders.push([header[avg].getAttribute("aria-sort"),
                   Array.prototype.map.call(table.tBodies[0].rows, function (r) { return r.cells[0].textContent; })]);
    }
  } catch (e) { window.__errors.push("sorting: " + e); }
  var boxes = Array.prototype.map.call(document.querySelectorAll("main h1, main h2, main h3"), function (h) {
    var r = h.getBoundingClientRect(), next = h.nextElementSibling.getBoundingClientRect();
    return [h.textContent, Math.round(r.top + window.scrollY), Math.round(next.bottom + window.scrollY)];
  });
  var probe = document.createElement("pre");
  probe.id = "probe";
  probe.textContent = JSON.stringify({errors: window.__errors, orders: orders, boxes: boxes,
    height: document.documentElement.scrollHeight, headers: document.querySelectorAll("th").length,
    buttons: document.querySelectorAll("th > button[type=button]").length,
    text_headers: Array.prototype.map.call(document.querySelectorAll("th.text"), function (th) {
      return th.textContent.trim(); })});
  document.body.appendChild(probe);
}());
</script>"""


def _chromium(browser, page, *flags):
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
               f"--user-data-dir={page.parent / 'profile'}", "--enable-logging=stderr", "--v=0",
               "--force-device-scale-factor=1", "--hide-scrollbars", *flags, page.as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_chromium_loads_the_page_offline_without_errors_and_every_section_is_drawn(report_dir, tmp_path):
    browser = next(filter(None, map(shutil.which, BROWSERS)), None)
    if browser is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium; the README's CI set-up installs it)")
    from PIL import Image

    page = (report_dir / "report.html").read_text(encoding="utf-8")
    probed = tmp_path / "report.html"
    probed.write_text(page.replace("<head>\n", "<head>\n" + _HOOK, 1).replace("</body>", _PROBE + "</body>", 1))
    dumped = _chromium(browser, probed, "--dump-dom")
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    found = re.search(r'<pre id="probe">(.*?)</pre>', dumped.stdout, flags=re.S)
    assert found, f"the probe did not run: {dumped.stderr[-2000:]}"
    probe = json.loads(html.unescape(found.group(1)))
    assert probe["errors"] == [] and "CONSOLE" not in dumped.stderr
    assert probe["buttons"] == probe["headers"] > 0  # every header cell sorts, by a keyboard-reachable button
    # columns of words are set to the left (numbers stay right-aligned): the system names and language families
    assert {"system", "family"} <= set(probe["text_headers"]) and not {"en", "gain", "avg"} & set(probe["text_headers"])
    # gat (avg 80.8) above the baseline (70.5) when descending; ascending the other way; then the original order
    assert probe["orders"] == [["ascending", ["none (baseline)", "gat"]], ["descending", ["gat", "none (baseline)"]],
                               ["none", ["gat", "none (baseline)"]]]
    markdown = (report_dir / "report.md").read_text(encoding="utf-8")
    assert [text for text, _, _ in probe["boxes"]] == _sections(markdown)
    shot = tmp_path / "shot.png"
    drawn = _chromium(browser, probed, f"--screenshot={shot}", f"--window-size=1200,{probe['height']}")
    assert drawn.returncode == 0 and "CONSOLE" not in drawn.stderr, drawn.stderr[-2000:]
    image = Image.open(shot).convert("L")
    assert image.size == (1200, probe["height"])
    for text, top, bottom in probe["boxes"]:  # each heading and what follows it are drawn: not a blank band
        low, high = image.crop((0, top, 1200, bottom)).getextrema()
        assert high - low > 100, f"section {text!r} ({top}-{bottom} px) is blank in the screenshot"


EVIL = ("[click](http://evil.example/a) <a href='http://evil.example/b'>b</a> <script>alert(1)</script> "
        "[j](javascript:alert(2)) <http://evil.example/c> ![i](http://evil.example/d.png) a|b &amp; `x`\n# heading")


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs, self.srcs, self.scripts = [], [], 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.hrefs += [attrs["href"]] if "href" in attrs else []
        self.srcs += [attrs["src"]] if "src" in attrs else []
        self.scripts += tag == "script"


def test_text_from_results_files_is_escaped_and_puts_no_live_link_or_script_in_the_page(tmp_path):
    """Every string a results file carries that the report shows (a system, a seed, a task, a language, a cap, a
    missing language, a parser in a note) holds a markdown link, raw HTML, a script, a javascript: URL, an autolink
    and an image: the page the console script writes links only into itself and runs only its own script."""
    run = write_run(tmp_path / "runs", "gat", variant=f"gat {EVIL}", task=f"t {EVIL}", seed=f"1 {EVIL} ../../../escape",
                    per_language={"en": 90.0, f"de {EVIL}": 80.0},
                    config={"train_lang": "en", "max_steps": EVIL, "parser": f"chain {EVIL}"})
    results = json.loads((run / "results.json").read_text())
    (run / "results.json").write_text(json.dumps({**results, "missing_languages": [EVIL], "train_parser": "gold",
                                                  "run_dir": str(tmp_path / "runs")}))
    (tmp_path / "runs" / "training_curves.png").write_bytes(plots.training_curves_png(
        [{"step": 0, "lr": 1e-4, "loss": 1.0}, {"step": 1, "lr": 1e-4, "loss": 0.5}], title="curves"))
    out = tmp_path / "out"
    done = subprocess.run([shutil.which("xsyn", path=str(Path(sys.executable).parent)), "report", str(run), "--html",
                           "--output-dir", str(out)], capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    page = _Links()
    page.feed((out / "report.html").read_text(encoding="utf-8"))
    assert page.hrefs and all(href.startswith("#") for href in page.hrefs)
    assert page.srcs and all(src.startswith("data:image/png;base64,") for src in page.srcs)
    assert page.scripts == 1  # the page's own (sorting)
    markdown = (out / "report.md").read_text(encoding="utf-8")
    tokens = [t for block in MarkdownIt("commonmark").enable("table").parse(markdown) for t in block.children or []]
    assert not [t for t in tokens if t.type in ("link_open", "html_inline")]
    assert all(not str(t.attrGet("src")).startswith(("http", "/", ".")) for t in tokens if t.type == "image")
    assert markdown.count("\\[click\\](http://evil.example/a)") >= 4 and "\n# heading" not in markdown
    assert sorted(p.name for p in out.rglob("curves-*.png"))[0].startswith("curves-gat_")  # the seed is no path
    assert not list(tmp_path.glob("escape*")) and not list((tmp_path / "runs").glob("escape*"))


def test_the_page_drops_a_link_and_refuses_an_image_the_report_did_not_write(tmp_path):
    page = _Links()
    page.feed(html_page([Part("see [x](http://evil.example/a), <http://evil.example/b> and [in](#contents)",
                              tmp_path)], "t"))
    assert page.hrefs == ["#main", "#contents"]  # the skip link, and the one into the page
    for src in ("http://evil.example/i.png", "/etc/passwd", "../report.json"):
        with pytest.raises(ReportError, match="which is not a file in its folder"):
            html_page([Part(f"![i]({src})", tmp_path)], "t")
