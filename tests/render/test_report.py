"""Reports: ``report.html`` / ``report.md`` of a run, their figures in MLflow, escaping, companion measures.

The demo (uncertainty, comparison, companions and sensitivity declared) is run once per module
through the CLI into an isolated SQLite MLflow store; the reports are checked against the
numbers of the output files they are rendered from (``summary.json``, ``wins_losses.json``,
``sensitivity.csv``). The escaping and companion cases use tiny hand-written specs.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from types import SimpleNamespace
from xml.etree import ElementTree

import pandas as pd
import pytest
import yaml
from helpers import NASTY, HtmlDoc, client_for, demo_spec_text, runs_of_experiment, write_escaping_spec

from ndcg_mlflow.cli import main
from ndcg_mlflow.render.format import md_text

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
FIGURES = ("ndcg_by_cutoff", "per_query_differences", "bootstrap_differences")


# --------------------------------------------------------------------------- helpers


def f4(x) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4f}"


def s4(x) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:+.4f}"


def pfmt(x) -> str:
    """p-values as the report prints them: 4 decimals, or 1 significant digit in e-notation below 1e-4."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.4f}" if x >= 1e-4 else f"{x:.1e}"


def without_svg_boilerplate(text: str) -> str:
    """The HTML without the parts of an SVG that name URIs but fetch nothing: XML namespace declarations and a
    ``<metadata>`` (RDF) block."""
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    return re.sub(r"\sxmlns(:\w+)?\s*=\s*(\"[^\"]*\"|'[^']*')", "", text)


def assert_self_contained(text: str) -> None:
    lower = text.lower()
    assert "<script" not in lower
    assert "@import" not in lower
    doc = HtmlDoc(text)
    for tag, attrs in doc.tags:
        assert tag not in (
            "link",
            "iframe",
            "object",
            "embed",
            "img",
            "base",
            "frame",
            "audio",
            "video",
            "source",
            "script",
        ), f"<{tag}> in a self-contained report"
        for name, value in attrs:
            name = (name or "").lower()
            if name in (
                "src",
                "href",
                "xlink:href",
                "srcset",
                "action",
                "formaction",
                "poster",
                "data",
                "background",
            ) or name.endswith(":href"):
                assert (value or "").startswith("#"), f"<{tag} {name}={value!r}> points outside the file"
            assert not name.startswith("on"), f"event handler attribute {name} on <{tag}>"
            if tag == "meta":
                assert name != "http-equiv", "meta http-equiv in the report"
    for target in re.findall(r"url\(\s*['\"]?([^)'\"]*)", text):
        assert target.startswith("#"), f"CSS url({target}) points outside the file"
    stripped = without_svg_boilerplate(text).lower()
    assert "http://" not in stripped and "https://" not in stripped and "//cdn" not in stripped
    assert "file://" not in stripped


