"""``report.html`` in a real headless Chromium, offline: it renders, logs nothing, fetches nothing.

Chromium runs with a proxy that does not exist and a resolver that resolves nothing, so any request
the page made would fail; its NetLog (``--log-net-log``) records every URL request, and the requests
of the page (those in the ``file://`` network partition) must all be ``file:`` URLs. A canary page
with a script error and external references checks that this harness does see such things.

Skipped when Debian's ``chromium`` is not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from ndcg_mlflow.cli import main

CHROMIUM = "/usr/bin/chromium"
CONFIGS = Path(__file__).resolve().parents[1] / "configs"
TIMEOUT = 60

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed")]

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
        out.append({"url": p["url"], "initiator": str(p.get("initiator", "")),
                    "partition": f"{p.get('network_isolation_key', '')} {p.get('site_for_cookies', '')}"})
    return out


def _page_requests(events: list[dict]) -> list[str]:
    """URLs the page asked for that are not the file itself: requests in the file:// partition or
    initiated by the page (Chromium's own background requests have no origin)."""
    return [e["url"] for e in events
            if ("file://" in e["partition"] or e["initiator"] in ("null",) or e["initiator"].startswith("file"))
            and not e["url"].startswith(("file:", "data:", "about:"))]


def browse(page: Path, work: Path, *extra: str) -> SimpleNamespace:
    """Load a file in headless Chromium, offline; the dumped DOM, Chromium's log and the page's requests."""
    work.mkdir(parents=True, exist_ok=True)
    profile = work / "profile"
    netlog = work / "netlog.json"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-extensions", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
           "--enable-logging=stderr", "--v=0", "--proxy-server=127.0.0.1:9",
           "--host-resolver-rules=MAP * ~NOTFOUND", f"--log-net-log={netlog}", *extra,
           page.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT, cwd=work)
    stderr = proc.stderr.decode("utf-8", errors="replace")
    assert proc.returncode == 0, f"chromium exited {proc.returncode}:\n{stderr[-3000:]}"
    events = _netlog_events(netlog)
    return SimpleNamespace(dom=proc.stdout.decode("utf-8", errors="replace"), log=stderr, events=events,
                           page_requests=_page_requests(events))


def _console_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def _net_error_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "net::ERR_" in line or "Failed to load resource" in line]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """The demo's report (resamples 1000) and the hostile-ids report, written without MLflow."""
    from test_report import demo_spec_text, write_escaping_spec

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
    from test_report import HtmlDoc

    dom = seen.dom
    assert "<h1>nDCG report — demo-product-search</h1>" in dom
    doc = HtmlDoc(dom)
    heads = [t[0][:2] for t in doc.tables if t]
    for first in (["system", "evaluated"], ["system", "nDCG@5"], ["candidate", "baseline"], ["rule", "alternative"],
                  ["role", "file"], ["rank", "baseline document"]):
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
    seen = browse(reports.demo, tmp_path / "run", f"--screenshot={shot}", "--window-size=1200,3000",
                  "--hide-scrollbars")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    assert _console_lines(seen.log) == [] and seen.page_requests == []


def test_hostile_ids_render_as_text(reports, tmp_path):
    seen = browse(reports.hostile, tmp_path / "run", "--dump-dom")
    from test_report import NASTY, HtmlDoc

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
