"""One self-contained HTML page from report markdown: `xsyn report --html` and `xsyn experiment report --html`.

The page is built from the markdown the report already writes (report.md, and for an experiment its
index.md followed by each task's report.md), so every table, mark, note and figure of the markdown is
in it, including sections other report stages add, with nothing kept in two places. What the page adds:

- every image the markdown links (bar charts, heatmaps, training curves, analyses' plots) inlined as a
  `data:` URI, and the CSS and JavaScript inline: a Content-Security-Policy forbids any other source, so
  the page opens on an offline cluster node exactly as it does here;
- a contents list of the sections (links, reachable with Tab);
- sortable tables: each header cell becomes a button (Tab to it, Enter or Space sorts; again: the other
  way; a third time: the original order), with `aria-sort` set and the new order announced. Numbers sort
  as numbers (`72.3 ± 0.4` by 72.3, `+1.2*` by 1.2, `–` last).
"""

from __future__ import annotations

import base64
import html
import mimetypes
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

from xsyn.report.runs import ReportError
from xsyn.utils.io import atomic_write_text

_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


@dataclass(frozen=True)
class Part:
    """One markdown document of the page: its text, the folder its relative links start from, and
    how many levels its headings go down (a task's report under the experiment's index: 1)."""

    markdown: str
    folder: Path
    demote: int = 0
    source: str = ""  # its file, relative to the page: links to it become links into the page


def write_html(parts: Sequence[Part], path: Path, title: str) -> Path:
    """Write the page of `parts` to `path` (atomically) and return it."""
    atomic_write_text(path, html_page(parts, title))
    return path


def html_page(parts: Sequence[Part], title: str) -> str:
    """The whole page: head with the inline style, contents, the parts' sections, the inline script."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    anchors = _Anchors()
    part_ids = {part.source: anchors.claim(part.source or "part") for part in parts}
    bodies, contents = [], []
    for part in parts:
        tokens = md.parse(part.markdown)
        contents += _prepare(tokens, part, anchors, part_ids)
        bodies.append(f'<div class="part" id="{part_ids[part.source]}">\n'
                      f"{md.renderer.render(tokens, md.options, {})}</div>")
    nav = "\n".join(f'<li class="level{level}"><a href="#{anchor}">{html.escape(text)}</a></li>'
                    for level, anchor, text in contents)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            '<a class="skip" href="#main">Skip to the report</a>\n'
            f'<nav aria-label="Contents"><h2 id="contents">Contents</h2>\n<ul>\n{nav}\n</ul></nav>\n'
            f'<main id="main" tabindex="-1">\n{"".join(bodies)}\n</main>\n'
            '<p id="sort-status" class="visually-hidden" aria-live="polite"></p>\n'
            f"<script>{_SCRIPT}</script>\n</body>\n</html>\n")


class _Anchors:
    """Unique `id`s from heading texts (`pawsx-validation`, then `pawsx-validation-2`)."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def claim(self, text: str) -> str:
        base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"
        anchor, n = base, 1
        while anchor in self.used:
            n += 1
            anchor = f"{base}-{n}"
        self.used.add(anchor)
        return anchor


def _prepare(tokens: list[Token], part: Part, anchors: _Anchors, part_ids: dict[str, str]) -> list[tuple]:
    """Demote the headings and give them ids, inline the images, point links to included parts into the
    page; return the contents entries (level, id, text) of the headings of levels 1 and 2 after demotion."""
    contents = []
    for i, token in enumerate(tokens):
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(6, int(token.tag[1]) + part.demote)}"
        if token.type == "heading_open":
            text = tokens[i + 1].content
            anchor = anchors.claim(text)
            token.attrSet("id", anchor)
            if int(token.tag[1]) <= 2:
                contents.append((int(token.tag[1]), anchor, text))
        elif token.type == "table_open":
            token.attrSet("class", "sortable")
        elif token.type == "inline":
            _inline(token.children or [], part, part_ids)
    return contents


def _inline(children: list[Token], part: Part, part_ids: dict[str, str]) -> None:
    """Images inlined; a link to an included part points into the page; any other link (none the report writes:
    one would come from a results field that escaped `format.md`) is left as its text, so the page links nowhere."""
    unlinking = False
    for child in children:
        if child.type == "image":
            child.attrSet("src", _data_uri(part.folder, str(child.attrGet("src"))))
        elif child.type == "link_open" and str(child.attrGet("href")) in part_ids:
            child.attrSet("href", f"#{part_ids[str(child.attrGet('href'))]}")
        elif child.type == "link_open" and not str(child.attrGet("href")).startswith("#"):
            child.type, child.content, unlinking = "text", "", True
        elif child.type == "link_close" and unlinking:
            child.type, child.content, unlinking = "text", "", False