def _prepare_store(migrated_db: Path, folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "mlflow.db"
    shutil.copy(migrated_db, db)
    return f"sqlite:///{db}"


# --------------------------------------------------------------------------- the demo, once per module


@pytest.fixture(scope="module")
def demo(tmp_path_factory, migrated_db):
    """``ndcg-mlflow run`` of the demo (resamples 1000) into a fresh store; cwd and env restored afterwards."""
    root = tmp_path_factory.mktemp("report_demo")
    configs = root / "configs"
    shutil.copytree(CONFIGS, configs, ignore=shutil.ignore_patterns("__pycache__"))
    spec = configs / "demo_fast.yaml"
    spec.write_text(demo_spec_text(1000), encoding="utf-8")
    uri = _prepare_store(migrated_db, root / "store")
    out = root / "out"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("MLFLOW_TRACKING_URI", uri)
        assert main(["run", str(spec), "--out", str(out), "--quiet"]) == 0
    client = client_for(uri)
    runs = runs_of_experiment(client, "demo-product-search", deleted=False)
    parent = next(r for r in runs if r.data.tags.get("ndcg_mlflow.role") == "evaluation")
    children = {r.data.tags["ndcg_mlflow.system"]: r for r in runs if r.data.tags.get("ndcg_mlflow.role") == "system"}
    return SimpleNamespace(
        root=root,
        out=out,
        uri=uri,
        client=client,
        parent=parent,
        children=children,
        summary=json.loads((out / "summary.json").read_text(encoding="utf-8")),
        wins_losses=json.loads((out / "wins_losses.json").read_text(encoding="utf-8")),
        sensitivity=pd.read_csv(out / "sensitivity.csv", dtype={"cutoff": str}, keep_default_na=False, na_values=[""]),
        html=(out / "report.html").read_text(encoding="utf-8"),
        md=(out / "report.md").read_text(encoding="utf-8"),
    )


@pytest.mark.integration
def test_demo_writes_both_reports(demo):
    assert (demo.out / "report.html").is_file() and (demo.out / "report.md").is_file()
    assert demo.html.lstrip().lower().startswith("<!doctype html>")
    assert demo.md.startswith("# nDCG report — demo-product-search")
    assert demo.summary["spec"]["uncertainty.resamples"] == 1000


@pytest.mark.integration
def test_html_results_and_coverage_tables_match_summary(demo):
    doc = HtmlDoc(demo.html)
    systems = demo.summary["systems"]
    keys = list(next(iter(systems.values())))
    assert keys == ["ndcg_at_5", "ndcg_at_10", "ndcg_at_all"]

    results = doc.table("system", "nDCG@5")
    assert results[0] == ["system", "nDCG@5", "nDCG@10", "nDCG@all"]
    rows = {r[0]: r[1:] for r in results[1:]}
    assert list(rows) == ["bm25", "reranker-v2", "dense-ties"]
    for name, entry in systems.items():
        for cell, key in zip(rows[name], keys):
            m = entry[key]
            assert cell.startswith(f4(m["mean"]) + " "), (name, key, cell)
            assert f"[{f4(m['ci_low'])}, {f4(m['ci_high'])}]" in cell
            assert f"SE {f4(m['std_error'])}" in cell
            assert f"duplicate rate {m['duplicate_rate']:.3f}" in cell
            assert f"catalog coverage {m['catalog_coverage']:.4f}" in cell
    # the interval legend names the declared settings
    assert "95% bca intervals from 1000 bootstrap resamples of queries, seed 20261130" in demo.html

    coverage = doc.table("system", "evaluated")
    cov_rows = {r[0]: r for r in coverage[1:]}
    for name, entry in systems.items():
        first = entry["ndcg_at_5"]
        row = cov_rows[name]
        assert row[1:5] == [
            str(first["n_evaluated"]),
            str(first["n_excluded"]),
            str(first["n_empty_ideal"]),
            str(first["n_missing"]),
        ]
        assert row[6:] == [f"{entry[k]['judged_coverage']:.3f}" for k in keys]
    assert cov_rows["reranker-v2"][4] == "1"  # the demo's reranker misses one judged query


@pytest.mark.integration
def test_html_comparisons_table_matches_summary(demo):
    doc = HtmlDoc(demo.html)
    table = doc.table("candidate", "baseline")
    comps = demo.summary["comparisons"]
    assert len(table) - 1 == len(comps) == 6
    for row, c in zip(table[1:], comps):
        expected = [
            c["candidate"],
            c["baseline"],
            c["cutoff"],
            str(c["n_paired"]),
            f4(c["baseline_mean"]),
            f4(c["candidate_mean"]),
            s4(c["delta"]),
            f"[{s4(c['ci_low'])}, {s4(c['ci_high'])}]",
            f"{c['relative_delta']:+.1%}",
            pfmt(c["p_randomization"]),
            pfmt(c["p_t_test"]),
            pfmt(c["p_corrected"]),
            f"{c['effect_size_dz']:+.3f}",
            f"{c['wins']} / {c['ties']} / {c['losses']}",
        ]
        assert row == expected
    # raw and corrected p differ for the demo (holm over 6 comparisons): both columns are shown
    assert any(pfmt(c["p_randomization"]) != pfmt(c["p_corrected"]) for c in comps)


@pytest.mark.integration
def test_html_lists_the_largest_wins_and_losses(demo):
    doc = HtmlDoc(demo.html)
    blocks = demo.wins_losses["comparisons"]
    assert len(blocks) == 6
    # every listed query appears, in order, as the bold query id of its <details> summary
    expected_ids = [e["query_id"] for b in blocks for kind in ("wins", "losses") for e in b[kind]]
    bold_ids = [t for t in doc.bold if re.fullmatch(r"q\d{4}", t)]
    assert bold_ids == expected_ids
    for b in blocks:
        assert len(b["wins"]) == 10 and len(b["losses"]) == 10
        label = "nDCG@" + b["cutoff"]
        assert f"<h3>{b['candidate']} vs {b['baseline']}, {label}</h3>" in demo.html
        top = b["wins"][0]
        assert (
            f"query <b>{top['query_id']}</b> (weight {top['weight']:g}): {f4(top['baseline_ndcg'])} → "
            f"{f4(top['candidate_ndcg'])}"
        ) in demo.html
        assert s4(top["delta"]) in demo.html
        # the documents of the largest win are listed with their grades
        for d in top["candidate_top"]:
            assert d["doc_id"] in doc.cells


@pytest.mark.integration
def test_html_sensitivity_table(demo):
    doc = HtmlDoc(demo.html)
    table = doc.table("rule", "alternative")
    heads = table[0][2:]
    assert heads == ["bm25", "reranker-v2", "dense-ties", "reranker-v2 − bm25", "dense-ties − bm25"]
    rows = {(r[0], r[1]): r[2:] for r in table[1:]}
    sens = demo.sensitivity[demo.sensitivity["cutoff"] == "10"]
    assert {"gain", "ties", "ideal", "empty_ideal", "unjudged", "missing_queries"} <= set(sens["rule"])
    assert len(rows) == len(sens[["rule", "alternative"]].drop_duplicates())

    # the declared row: the means and differences of summary.json
    declared = rows[("declared", "as declared")]
    systems = demo.summary["systems"]
    comps = {c["candidate"]: c for c in demo.summary["comparisons"] if c["key"] == "ndcg_at_10"}
    assert declared == (
        [f4(systems[s]["ndcg_at_10"]["mean"]) for s in ("bm25", "reranker-v2", "dense-ties")]
        + [s4(comps[c]["delta"]) for c in ("reranker-v2", "dense-ties")]
    )

    columns = [
        ("system", "bm25", ""),
        ("system", "reranker-v2", ""),
        ("system", "dense-ties", ""),
        ("comparison", "reranker-v2", "bm25"),
        ("comparison", "dense-ties", "bm25"),
    ]
    flips = 0
    for _, r in sens[sens["rule"] != "declared"].iterrows():
        cells = rows[(r["rule"], r["alternative"])]
        col = columns.index((r["kind"], r["system"], "" if pd.isna(r["baseline"]) else r["baseline"]))
        expected = s4(r["change"]) + (" FLIP" if bool(r["sign_flip"]) else "")
        assert cells[col] == expected, (r["rule"], r["alternative"], r["system"])
        flips += bool(r["sign_flip"])
    assert flips >= 1  # the demo's tie rules flip dense-ties − bm25


@pytest.mark.integration
def test_html_figures_inline_svg(demo):
    for name in FIGURES:
        m = re.search(rf"<figure id='{name}'>(<svg.*?</svg>)<figcaption", demo.html, flags=re.S)
        assert m, name
        body = m.group(1)
        assert "<?xml" not in body and "<!DOCTYPE svg" not in body
        # the figure file of the folder is the same SVG, a standalone XML document
        assert (demo.out / "figures" / f"{name}.svg").read_text(encoding="utf-8") == body + "\n"
        assert f"figures/{name}.svg" in demo.html  # the caption names the file
    assert demo.html.count("<svg") == 3
    assert sorted(p.name for p in (demo.out / "figures").iterdir()) == sorted(f"{n}.svg" for n in FIGURES)
    manifest = json.loads((demo.out / "manifest.json").read_text(encoding="utf-8"))
    assert {f"figures/{n}.svg" for n in FIGURES} <= set(manifest["files"])


@pytest.mark.integration
def test_query_counts_tell_the_set_from_the_evaluated(demo):
    """The header's count is the query set (240: every judged query); the tables' 'evaluated' (233) is what each
    mean is over; the 7 excluded are the demo's queries with an empty ideal. The same words in HTML and markdown."""
    n = demo.summary["n_queries"]
    first = demo.summary["systems"]["bm25"]["ndcg_at_5"]
    assert (n, first["n_evaluated"], first["n_excluded"], first["n_empty_ideal"]) == (240, 233, 7, 7)
    line = (
        "240 queries in the evaluation (every judged query); each mean is over the 233 evaluated, 7 are "
        "excluded: 7 with an empty ideal (ideal DCG 0: nothing relevant to find; metric.empty_ideal: exclude)."
    )
    assert f"<p>{line}</p>" in demo.html
    assert md_text(line) in demo.md.splitlines()
    assert "240 evaluated queries" not in demo.html and "240 evaluated queries" not in demo.md


@pytest.mark.integration
def test_the_answer_leads_and_the_spec_follows_collapsed(demo):
    """Without a decision, report.html and report.md open with each candidate against the baseline at nDCG@10
    (the numbers of summary.json's comparisons), then the systems x cutoffs table and the comparisons; the spec in
    words comes after the numbers, inside <details>."""
    html, md = demo.html, demo.md
    order = [html.index(s) for s in ("id='headline'", "id='results'", ">Comparisons</h2>", "id='spec'")]
    assert order == sorted(order)
    assert html.index("<h1>") < order[0] and "Decision" not in html
    spec = re.search(
        r"<h2 id='spec'>What was measured</h2><details><summary>[^<]*</summary><pre>(.*?)</pre></details>", html, re.S
    )
    assert spec and "gain: exponential" in spec.group(1) and "<details open" not in html
    at_10 = [c for c in demo.summary["comparisons"] if c["key"] == "ndcg_at_10"]
    lead = HtmlDoc(html).table("candidate", "difference")
    assert lead == [["candidate", "difference", "interval", "p corrected", "wins / ties / losses"]] + [
        [
            c["candidate"],
            s4(c["delta"]),
            f"[{s4(c['ci_low'])}, {s4(c['ci_high'])}]",
            pfmt(c["p_corrected"]),
            f"{c['wins']} / {c['ties']} / {c['losses']}",
        ]
        for c in at_10
    ]
    assert "Each candidate against the baseline bm25 at nDCG@10" in html
    rows = [
        f"| {c['candidate']} | {s4(c['delta'])} | [{s4(c['ci_low'])}, {s4(c['ci_high'])}] | {pfmt(c['p_corrected'])} "
        f"| {c['wins']}/{c['ties']}/{c['losses']} |"
        for c in at_10
    ]
    lines = md.splitlines()
    assert lines[2] == "Each candidate against the baseline bm25 at nDCG@10:"
    assert lines[4:6] == [
        "| candidate | difference | interval | p corrected | W/T/L |",
        "| --- | ---: | --- | ---: | --- |",
    ]
    assert lines[6:8] == rows
    assert lines.index(rows[-1]) < lines.index(next(ln for ln in lines if ln.startswith("| system |")))
    assert md.index("| system |") < md.index("Comparisons (") < md.index("Rules:") < md.index("Spec sha256")


@pytest.mark.integration
def test_the_colours_of_the_tables_are_explained(demo):
    doc = HtmlDoc(demo.html)
    coloured = [c for c in demo.summary["comparisons"] if c["ci_low"] > 0 or c["ci_high"] < 0]
    assert coloured  # the demo's reranker is better at every cutoff: its differences are green
    assert "<span class='up'>green</span> where its whole interval is above 0" in demo.html
    assert "<span class='down'>red</span> where it is below 0" in demo.html
    assert len(doc.table("candidate", "baseline")) == len(demo.summary["comparisons"]) + 1


@pytest.mark.integration
def test_html_is_self_contained(demo):
    assert_self_contained(demo.html)
    assert "<style>" in demo.html  # inline CSS, not a stylesheet link


@pytest.mark.integration
def test_markdown_report(demo):
    md = demo.md
    summary = demo.summary
    for name, entry in summary["systems"].items():
        first = entry["ndcg_at_5"]
        cells = " | ".join(
            f"{f4(entry[k]['mean'])} [{f4(entry[k]['ci_low'])}, {f4(entry[k]['ci_high'])}]"
            for k in ("ndcg_at_5", "ndcg_at_10", "ndcg_at_all")
        )
        counts = f"{first['n_evaluated']} | {first['n_excluded']} | {first['n_missing']}"
        assert f"| {md_text(name)} | {cells} | {counts} |" in md
    for c in summary["comparisons"]:
        line = (
            f"| {md_text(c['candidate'])} | {c['cutoff']} | {s4(c['delta'])} | "
            f"[{s4(c['ci_low'])}, {s4(c['ci_high'])}] "
            f"| {pfmt(c['p_randomization'])} | {pfmt(c['p_corrected'])} | {c['wins']}/{c['ties']}/{c['losses']} |"
        )
        assert line in md
    for b in demo.wins_losses["comparisons"]:
        if b["key"] != "ndcg_at_10":
            continue
        for kind in ("wins", "losses"):
            text = ", ".join(f"{md_text(e['query_id'])} ({e['delta']:+.3f})" for e in b[kind][:3])
            assert f"- largest {kind}: {text}" in md
    assert not re.search(r"(?<!\\)<", md)  # report.md has no raw HTML: every "<" is escaped
    assert md.endswith(".\n") and not md.endswith("\n\n")  # one final newline


@pytest.mark.integration
def test_mlflow_has_reports_and_svg_figures(demo, tmp_path):
    client, pid = demo.client, demo.parent.info.run_id
    root = {a.path for a in client.list_artifacts(pid)}
    assert {"report.html", "report.md", "figures"} <= root
    figures = {a.path for a in client.list_artifacts(pid, "figures")}
    assert figures == {f"figures/{n}.svg" for n in FIGURES}
    for name in FIGURES:
        svg = Path(client.download_artifacts(pid, f"figures/{name}.svg", str(tmp_path / "dl")))
        assert svg.read_bytes() == (demo.out / "figures" / f"{name}.svg").read_bytes()
        ElementTree.fromstring(svg.read_bytes())  # a well-formed XML document, as an image viewer needs
    html = Path(client.download_artifacts(pid, "report.html", str(tmp_path / "dl")))
    assert html.read_bytes() == (demo.out / "report.html").read_bytes()
    md = Path(client.download_artifacts(pid, "report.md", str(tmp_path / "dl")))
    assert md.read_bytes() == (demo.out / "report.md").read_bytes()


@pytest.mark.integration
def test_log_figures_draws_them_for_a_folder_written_without_them(demo, tmp_path):
    """A folder written before the figures were files of it: log_figures draws the same SVG from its tables."""
    from ndcg_mlflow.tracking.client import log_figures

    folder = tmp_path / "older"
    shutil.copytree(demo.out, folder)
    shutil.rmtree(folder / "figures")
    logged = {}

    class Client:
        def log_artifacts(self, run_id, local_dir, artifact_path=None):
            for path in Path(local_dir).iterdir():
                logged[f"{artifact_path}/{path.name}"] = path.read_bytes()

    log_figures(Client(), "run", folder)
    assert logged == {f"figures/{n}.svg": (demo.out / "figures" / f"{n}.svg").read_bytes() for n in FIGURES}
    assert not (folder / "figures").exists()  # drawn elsewhere: the folder (and its manifest) untouched


@pytest.mark.integration
def test_companion_metrics_on_demo_system_runs(demo):
    assert set(demo.children) == {"bm25", "reranker-v2", "dense-ties"}
    for name, child in demo.children.items():
        for key in ("ndcg_at_5", "ndcg_at_10", "ndcg_at_all"):
            m = demo.summary["systems"][name][key]
            suffix = key.replace("ndcg_at_", "")
            assert child.data.metrics[f"duplicate_rate_at_{suffix}"] == pytest.approx(m["duplicate_rate"], rel=1e-12)
            assert child.data.metrics[f"catalog_coverage_at_{suffix}"] == pytest.approx(
                m["catalog_coverage"], rel=1e-12
            )
    # catalog size 200000: coverage at 10 = distinct documents shown in the top 10 / 200000
    per_query = pd.read_csv(demo.out / "systems" / "bm25.top.csv", dtype={"query_id": str, "doc_id": str})
    shown = per_query[per_query["rank"] <= 10]["doc_id"].nunique()
    assert demo.summary["systems"]["bm25"]["ndcg_at_10"]["catalog_coverage"] == pytest.approx(shown / 200000)


# --------------------------------------------------------------------------- escaping


@pytest.mark.integration
def test_hostile_ids_are_escaped(tracking_uri, tmp_path):
    spec = write_escaping_spec(tmp_path / "esc")
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet"]) == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    md = (out / "report.md").read_text(encoding="utf-8")
    wl = json.loads((out / "wins_losses.json").read_text(encoding="utf-8"))
    listed = {e["query_id"] for b in wl["comparisons"] for k in ("wins", "losses") for e in b[k]}
    assert listed == set(NASTY)  # every hostile query id is one of the listed wins or losses

    # the source holds only the escaped forms
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert '"quotes"' not in html and "&quot;quotes&quot;" in html
    assert "'single'" not in html and "&#x27;single&#x27;" in html
    assert "&amp;amp;" in html
    assert_self_contained(html)

    # parsed back, every hostile id is text: query ids in <b>, document ids in table cells
    doc = HtmlDoc(html)
    assert not any(tag == "script" for tag, _ in doc.tags)
    for hostile in NASTY:
        assert hostile in doc.bold, hostile
        assert hostile in doc.cells, hostile
    name = "<script>alert('name')</script> \"q\" & co"
    # <title> and <h1>, as text (the figures' own SVG <title> elements follow)
    assert [t for t in doc.titles if name in t] == [f"nDCG report — {name}"] * 2

    # markdown: no raw tag, pipes cannot break a table; every character from the data taken literally
    assert not re.search(r"(?<!\\)<", md)  # no raw tag: every "<" is escaped
    assert md_text("<script>alert(1)</script>") in md
    assert "\\|pipes\\|" in md
    assert "\\&amp;" in md  # an entity from the data is shown as typed, not decoded
    for line in md.splitlines():
        if line.startswith("- largest"):
            assert "|" not in line.replace("\\|", "")

    # the same files were logged (MLflow took the hostile ids without complaint)
    client = client_for(tracking_uri)
    parent = next(
        r
        for r in runs_of_experiment(client, "escaping", deleted=False)
        if r.data.tags.get("ndcg_mlflow.role") == "evaluation"
    )
    assert parent.info.status == "FINISHED"
    names = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"report.html", "report.md"} <= names


