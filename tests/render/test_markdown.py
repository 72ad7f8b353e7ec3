"""Markdown files the tool writes (``report.md``, ``wins_losses.md``) against hostile ids, names and paths.

Each file is rendered with a CommonMark renderer (markdown-it-py with the GitHub-like preset: raw HTML,
tables, strikethrough and bare-URL linkify all on); the rendered HTML must hold no link, image, script,
comment or other tag coming from the data, every table row must keep its cells, and every hostile string
must still be there as visible text.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from helpers import write_jsonl

from ndcg_mlflow.cli import main
from ndcg_mlflow.render.format import md_html, md_text

markdown_it = pytest.importorskip("markdown_it")
pytest.importorskip("linkify_it")

HOSTILE = [
    "![i](http://evil.example/p.png)",
    "[x](javascript:alert(1))",
    "<http://evil.example/auto>",
    "see http://evil.example/bare now",
    "www.evil.example",
    "mail a@evil.example",
    "`tick` ``two``",
    "a|b|c",
    "line1\nline2\r\n\n# line3",
    "<!-- hidden",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "&amp; &#60;b&#62;",
    "**bold** _em_ ~~gone~~ $x$",
    "snake_case, __strong__ and x_*y*_z",
    "# heading",
    "- item",
    "1. item",
    "1) item",
    "+ plus",
    " - spaced",
    "---",
    "=== a-b=c+d/e;f,g?h%i'j\"k",
    "> quote",
    "trailing\\",
    "[ref]: http://evil.example/ref",
    "    indented",
]
NAME = "<!-- <script>alert('n')</script> ![i](http://evil.example/n.png) [l](http://evil.example) |"
# the tags the templates themselves write; anything else in the rendered HTML came from the data
TEMPLATE_TAGS = {
    "h1",
    "h2",
    "h3",
    "p",
    "ul",
    "li",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "details",
    "summary",
    "code",
}


def md() -> markdown_it.MarkdownIt:
    return markdown_it.MarkdownIt("gfm-like")


def visible(text: str) -> str:
    """White space as a browser shows it: every run one space."""
    return re.sub(r"\s+", " ", text).strip()


class Rendered(HTMLParser):
    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.comments: list[str] = []
        self.text: list[str] = []
        self.rows: list[tuple[int, int]] = []  # (table index, cells) per row
        self._table = -1
        self._cells: int | None = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "table":
            self._table += 1
        elif tag == "tr":
            self._cells = 0
        elif tag in ("td", "th") and self._cells is not None:
            self._cells += 1

    def handle_endtag(self, tag):
        if tag == "tr":
            self.rows.append((self._table, self._cells))
            self._cells = None

    def handle_comment(self, data):
        self.comments.append(data)

    def handle_data(self, data):
        self.text.append(data)

    @property
    def visible(self) -> str:
        return visible(" ".join(self.text))


def assert_clean(markdown: str, expected: list[str]) -> Rendered:
    html = md().render(markdown)
    assert "<!--" not in html
    doc = Rendered(html)
    assert set(doc.tags) <= TEMPLATE_TAGS, set(doc.tags) - TEMPLATE_TAGS
    assert not doc.comments
    for table in {t for t, _ in doc.rows}:
        widths = {n for t, n in doc.rows if t == table}
        assert len(widths) == 1, f"table {table} has rows of {sorted(widths)} cells: a pipe or line break leaked"
    shown = doc.visible
    for s in expected:
        assert visible(s) in shown, s
    return doc


def test_the_renderer_would_obey_the_raw_strings():
    """The check is real: unescaped, these strings make links, images, scripts, comments and headings."""
    tags = set()
    for s in HOSTILE:
        tags |= set(Rendered(md().render(s)).tags)
    assert {"a", "img", "script", "h1", "code", "strong", "s", "blockquote", "ol", "pre"} <= tags
    assert "<!-- hidden" in md().render("<!-- hidden\n\nthe rest")  # an open comment hides the rest


def test_escaping_keeps_each_string_as_literal_text_everywhere():
    """One escaping for every markdown context the files use: table cell, list item, heading, paragraph."""
    for s in HOSTILE + [NAME]:
        t = md_text(s)
        assert "\n" not in t and "\r" not in t
        page = (
            f"# {t}\n\n| h | {t} |\n| --- | --- |\n| {t} | x |\n\n- {t}\n\ntext {t} text\n\n"
            f"<details><summary>{md_html(s)}</summary>\n\n</details>\n"
        )
        doc = assert_clean(page, [])
        assert doc.visible.count(visible(s)) == 6, (s, doc.visible)


def test_plain_ids_stay_readable():
    for s in ("demo-product-search", "reranker_v2", "q0128", "P-010196", "a/b;c,d=e?f%g 'h' \"i\""):
        assert md_text(s) == s
    assert md_text("- x") == "\\- x" and md_text("_x_") == "\\_x\\_" and md_text("a.b") == "a\\.b"


def hostile_folder(root: Path) -> Path:
    """Every query id and document id is hostile, and so are the spec name and the qrels file's folder
    (it lies outside the spec's folder, so its path is a note in report.md)."""
    spec_dir = root / "spec"
    data_dir = root / "data ![d](javascript:alert(1)) <i onmouseover=x> | <!-- c"
    spec_dir.mkdir(parents=True)
    data_dir.mkdir()
    docs = HOSTILE + ["plain"]
    qrels, base, cand = [], [], []
    for i, q in enumerate(HOSTILE):
        for j, d in enumerate(docs):
            qrels.append({"query_id": q, "doc_id": d, "grade": (i + j) % 4})
        for r, d in enumerate(docs):
            base.append({"query_id": q, "doc_id": d, "score": float(len(docs) - r)})
        for r, d in enumerate(reversed(docs)):
            cand.append({"query_id": q, "doc_id": d, "score": float(len(docs) - r)})
    write_jsonl(data_dir / "qrels.jsonl", qrels)
    write_jsonl(spec_dir / "base.jsonl", base)
    write_jsonl(spec_dir / "cand.jsonl", cand)
    spec = {
        "spec_version": 1,
        "name": NAME,
        "metric": {
            "gain": "exponential",
            "cutoffs": [25],
            "discount": "log2",
            "ties": "displayed_order",
            "ideal": "judged_catalog",
            "empty_ideal": "exclude",
            "unjudged": "zero",
            "missing_queries": "zero",
        },
        "queries": {"weights": "uniform"},
        "data": {"qrels": f"../{data_dir.name}/qrels.jsonl", "systems": {"base": "base.jsonl", "cand": "cand.jsonl"}},
        "uncertainty": {"resamples": 100, "confidence": 0.9, "method": "percentile", "seed": 7},
        "comparison": {
            "baseline": "base",
            "test": "randomization",
            "correction": "none",
            "wins_losses": len(HOSTILE),
            "tie_tolerance": 1e-9,
        },
        "mlflow": {"experiment": "markdown"},
    }
    path = spec_dir / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    return path


def test_hostile_data_stays_text_in_every_markdown_file(tmp_path):
    out = tmp_path / "out"
    assert main(["run", str(hostile_folder(tmp_path)), "--out", str(out), "--no-mlflow", "--quiet"]) == 0
    wl = json.loads((out / "wins_losses.json").read_text(encoding="utf-8"))
    (block,) = wl["comparisons"]
    listed = [e["query_id"] for k in ("wins", "losses") for e in block[k]]
    assert sorted(listed) == sorted(HOSTILE)  # every hostile query is a listed win or loss

    notes = json.loads((out / "summary.json").read_text(encoding="utf-8"))["notes"]
    assert any("![d](javascript:alert(1))" in n for n in notes)

    wins_losses = (out / "wins_losses.md").read_text(encoding="utf-8")
    assert_clean(wins_losses, HOSTILE + [NAME])
    shown_docs = {
        d["doc_id"]
        for k in ("wins", "losses")
        for e in block[k]
        for side in ("baseline_top", "candidate_top")
        for d in e[side]
    }
    assert set(HOSTILE) <= shown_docs  # ... and every hostile id was also shown as a document

    report = (out / "report.md").read_text(encoding="utf-8")
    top = [e["query_id"] for k in ("wins", "losses") for e in block[k][:3]]
    assert_clean(report, top + [NAME] + notes)
