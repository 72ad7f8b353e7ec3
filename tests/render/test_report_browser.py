"""``report.html`` in a real headless Chromium, offline: it renders, logs nothing, fetches nothing, and its
figures read at the size they are shown.

Chromium runs with a proxy that does not exist and a resolver that resolves nothing, so any request
the page made would fail; its NetLog (``--log-net-log``) records every URL request, and the requests
of the page (those in the ``file://`` network partition) must all be ``file:`` URLs. A canary page
with a script error and external references checks that this harness does see such things.

The figures are measured in a copy of the report with a measuring script appended (the report itself has
none): the bounding box of every text of every figure, as laid out at a window width, from the DOM
(``getBoundingClientRect``), and the colours of the data marks and legend swatches (``getComputedStyle``).

Skipped when Debian's ``chromium`` is not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ndcg_mlflow.cli import main

CHROMIUM = "/usr/bin/chromium"
CONFIGS = Path(__file__).resolve().parents[2] / "configs"
TIMEOUT = 60

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed"),
]

CANARY = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>canary</title>
<link rel="stylesheet" href="https://cdn.example.com/canary.css"></head><body><p>canary</p>
<img src="http://example.invalid/canary.png">
<script>console.error("canary-console-error"); throw new Error("canary-boom");</script></body></html>
"""


def _netlog_events(path: Path) -> list[dict]:
    """URL requests of a NetLog file: [{'url', 'initiator', 'partition'}]."""
    assert path.is_file(), "chromium wrote no NetLog"
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        log = json.loads(text)
    except json.JSONDecodeError:  # a log cut short: close the events list
        log = json.loads(text.rstrip().rstrip(",") + "]}")
    names = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    out = []
    for ev in log.get("events", []):
        if names.get(ev.get("type")) != "URL_REQUEST_START_JOB":
            continue
        p = ev.get("params") or {}
        if "url" not in p:
            continue
        out.append(
            {
                "url": p["url"],
                "initiator": str(p.get("initiator", "")),
                "partition": f"{p.get('network_isolation_key', '')} {p.get('site_for_cookies', '')}",
            }
        )
    return out


def _page_requests(events: list[dict]) -> list[str]:
    """URLs the page asked for that are not the file itself: requests in the file:// partition or
    initiated by the page (Chromium's own background requests have no origin)."""
    return [
        e["url"]
        for e in events
        if ("file://" in e["partition"] or e["initiator"] in ("null",) or e["initiator"].startswith("file"))
        and not e["url"].startswith(("file:", "data:", "about:"))
    ]


def browse(page: Path, work: Path, *extra: str) -> SimpleNamespace:
    """Load a file in headless Chromium, offline; the dumped DOM, Chromium's log and the page's requests."""
    work.mkdir(parents=True, exist_ok=True)
    profile = work / "profile"
    netlog = work / "netlog.json"
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--proxy-server=127.0.0.1:9",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--log-net-log={netlog}",
        *extra,
        page.resolve().as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT, cwd=work)
    stderr = proc.stderr.decode("utf-8", errors="replace")
    assert proc.returncode == 0, f"chromium exited {proc.returncode}:\n{stderr[-3000:]}"
    events = _netlog_events(netlog)
    return SimpleNamespace(
        dom=proc.stdout.decode("utf-8", errors="replace"),
        log=stderr,
        events=events,
        page_requests=_page_requests(events),
    )