@pytest.mark.integration
def test_terminal_says_where_the_report_is_and_how_to_open_mlflow(tracking_uri, tmp_path, capsys):
    spec = write_escaping_spec(tmp_path / "esc")
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    # the answer first: the candidate against the baseline at nDCG@10, then the counts and the systems table
    assert lines[0].endswith(" — each candidate against baseline base at nDCG@10")
    assert lines[1].split() == ["candidate", "delta", "interval", "p_corr", "W/T/L"] and lines[2].startswith("cand ")
    assert lines[3:5] == [
        "",
        "5 queries in the evaluation (every judged query); every mean is over all 5 (none excluded).",
    ]
    assert lines[6].startswith("system ")
    assert any(
        line.startswith(
            "delta: candidate minus baseline mean; d_z: the mean per-query difference over its standard deviation"
        )
        for line in lines
    )
    assert f"report: {(out / 'report.html').resolve()}" in lines
    assert f"local results: {out.resolve()}" in lines
    client = client_for(tracking_uri)
    parent = next(
        r
        for r in runs_of_experiment(client, "escaping", deleted=False)
        if r.data.tags.get("ndcg_mlflow.role") == "evaluation"
    )
    db = Path(tracking_uri.removeprefix("sqlite:///")).resolve()
    i = lines.index(f"MLflow UI: ndcg-mlflow ui --backend-store-uri sqlite:///{db}")  # the store this run went to
    assert lines[i + 1] == (
        f"  then open http://127.0.0.1:5000/#/experiments/{parent.info.experiment_id}/runs/{parent.info.run_id}"
    )
    assert summary["n_queries"] == 5