def _data_uri(folder: Path, src: str) -> str:
    """The image file as a `data:` URI; a missing file is an error (the page would show a hole), and so is one
    outside the report's folder (an address, an absolute path, `..`: the report writes none)."""
    path = folder / src
    if "://" in src or src.startswith(("/", "data:")) or ".." in Path(src).parts:
        raise ReportError(f"{folder}: the report links the image {src!r}, which is not a file in its folder; "
                          "write the report again")
    if not path.is_file():
        raise ReportError(f"{path}: the report links this image but it is not there; write the report again")
    kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return f"data:{kind};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


_STYLE = """
:root { color-scheme: light; --ink: #1b1b1b; --muted: #555; --rule: #d0d0d0; --accent: #0b57d0; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); background: #fff;
       margin: 0 auto; max-width: 1200px; padding: 1rem 1.5rem 3rem; }
h1, h2, h3, h4 { line-height: 1.25; margin: 1.6em 0 0.5em; }
h2 { border-bottom: 1px solid var(--rule); padding-bottom: 0.2em; }
nav ul { columns: 2; padding-left: 1.2em; } nav li.level2 { margin-left: 1em; }
nav h2 { margin-top: 0.5em; }
a { color: var(--accent); }
:focus-visible { outline: 3px solid #f0a000; outline-offset: 2px; }
.skip { position: absolute; left: -999px; } .skip:focus { left: 1rem; top: 0.5rem; background: #fff; padding: 0.3em; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-variant-numeric: tabular-nums; display: block;
        overflow-x: auto; max-width: 100%; }
th, td { border-bottom: 1px solid var(--rule); padding: 0.25em 0.6em; text-align: right; white-space: nowrap; }
th:first-child, td:first-child, th.text, td.text { text-align: left; }
thead th { background: #f3f5f8; position: sticky; top: 0; }
th button { font: inherit; font-weight: 600; background: none; border: 0; padding: 0; cursor: pointer; color: inherit; }
th button::after { content: " \\2195"; color: var(--muted); }
th[aria-sort="ascending"] button::after { content: " \\2191"; color: var(--ink); }
th[aria-sort="descending"] button::after { content: " \\2193"; color: var(--ink); }
tbody tr:hover { background: #fafbfd; }
img { max-width: 100%; height: auto; display: block; margin: 0.5em 0; }
code { background: #f3f3f3; padding: 0 0.2em; border-radius: 3px; }
@media print { nav, .skip { display: none; } thead th { position: static; } }
"""

# Sorting: numbers by their leading value ("72.3 ± 0.4" -> 72.3, "+1.2*" -> 1.2, "−0.4" -> -0.4); cells
# without one ("–") sort last either way; a column with any text that is not a number sorts as text.
_SCRIPT = r"""
(function () {
  "use strict";
  var status = document.getElementById("sort-status");
  function key(text) {
    var m = text.trim().replace("\u2212", "-").match(/^[+-]?\d+(?:\.\d+)?(?:e[+-]?\d+)?/i);
    return m ? parseFloat(m[0]) : null;
  }
  function isNumeric(table, column) {
    return Array.prototype.every.call(table.tBodies[0].rows, function (row) {
      var text = row.cells[column] ? row.cells[column].textContent : "";
      return key(text) !== null || !/[A-Za-z]/.test(text);
    });
  }
  function sortBy(table, column, th) {
    var body = table.tBodies[0];
    var next = {none: "ascending", ascending: "descending", descending: "none"}[th.getAttribute("aria-sort")];
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell) {
      cell.setAttribute("aria-sort", "none");
    });
    th.setAttribute("aria-sort", next);
    var rows = Array.prototype.slice.call(body.rows);
    var numeric = isNumeric(table, column);
    rows.sort(function (a, b) {
      if (next === "none") { return a.dataset.order - b.dataset.order; }
      var x = a.cells[column] ? a.cells[column].textContent : "";
      var y = b.cells[column] ? b.cells[column].textContent : "";
      var kx = numeric ? key(x) : x.trim(), ky = numeric ? key(y) : y.trim();
      if (kx === null || kx === "\u2013") { return (ky === null || ky === "\u2013") ? 0 : 1; }
      if (ky === null || ky === "\u2013") { return -1; }
      var order = numeric ? kx - ky : kx.localeCompare(ky);
      return next === "ascending" ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    status.textContent = next === "none" ? "original order" : "sorted by " + th.textContent.trim() + ", " + next;
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    if (!table.tHead || !table.tBodies.length) { return; }
    Array.prototype.forEach.call(table.tBodies[0].rows, function (row, i) { row.dataset.order = i; });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, column) {
      var button = document.createElement("button");
      button.type = "button";
      while (th.firstChild) { button.appendChild(th.firstChild); }
      if (!button.textContent.trim()) { button.setAttribute("aria-label", "row labels"); }
      th.appendChild(button);
      th.setAttribute("aria-sort", "none");
      button.addEventListener("click", function () { sortBy(table, column, th); });
      if (!isNumeric(table, column)) {  // words read from the left, numbers line up on the right
        th.classList.add("text");
        Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
          if (row.cells[column]) { row.cells[column].classList.add("text"); }
        });
      }
    });
  });
}());
"""