def _console_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def _net_error_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "net::ERR_" in line or "Failed to load resource" in line]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """The demo's report (resamples 1000) and the hostile-ids report, written without MLflow."""
    from helpers import demo_spec_text, write_escaping_spec

    root = tmp_path_factory.mktemp("browser")
    configs = root / "configs"
    shutil.copytree(CONFIGS, configs, ignore=shutil.ignore_patterns("__pycache__"))
    spec = configs / "demo_fast.yaml"
    spec.write_text(demo_spec_text(1000), encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        assert main(["run", str(spec), "--out", str(root / "demo"), "--no-mlflow", "--quiet"]) == 0
        esc = write_escaping_spec(root / "esc")
        assert main(["run", str(esc), "--out", str(root / "hostile"), "--no-mlflow", "--quiet"]) == 0
    return SimpleNamespace(root=root, demo=root / "demo" / "report.html", hostile=root / "hostile" / "report.html")


def test_harness_sees_console_errors_and_requests(tmp_path):
    """The canary: if this fails, the offline checks below would prove nothing."""
    page = tmp_path / "canary.html"
    page.write_text(CANARY, encoding="utf-8")
    seen = browse(page, tmp_path / "run", "--dump-dom")
    console = "\n".join(_console_lines(seen.log))
    assert "canary-console-error" in console and "Uncaught" in console
    assert any("example.invalid/canary.png" in u for u in seen.page_requests), seen.page_requests
    assert any("cdn.example.com/canary.css" in u for u in seen.page_requests), seen.page_requests
    assert all("example." in u for u in seen.page_requests), seen.page_requests  # not Chromium's own traffic
    assert "<p>canary</p>" in seen.dom


def test_demo_report_renders_offline(reports, tmp_path):
    seen = browse(reports.demo, tmp_path / "run", "--dump-dom")
    from helpers import HtmlDoc

    dom = seen.dom
    assert "<h1>nDCG report — demo-product-search</h1>" in dom
    doc = HtmlDoc(dom)
    heads = [t[0][:2] for t in doc.tables if t]
    for first in (
        ["system", "evaluated"],
        ["system", "nDCG@5"],
        ["candidate", "baseline"],
        ["rule", "alternative"],
        ["role", "file"],
        ["rank", "baseline document"],
    ):
        assert first in heads, first
    for name in ("ndcg_by_cutoff", "per_query_differences", "bootstrap_differences"):
        assert re.search(rf"<figure id=\"{name}\"><svg\b", dom), name
    assert len(re.findall(r"<svg\b", dom)) == 3
    assert "<script" not in dom.lower()

    assert _console_lines(seen.log) == []
    assert _net_error_lines(seen.log) == []
    assert seen.page_requests == []


def test_demo_report_screenshot(reports, tmp_path):
    shot = tmp_path / "report.png"
    seen = browse(
        reports.demo, tmp_path / "run", f"--screenshot={shot}", "--window-size=1200,3000", "--hide-scrollbars"
    )
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    assert _console_lines(seen.log) == [] and seen.page_requests == []


def test_hostile_ids_render_as_text(reports, tmp_path):
    seen = browse(reports.hostile, tmp_path / "run", "--dump-dom")
    from helpers import NASTY, HtmlDoc

    dom = seen.dom
    assert "<script" not in dom.lower()  # no script element made it into the DOM
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    doc = HtmlDoc(dom)
    assert not any(tag == "script" for tag, _ in doc.tags)
    for hostile in NASTY:
        assert hostile in doc.cells, hostile  # a document id, as the text of a table cell
        assert hostile in doc.bold, hostile  # a query id, as text
    assert re.search(r"<td class=\"l\">&lt;script&gt;alert\(1\)&lt;/script&gt;</td>", dom)
    assert _console_lines(seen.log) == []
    assert seen.page_requests == []


# --------------------------------------------------------------------------- the figures as laid out

MEASURE = """<script>
(function () {
  const box = (el) => { const b = el.getBoundingClientRect();
    return {l: b.left, r: b.right, t: b.top, b: b.bottom, w: b.width, h: b.height}; };
  const colour = (el) => { const s = getComputedStyle(el);
    return ["line", "polyline", "path"].includes(el.tagName) ? s.stroke : s.fill; };
  const text = (el) => Object.assign({text: el.textContent,
                                      cls: el.getAttribute("class") || ""}, box(el));
  const out = [];
  for (const svg of document.querySelectorAll("figure > svg")) {
    const legend = svg.querySelector("g.legend");
    out.push({
      name: svg.closest("figure").id, svg: box(svg),
      axes: [...svg.querySelectorAll("g.axis")].map((g) => ({
        axis: g.dataset.axis, panel: g.dataset.panel || "",
        ticks: [...g.querySelectorAll("text.tick-label")].map(text),
        labels: [...g.querySelectorAll("text.axis-label")].map(text)})),
      legend: legend === null ? null : [...legend.querySelectorAll("g.legend-item")].map((i) => ({
        text: i.textContent, colours: [...i.querySelectorAll(".swatch")].map(colour)})),
      marks: [...new Set([...svg.querySelectorAll(".mark")].map(colour))],
      texts: [...svg.querySelectorAll("text")].map(text)});
  }
  const pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def measure(report: Path, work: Path, width: int, script: str = MEASURE) -> Any:
    """What ``script`` measures of ``report`` laid out in a window ``width`` pixels wide (by default the figures:
    boxes, colours, texts); the script leaves it as JSON in ``<pre id="measured">``."""
    page = work / "measured.html"
    work.mkdir(parents=True, exist_ok=True)
    page.write_text(report.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8")
    seen = browse(page, work / "run", "--dump-dom", f"--window-size={width},2000")
    assert _console_lines(seen.log) == [], _console_lines(seen.log)
    m = re.search(r'<pre id="measured">(.*?)</pre>', seen.dom, flags=re.S)
    assert m, "the measuring script did not run"
    return json.loads(html.unescape(m.group(1)))


# --------------------------------------------------------------------------- the first screen

LAYOUT = """<script>
(function () {
  const top = (el) => el === null ? null : el.getBoundingClientRect().top + window.scrollY;
  const bottom = (el) => el === null ? null : el.getBoundingClientRect().bottom + window.scrollY;
  let table = document.getElementById("results");
  while (table !== null && table.tagName !== "TABLE") table = table.nextElementSibling;
  const spec = document.getElementById("spec");
  const details = spec.nextElementSibling;
  const out = {
    lead: top(document.getElementById("headline")), lead_bottom: bottom(document.getElementById("headline")),
    results: top(table), spec: top(spec), details: details.tagName, open: details.open,
    details_height: details.getBoundingClientRect().height, next: top(details.nextElementSibling),
    summary: details.querySelector("summary").textContent};
  const pre_out = document.createElement("pre");
  pre_out.id = "measured";
  pre_out.textContent = JSON.stringify(out);
  document.body.appendChild(pre_out);
})();
</script>"""


@pytest.mark.parametrize("width", [1280, 800])
def test_demo_report_leads_with_the_answer_on_the_first_screen(reports, tmp_path, width):
    """At a browser's width (1280) and at about the width of MLflow's artifact viewer (800): the comparison of
    each candidate with the baseline comes first and ends, and the systems x cutoffs table starts, within the
    first 900 pixels; the spec in words comes after them, collapsed: its line or two, not its 30 lines of text,
    before the next section."""
    laid = measure(reports.demo, tmp_path, width, LAYOUT)
    assert laid["lead"] < laid["lead_bottom"] < laid["results"] < 900 < laid["spec"], laid
    assert laid["details"] == "DETAILS" and laid["open"] is False and laid["details_height"] < 80, laid
    assert laid["next"] - laid["spec"] < 200, laid
    assert laid["summary"].startswith("The spec in words")


def _overlap(a: dict, b: dict, gap: float = 1.0) -> bool:
    """Do two boxes come closer than ``gap`` pixels on both axes?"""
    return a["l"] < b["r"] + gap and b["l"] < a["r"] + gap and a["t"] < b["b"] + gap and b["t"] < a["b"] + gap


DEMO_FIGURES = ("ndcg_by_cutoff", "per_query_differences", "bootstrap_differences")


def _check_figures(figures: list[dict], *, min_tick_px: float, names: tuple[str, ...] = DEMO_FIGURES) -> None:
    assert [f["name"] for f in figures] == list(names)
    for fig in figures:
        where = fig["name"]
        # every axis: at least two tick labels, apart from each other, and one label of its own
        assert {a["axis"] for a in fig["axes"]} == {"x", "y"}, where
        for axis in fig["axes"]:
            at = f"{where} {axis['axis']} axis {axis['panel']}"
            ticks = axis["ticks"]
            assert len(ticks) >= 2, at
            for i, a in enumerate(ticks):
                for b in ticks[i + 1 :]:
                    assert not _overlap(a, b, gap=2.0), f"{at}: tick labels {a['text']!r} and {b['text']!r} touch"
            assert len(axis["labels"]) == 1 and axis["labels"][0]["text"].strip(), f"{at}: no axis label"
            # readable at this width: a tick label's box is about 1.2 times its font size high
            assert min(t["h"] for t in ticks) >= min_tick_px * 1.1, f"{at}: tick labels {ticks[0]['h']:.1f} px"
        # no text of the figure touches another, and all of it is inside the figure
        texts = [t for t in fig["texts"] if t["w"] > 0]
        for i, a in enumerate(texts):
            assert fig["svg"]["l"] - 1 <= a["l"] and a["r"] <= fig["svg"]["r"] + 1, f"{where}: {a['text']!r} cut"
            assert fig["svg"]["t"] - 1 <= a["t"] and a["b"] <= fig["svg"]["b"] + 1, f"{where}: {a['text']!r} cut"
            for b in texts[i + 1 :]:
                assert not _overlap(a, b, gap=0.0), f"{where}: {a['text']!r} and {b['text']!r} overlap"
        # a legend, and every colour the data are drawn in is explained in it
        assert fig["legend"], f"{where}: no legend"
        explained = {c for item in fig["legend"] for c in item["colours"]}
        assert all(item["text"].strip() for item in fig["legend"])
        assert fig["marks"] and set(fig["marks"]) <= explained, (where, set(fig["marks"]) - explained)


@pytest.mark.parametrize("width", [1280, 800])
def test_demo_figures_read_at_the_size_shown(reports, tmp_path, width):
    """At 1280 pixels the report's column is at its widest (1100); at 800 it is about as wide as MLflow's
    artifact viewer shows it. Scaling keeps the layout, so nothing may touch at either width; the text is
    smaller at 800 but still legible."""
    figures = measure(reports.demo, tmp_path, width)
    _check_figures(figures, min_tick_px=12.0 if width == 1280 else 9.0)
    shown = {f["name"]: f["svg"]["w"] for f in figures}
    if width == 1280:
        assert all(w == 960 for w in shown.values()), shown  # drawn at their own size, not scaled
    else:
        assert all(700 < w < 800 for w in shown.values()), shown  # scaled down to the column


def test_hostile_report_figures_read_at_the_size_shown(reports, tmp_path):
    _check_figures(measure(reports.hostile, tmp_path, 1280), min_tick_px=12.0)


def test_judge_report_figures_read_at_the_size_shown(tmp_path):
    """The judge demo's report: its figure of the three views of each difference, one row per key and view."""
    out = tmp_path / "judge"
    assert main(["run", str(CONFIGS / "demo_judge.yaml"), "--out", str(out), "--no-mlflow", "--quiet"]) == 0
    figures = measure(out / "report.html", tmp_path, 1280)
    _check_figures(figures, min_tick_px=12.0, names=("ndcg_by_cutoff", "per_query_differences", "judge_views"))


def test_crowded_figures_read_at_the_size_shown(tmp_path):
    """Many systems with long, wide-character and hostile names, many cutoffs, many panels: still nothing
    touches, nothing is cut, every colour is explained."""
    import numpy as np
    import pandas as pd

    from ndcg_mlflow.render.figures import draw
    from ndcg_mlflow.render.report import CSS
    from ndcg_mlflow.rules import cutoff_key, cutoff_of_label

    cutoffs = ["1", "3", "5", "10", "20", "50", "100", "1000", "all"]
    keys = [cutoff_key(cutoff_of_label(c)) for c in cutoffs]
    names = [
        "bm25",
        "<script>alert(1)</script>",
        "検索システム・改良版" * 3,
        "a" * 150,
        "team/model-v2 & co",
        "dense",
        "hybrid-rrf",
        "colbert-v2",
        "splade++",
        "t5-rerank",
    ]
    rng = np.random.default_rng(5)
    systems = {
        n: {
            k: {
                "mean": 0.3 + 0.05 * i + 0.02 * j,
                "ci_low": 0.28 + 0.05 * i + 0.02 * j,
                "ci_high": 0.33 + 0.05 * i + 0.02 * j,
            }
            for j, k in enumerate(keys)
        }
        for i, n in enumerate(names)
    }
    comps = [
        {"candidate": n, "baseline": "bm25", "key": k, "delta": 0.01, "ci_low": -0.02, "ci_high": 0.04}
        for n in names[1:4]
        for k in keys
    ]
    summary = {"systems": systems, "spec": {"uncertainty.confidence": 0.9}, "comparisons": comps}
    per_query = pd.DataFrame(
        [
            {"system": n, "query_id": f"q{q}", "cutoff": "10", "ndcg": float(rng.uniform())}
            for n in names
            for q in range(400)
        ]
    )
    boot = pd.DataFrame({f"{c['candidate']}:{c['key']}": rng.normal(0.01, 0.02, 300) for c in comps})
    figs = draw(summary, per_query, boot)
    page = tmp_path / "crowded.html"
    page.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><style>{CSS}</style></head><body>"
        + "".join(f"<figure id='{n}'>{svg}</figure>" for n, svg in figs.items())
        + "</body></html>",
        encoding="utf-8",
    )
    _check_figures(measure(page, tmp_path / "m", 1280), min_tick_px=12.0)