# --------------------------------------------------------------------------- companions, by hand

COMPANION_METRIC = {
    "gain": "exponential",
    "cutoffs": [2, 3, 10],
    "discount": "log2",
    "ties": "displayed_order",
    "ideal": "judged_catalog",
    "empty_ideal": "exclude",
    "unjudged": "zero",
    "missing_queries": "zero",
}


def write_companion_case(folder: Path, catalog) -> Path:
    """Judged queries q1..q4; the system returns
    q1: d1 d2 d3 d4   (groups: d1 G1, d2 -, d3 G1, d4 G2)       -> repeats at rank 3
    q2: e1 e2         (e1 G1, e2 G1: the same group as q1's d1) -> repeats at rank 2 (groups are per query)
    q3: f1 d1         (f1 -, d1 G1)                             -> no repeat
    q4: not returned (missing: nothing shown, no duplicate rate)
    q9: z1 z2 z3      (not judged: not evaluated, ignored)
    """
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "qrels.txt").write_text("q1 0 d1 2\nq1 0 d2 1\nq1 0 d5 1\nq2 0 e1 1\nq3 0 f1 1\nq4 0 g1 1\n")
    ranking = {"q1": ["d1", "d2", "d3", "d4"], "q2": ["e1", "e2"], "q3": ["f1", "d1"], "q9": ["z1", "z2", "z3"]}
    (folder / "sys.run").write_text(
        "".join(f"{q} Q0 {d} {i + 1} {10 - i} sys\n" for q, ds in ranking.items() for i, d in enumerate(ds))
    )
    (folder / "groups.tsv").write_text(
        "doc_id\tgroup\nd1\tG1\nd3\tG1\nd4\tG2\nd5\tG2\ne1\tG1\ne2\tG1\nz1\tG9\nz2\tG9\n"
    )
    spec = {
        "spec_version": 1,
        "name": "companions",
        "metric": COMPANION_METRIC,
        "queries": {"weights": "uniform"},
        "data": {"qrels": "qrels.txt", "systems": {"sys": "sys.run"}},
        "companions": {"duplicates": "groups.tsv", "catalog": catalog},
        "mlflow": {"experiment": "companions"},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


@pytest.mark.integration
def test_duplicate_rate_and_catalog_size_by_hand(tracking_uri, tmp_path):
    spec = write_companion_case(tmp_path / "c", 100)
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    m = summary["systems"]["sys"]

    # per query: K=2 q1 0/2, q2 1/2, q3 0/2; K=3 q1 1/3, q2 1/2 (2 shown), q3 0; K=10 q1 1/4, q2 1/2, q3 0
    # q4 shows nothing and is left out of the mean
    assert m["ndcg_at_2"]["duplicate_rate"] == pytest.approx((0 + 1 / 2 + 0) / 3, abs=1e-12)
    assert m["ndcg_at_3"]["duplicate_rate"] == pytest.approx((1 / 3 + 1 / 2 + 0) / 3, abs=1e-12)
    assert m["ndcg_at_10"]["duplicate_rate"] == pytest.approx((1 / 4 + 1 / 2 + 0) / 3, abs=1e-12)
    per_query = pd.read_csv(out / "per_query.csv", dtype={"query_id": str, "cutoff": str})
    if "duplicate_rate" in per_query.columns:
        got = per_query.set_index(["query_id", "cutoff"])["duplicate_rate"]
        assert got[("q1", "3")] == pytest.approx(1 / 3) and got[("q2", "2")] == pytest.approx(0.5)
        assert got[("q3", "10")] == 0 and math.isnan(got[("q4", "10")])

    # distinct documents shown in the top K over the evaluated queries (q9's are not), over 100:
    # K=2 {d1 d2 e1 e2 f1}, K=3 + d3, K=10 + d4
    assert m["ndcg_at_2"]["catalog_coverage"] == pytest.approx(5 / 100)
    assert m["ndcg_at_3"]["catalog_coverage"] == pytest.approx(6 / 100)
    assert m["ndcg_at_10"]["catalog_coverage"] == pytest.approx(7 / 100)

    client = client_for(tracking_uri)
    child = next(
        r
        for r in runs_of_experiment(client, "companions", deleted=False)
        if r.data.tags.get("ndcg_mlflow.role") == "system"
    )
    assert child.data.metrics["duplicate_rate_at_10"] == pytest.approx(0.25)
    assert child.data.metrics["catalog_coverage_at_10"] == pytest.approx(0.07)
    assert child.data.metrics["duplicate_rate_at_2"] == pytest.approx(1 / 6)
    assert child.data.metrics["catalog_coverage_at_3"] == pytest.approx(0.06)

    html = (out / "report.html").read_text(encoding="utf-8")
    cells = HtmlDoc(html).table("system", "nDCG@2")[1]
    assert "duplicate rate 0.250" in cells[3] and "catalog coverage 0.0700" in cells[3]
    assert "duplicate rate 0.167" in cells[1] and "catalog coverage 0.0500" in cells[1]


def test_catalog_coverage_with_a_catalog_file(tmp_path):
    folder = tmp_path / "c"
    folder.mkdir()
    # ten distinct ids (d1 listed twice, a header line); d4 is shown but not in the catalog; z1 only by q9
    (folder / "catalog.txt").write_text("doc_id\nd1\nd2\nd3\ne1\nz1\nx1\nx2\nd1\nx3\nx4\nx5\n")
    spec = write_companion_case(folder, "catalog.txt")
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--no-mlflow", "--quiet"]) == 0
    m = json.loads((out / "summary.json").read_text())["systems"]["sys"]
    assert m["ndcg_at_2"]["catalog_coverage"] == pytest.approx(3 / 10)  # d1 d2 e1
    assert m["ndcg_at_3"]["catalog_coverage"] == pytest.approx(4 / 10)  # + d3
    assert m["ndcg_at_10"]["catalog_coverage"] == pytest.approx(4 / 10)  # d4 is not in the catalog
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "catalog coverage 0.4000" in html


def test_catalog_coverage_with_a_csv_catalog_file(tmp_path):
    """A catalog CSV with a doc_id column (and other columns) counts the same documents as a plain list."""
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "catalog.csv").write_text(
        "doc_id,title\nd1,one\nd2,two\nd3,three\ne1,four\nz1,five\nx1,six\nx2,seven\nx3,eight\nx4,nine\nx5,ten\n"
    )
    spec = write_companion_case(folder, "catalog.csv")
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--no-mlflow", "--quiet"]) == 0
    m = json.loads((out / "summary.json").read_text())["systems"]["sys"]
    assert m["ndcg_at_2"]["catalog_coverage"] == pytest.approx(3 / 10)
    assert m["ndcg_at_10"]["catalog_coverage"] == pytest.approx(4 / 10)


# --------------------------------------------------------------------------- rebuilt and odd names


@pytest.mark.integration
def test_report_command_rebuilds_the_demo_report(demo, tmp_path):
    out = tmp_path / "rebuilt"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(demo.root)
        assert main(["report", demo.parent.info.run_id, "--out", str(out), "--tracking-uri", demo.uri]) == 0
    rebuilt = (out / "report.html").read_text(encoding="utf-8")
    assert rebuilt.count("<svg") == 3
    assert rebuilt == demo.html  # same tables, sensitivity, companions and figures, to the byte
    for name in FIGURES:
        assert (out / "figures" / f"{name}.svg").read_bytes() == (demo.out / "figures" / f"{name}.svg").read_bytes()


def test_system_names_that_look_like_numbers_are_kept(tmp_path):
    """System names are strings: '007' and '1e3' must not become 7.0 and 1000.0 in any table."""
    folder = tmp_path / "n"
    folder.mkdir()
    (folder / "qrels.txt").write_text("q1 0 d1 2\nq1 0 d2 1\nq1 0 d3 1\nq2 0 d1 1\nq2 0 d4 2\n")
    (folder / "a.run").write_text("q1 Q0 d1 1 10 s\nq1 Q0 d3 2 8 s\nq1 Q0 d2 3 7 s\nq2 Q0 d1 1 3 s\nq2 Q0 d4 2 2 s\n")
    (folder / "b.run").write_text("q1 Q0 d2 1 10 s\nq1 Q0 d3 2 8 s\nq1 Q0 d1 3 7 s\nq2 Q0 d4 1 3 s\nq2 Q0 d1 2 2 s\n")
    spec = {
        "spec_version": 1,
        "name": "names",
        "metric": dict(COMPANION_METRIC, cutoffs=[2, 10]),
        "queries": {"weights": "uniform"},
        "data": {"qrels": "qrels.txt", "systems": {"007": "a.run", "1e3": "b.run"}},
        "uncertainty": {"resamples": 100, "confidence": 0.9, "method": "percentile", "seed": 1},
        "comparison": {
            "baseline": "007",
            "test": "randomization",
            "correction": "none",
            "wins_losses": 2,
            "tie_tolerance": 0.0,
        },
        "report": {"sensitivity": True},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--no-mlflow", "--quiet"]) == 0
    doc = HtmlDoc((out / "report.html").read_text(encoding="utf-8"))
    assert [r[0] for r in doc.table("system", "nDCG@2")[1:]] == ["007", "1e3"]
    assert doc.table("candidate", "baseline")[1][:2] == ["1e3", "007"]
    assert doc.table("rule", "alternative")[0][2:] == ["007", "1e3", "1e3 − 007"]


@pytest.mark.parametrize("confidence, shown", [(0.995, "99.5%"), (0.9500000000000001, "95.00000000000001%")])
def test_the_declared_confidence_is_written_as_declared_in_the_report_and_figures(tmp_path, confidence, shown):
    """A confidence level is a declared number: the report's and the figures' intervals name it as given
    (0.995 is 99.5%, not 100%), as the terminal and the decision's statement do."""
    out = tmp_path / "out"
    argv = ["run", str(CONFIGS / "demo.yaml"), "--out", str(out), "--no-mlflow", "--quiet"]
    sets = [f"uncertainty.confidence={confidence!r}", "uncertainty.resamples=200", "report.sensitivity=false"]
    assert main(argv + [f"--set={s}" for s in sets]) == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    assert f"{shown} bca intervals" in html
    svgs = {p.name: p.read_text(encoding="utf-8") for p in (out / "figures").glob("*.svg")}
    with_level = [name for name, text in svgs.items() if "%" in text and "interval" in text]
    assert with_level, sorted(svgs)
    for name in with_level:
        levels = re.findall(r"([\d.]+%) (?:confidence )?interval", svgs[name])
        assert levels and set(levels) == {shown}, (name, levels)
