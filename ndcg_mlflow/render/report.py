"""Reviewable reports built from an evaluation's output folder.

Everything here reads the local output folder (``summary.json``, ``per_query.csv``,
``wins_losses.json``, ``bootstrap.csv``, ``explanation.txt``, ``sensitivity.csv``),
so the same report is produced right after a run, from artifacts downloaded from
MLflow (``ndcg-mlflow report RUN_ID``), or for a comparison of logged runs.

``report.html`` is one self-contained file: inline CSS, figures as inline SVG, no
script and nothing fetched from anywhere; every id and string from the data is
HTML-escaped. ``report.md`` is a short markdown summary. Both lead with the answer: the decision when the spec
declares one, else each candidate against the baseline at the headline cutoff; then the systems x cutoffs
table, the comparisons, and the spec in words after the numbers (collapsed in ``report.html``). The figures
(:mod:`ndcg_mlflow.render.figures`) are also written as ``figures/<name>.svg``, the files
logged to MLflow.
"""

from __future__ import annotations

from pathlib import Path

from ..rules import key_label, metric_name
from .bundle import Bundle, load_bundle
from .figures import FIGURES, draw
from .format import (
    FILE,
    html_text,
    intervals_line,
    listing,
    models_sentence,
    number,
    p_value,
    per_query_elsewhere,
    queries_line,
    share,
    wins_ties_losses,
)
from .judge_report import html_lead, html_section
from .markdown import render_markdown
from .sections import detection_note, html_sections

__all__ = [
    "FIGURES",
    "Bundle",
    "figures",
    "load_bundle",
    "per_query_elsewhere",
    "render_html",
    "render_markdown",
    "write_figures",
    "write_reports",
]


def write_reports(folder: str | Path) -> tuple[Path, Path]:
    """Write ``report.html``, ``report.md`` and ``figures/<name>.svg`` into an output folder; returns the paths
    of the two reports."""
    bundle = load_bundle(folder)
    figs = figures(bundle)
    write_figures(folder, figs)
    html_path = Path(folder) / "report.html"
    md_path = Path(folder) / "report.md"
    html_path.write_text(render_html(bundle, figs), encoding="utf-8")
    md_path.write_text(render_markdown(bundle), encoding="utf-8")
    return html_path, md_path


def write_figures(folder: str | Path, figs: dict[str, str]) -> list[Path]:
    """``figures/<name>.svg`` for each figure (the same SVG text the HTML report holds); a figure of
    :data:`FIGURES` not drawn leaves no file behind. Returns the paths written."""
    target = Path(folder) / "figures"
    target.mkdir(exist_ok=True)
    for name in FIGURES:
        if name not in figs:
            (target / f"{name}.svg").unlink(missing_ok=True)
    paths = []
    for name, svg in figs.items():
        path = target / f"{name}.svg"
        path.write_text(svg + "\n", encoding="utf-8")
        paths.append(path)
    return paths


# --------------------------------------------------------------------------- formatting


_e = html_text  # every string shown in the page


_label = metric_name


# --------------------------------------------------------------------------- figures


def figures(bundle: Bundle) -> dict[str, str]:
    """The report's figures as SVG text (:mod:`ndcg_mlflow.render.figures`): nDCG by cutoff, sorted per-query
    differences and bootstrap distributions of the differences (the last two only with a comparison)."""
    return draw(bundle.summary, bundle.per_query, bundle.bootstrap)


# --------------------------------------------------------------------------- HTML

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;
color:#1d1d1f;line-height:1.45;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #ddd}
h3{font-size:1.05rem}table{border-collapse:collapse;margin:.5rem 0;font-size:.85rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right;vertical-align:top}
th{background:#f5f5f7}td.l,th.l{text-align:left}.muted{color:#666;font-size:.85rem}
.up{color:#1a7f37;font-weight:600}.down{color:#c62828;font-weight:600}
pre{background:#f5f5f7;padding:.75rem;overflow-x:auto;font-size:.8rem;white-space:pre-wrap}
figure{margin:1rem 0}figure svg{max-width:100%;height:auto}code{font-size:.85rem}
details{margin:.3rem 0}summary{cursor:pointer}
.decision,.lead{border:2px solid #999;border-radius:6px;padding:.5rem .8rem;margin:1rem 0}
.decision.pass{border-color:#1a7f37;background:#eef8f0}.decision.fail{border-color:#c62828;background:#fdeeee}
.decision ul{margin:.3rem 0}.lead table{margin:.4rem 0}
"""


def render_html(bundle: Bundle, figs: dict[str, str] | None = None) -> str:
    """``report.html``; ``figs`` are the figures already drawn (else drawn here)."""
    s = bundle.summary
    parts = [
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>nDCG report — {_e(s['name'])}</title><style>{CSS}</style></head><body>"
    ]
    parts.append(f"<h1>nDCG report — {_e(s['name'])}</h1>")
    parts.append(
        f"<p class='muted'>ndcg-mlflow {_e(s.get('ndcg_mlflow_version', ''))} · spec sha256 "
        f"<code>{_e(s.get('spec_sha256', ''))}</code></p>"
    )
    # the answer first, then the numbers it rests on, then what was measured (collapsed) and the details
    parts.append(_section_decision(bundle) or _section_headline(bundle))
    parts += [lead for lead in (html_lead(bundle),) if lead]
    if bundle.per_query is None:
        parts.append(f"<p class='muted' id='per-query'>{_e(per_query_elsewhere(s))}</p>")
    parts.append(_section_results(bundle))
    parts.append(_section_comparisons(bundle))
    parts += [section for section in (html_section(bundle),) if section]
    parts.append(html_sections(bundle))
    parts.append(_section_spec(bundle))
    parts.append(_section_coverage(bundle))
    parts.append(_section_figures(bundle, figures(bundle) if figs is None else figs))
    parts.append(_section_wins_losses(bundle))
    parts.append(_section_sensitivity(bundle))
    notes = s.get("notes") or []
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    parts.append(_section_files(bundle))
    parts.append("</body></html>")
    return "\n".join(parts)


def _tone(c: dict) -> str:
    """The class of a comparison's difference: ``up`` when its whole interval is above 0, ``down`` below."""
    return "up" if (c.get("ci_low") or 0) > 0 else "down" if (c.get("ci_high") or 0) < 0 else ""


def _section_decision(bundle: Bundle) -> str:
    """The decision first, when the spec declares one: the outcome, the rule, each candidate's numbers."""
    d = bundle.summary.get("decision")
    if not d:
        return ""
    items = "".join(
        f"<li><b>{_e(bundle.label(r['candidate']))}</b>: {_e(r['outcome'].upper())} — difference "
        f"{number(r.get('delta'), signed=True)}, interval [{number(r.get('ci_low'), signed=True)}, "
        f"{number(r.get('ci_high'), signed=True)}]"
        + (f", p corrected {p_value(r.get('p_corrected'))}" if d.get("max_p") is not None else "")
        + f" ({_e(r['reason'])}) {_e(detection_note(bundle, r['candidate']))}</li>"
        for r in d.get("candidates", [])
    )
    against = f" against the baseline {_e(bundle.label(d['candidates'][0]['baseline']))}" if d.get("candidates") else ""
    return (
        f"<div class='decision {_e(d['outcome'])}' id='decision'><b>Decision: {_e(d['outcome'].upper())}</b>"
        f"{against}<p class='muted'>{_e(d['statement'])}</p><ul>{items}</ul></div>"
    )


def _section_headline(bundle: Bundle) -> str:
    """Without a decision, the answer first: each candidate against the baseline at the headline cutoff."""
    comps = [c for c in bundle.summary.get("comparisons") or [] if c["key"] == bundle.headline]
    if not comps:
        return ""
    rows = "".join(
        f"<tr><td class='l'>{_e(bundle.label(c['candidate']))}</td>"
        f"<td class='{_tone(c)}'>{number(c.get('delta'), signed=True)}</td>"
        f"<td>[{number(c.get('ci_low'), signed=True)}, {number(c.get('ci_high'), signed=True)}]</td>"
        f"<td>{p_value(c.get('p_corrected'))}</td><td>{_e(wins_ties_losses(c))}</td></tr>"
        for c in comps
    )
    notes = [f"{bundle.label(c['candidate'])}: {n}" for c in comps if (n := detection_note(bundle, c["candidate"]))]
    return (
        f"<div class='lead' id='headline'><b>Each candidate against the baseline "
        f"{_e(bundle.label(comps[0]['baseline']))} at {_e(_label(bundle.headline))}</b><table><tr>"
        f"<th class='l'>candidate</th><th>difference</th><th>interval</th><th>p corrected</th>"
        f"<th>wins / ties / losses</th></tr>{rows}</table>"
        + "".join(f"<p>{_e(n)}</p>" for n in notes)
        + "<p class='muted'>The difference is the candidate's mean minus the baseline's: "
        f"<span class='up'>green</span> where its whole interval is above 0, <span class='down'>red</span> where it "
        f"is below 0. p corrected is the "
        f"{_e(comps[0].get('corrected_test', ''))} p-value corrected over "
        f"{_e(bundle.summary.get('comparison_family', ''))}. No decision rule is declared; every cutoff is in the "
        f"comparisons below.</p></div>"
    )


def _section_spec(bundle: Bundle) -> str:
    """What was measured: the spec in words (``explanation.txt`` without the other tools' table), collapsed."""
    text = bundle.explanation.split("\nHow other tools")[0].strip() if bundle.explanation else ""
    if not text:
        text = "\n".join(f"{k}: {v}" for k, v in bundle.summary.get("spec", {}).items())
    return (
        "<h2 id='spec'>What was measured</h2><details><summary>The spec in words: each rule of the metric and what "
        f"it does, the queries and their weights, the uncertainty and the comparison</summary><pre>{_e(text)}</pre>"
        "</details>"
    )


def _section_coverage(bundle: Bundle) -> str:
    keys = bundle.keys
    rows = [
        "<h2>Judgments, exclusions and missing queries</h2><table><tr><th class='l'>system</th>"
        "<th>evaluated</th><th>excluded</th><th>empty ideal</th><th>missing</th><th>weight sum</th>"
        + "".join(f"<th>judged coverage @{_e(key_label(k))}</th>" for k in keys)
        + "</tr>"
    ]
    for name, entry in bundle.summary["systems"].items():
        first = entry[keys[0]]
        rows.append(
            f"<tr><td class='l'>{_e(bundle.label(name))}</td><td>{first['n_evaluated']}</td><td>{first['n_excluded']}"
            f"</td><td>{first['n_empty_ideal']}</td><td>{first['n_missing']}</td>"
            f"<td>{first['weight_sum']:g}</td>"
            + "".join(f"<td>{number(entry[k].get('judged_coverage'), 3)}</td>" for k in keys)
            + "</tr>"
        )
    rows.append(
        "</table><p class='muted'>Counts at the first cutoff; judged coverage is the mean share of the "
        "returned top K that has a judgment.</p>"
    )
    return "".join(rows)


def _section_results(bundle: Bundle) -> str:
    keys = bundle.keys
    ci = bundle.has_ci
    head = f"<h2 id='results'>Results</h2><p>{_e(queries_line(bundle.summary))}</p>"
    if ci:
        head += f"<p class='muted'>{_e(intervals_line(bundle.summary, seed=True))}.</p>"
    rows = [
        head + "<table><tr><th class='l'>system</th>" + "".join(f"<th>{_e(_label(k))}</th>" for k in keys) + "</tr>"
    ]
    for name, entry in bundle.summary["systems"].items():
        cells = []
        for k in keys:
            m = entry[k]
            cell = number(m["mean"])
            if ci:
                cell += (
                    f"<br><span class='muted'>[{number(m.get('ci_low'))}, {number(m.get('ci_high'))}] "
                    f"SE {number(m.get('std_error'))}, n<sub>eff</sub> {number(m.get('n_eff'), 1)}</span>"
                )
            if "duplicate_rate" in m:
                cell += f"<br><span class='muted'>duplicate rate {number(m['duplicate_rate'], 3)}</span>"
            if "catalog_coverage" in m:
                cell += f"<br><span class='muted'>catalog coverage {number(m['catalog_coverage'], 4)}</span>"
            cells.append(f"<td>{cell}</td>")
        rows.append(f"<tr><td class='l'>{_e(bundle.label(name))}</td>{''.join(cells)}</tr>")
    rows.append("</table>")
    if bundle.models:
        rows.append(f"<p class='muted' id='models'>{_e(models_sentence(bundle.models))}</p>")
    return "".join(rows)


def _section_comparisons(bundle: Bundle) -> str:
    comps = bundle.summary.get("comparisons") or []
    if not comps:
        return "<h2>Comparisons</h2><p class='muted'>No comparison was declared.</p>"
    # with a judge, the first test's p-value is the declared estimator's (p_judged), not a randomization test's
    first_p = _e(comps[0]["corrected_test"]) if "p_judged" in comps[0] else "randomization"
    rows = [
        f"<h2>Comparisons</h2><p class='muted'>Family for the correction: "
        f"{_e(bundle.summary.get('comparison_family', ''))}. p<sub>corr</sub> corrects the "
        f"{_e(comps[0].get('corrected_test', ''))} p-value.</p>"
        "<table><tr><th class='l'>candidate</th><th class='l'>baseline</th><th>cutoff</th><th>paired</th>"
        "<th>baseline mean</th><th>candidate mean</th><th>difference</th><th>interval</th><th>relative</th>"
        f"<th>p {first_p}</th><th>p t-test</th><th>p corrected</th><th>d<sub>z</sub></th>"
        "<th>wins / ties / losses</th></tr>"
    ]
    for c in comps:
        rel = c.get("relative_delta")
        rows.append(
            f"<tr><td class='l'>{_e(bundle.label(c['candidate']))}</td>"
            f"<td class='l'>{_e(bundle.label(c['baseline']))}</td><td>{_e(c['cutoff'])}</td><td>{c['n_paired']}</td>"
            f"<td>{number(c.get('baseline_mean'))}</td><td>{number(c.get('candidate_mean'))}</td>"
            f"<td class='{_tone(c)}'>{number(c.get('delta'), signed=True)}</td>"
            f"<td>[{number(c.get('ci_low'), signed=True)}, {number(c.get('ci_high'), signed=True)}]</td>"
            f"<td>{share(rel, signed=True, missing=FILE)}</td>"
            f"<td>{p_value(c.get('p_randomization', c.get('p_judged')))}</td>"
            f"<td>{p_value(c.get('p_t_test'))}</td><td>{p_value(c.get('p_corrected'))}</td>"
            f"<td>{number(c.get('effect_size_dz'), 3, signed=True)}</td>"
            f"<td>{_e(wins_ties_losses(c))}</td></tr>"
        )
    rows.append(
        "</table><p class='muted'>The difference is the candidate's mean minus the baseline's: "
        "<span class='up'>green</span> where its whole interval is above 0 (the candidate is better), "
        "<span class='down'>red</span> where it is below 0 (the candidate is worse), uncoloured where "
        "the interval includes 0 or is undefined.</p>"
    )
    return "".join(rows)


def _section_figures(bundle: Bundle, figs: dict[str, str]) -> str:
    head = _label(bundle.headline)
    captions = {
        "ndcg_by_cutoff": "Mean nDCG against cutoff for each system"
        + (", with its confidence interval." if bundle.has_ci else "."),
        "per_query_differences": f"Per-query differences at {head} (candidate − baseline), sorted: the queries "
        f"where the line is above zero are the candidate's wins.",
        "bootstrap_differences": "Bootstrap distribution of each difference of means, with the observed "
        "difference and its interval; every panel has the same scales.",
        "segment_differences": f"Each candidate's difference from the baseline at {head}, overall and in each "
        "segment, with its interval: where it won and where it lost.",
        "judge_views": "Each candidate's difference from the baseline at each cutoff under the three views: the "
        "declared estimator's (the numbers of this report), the human-only and the judge-only, which is not valid "
        "(dashed and hollow: the judge's bias is not corrected).",
    }
    parts = ["<h2>Figures</h2>"]
    for name, svg in figs.items():
        parts.append(
            f"<figure id='{name}'>{svg}<figcaption class='muted'>{_e(captions[name])} "
            f"(<code>figures/{name}.svg</code>)</figcaption></figure>"
        )
    return "".join(parts)


def _doc_rows(e: dict) -> str:
    rows = []
    btop, ctop = e.get("baseline_top", []), e.get("candidate_top", [])
    for r in range(max(len(btop), len(ctop))):
        cells = []
        for top, flag, mark in ((btop, "left_top_k", "left"), (ctop, "entered_top_k", "entered")):
            if r < len(top):
                d = top[r]
                grade = "unjudged" if d.get("grade") is None else f"{d['grade']:g}"
                m = f" <span class='{'down' if mark == 'left' else 'up'}'>{mark}</span>" if d.get(flag) else ""
                cells.append(f"<td class='l'>{_e(d['doc_id'])}</td><td>{_e(grade)}{m}</td>")
            else:
                cells.append("<td></td><td></td>")
        rows.append(f"<tr><td>{r + 1}</td>{''.join(cells)}</tr>")
    return (
        "<table><tr><th>rank</th><th class='l'>baseline document</th><th>grade</th>"
        "<th class='l'>candidate document</th><th>grade</th></tr>" + "".join(rows) + "</table>"
    )


def _section_wins_losses(bundle: Bundle) -> str:
    if not bundle.wins_losses or not bundle.wins_losses.get("comparisons"):
        return ""
    parts = [
        "<h2>Largest wins and losses</h2><p class='muted'>Per comparison and cutoff, the queries with the "
        "largest differences each way, with both systems' top documents; relevant documents (grade &gt; 0) "
        "that <span class='up'>entered</span> or <span class='down'>left</span> the top K are marked, and a "
        "difference is <span class='up'>green</span> for a win of the candidate, <span class='down'>red</span> "
        "for a loss.</p>"
    ]
    for block in bundle.wins_losses["comparisons"]:
        parts.append(
            f"<h3>{_e(bundle.label(block['candidate']))} vs {_e(bundle.label(block['baseline']))}, "
            f"{_e(_label(block['key']))}</h3>"
        )
        for kind in ("wins", "losses"):
            items = block.get(kind) or []
            parts.append(f"<p><b>{kind.capitalize()}</b> ({len(items)})</p>")
            if not items:
                continue
            for e in items:
                entered = listing(e.get("relevant_entered", []))
                left = listing(e.get("relevant_left", []))
                parts.append(
                    f"<details><summary>query <b>{_e(e['query_id'])}</b> (weight {e['weight']:g}): "
                    f"{number(e['baseline_ndcg'])} → {number(e['candidate_ndcg'])} "
                    f"(<span class='{'up' if e['delta'] > 0 else 'down'}'>{number(e['delta'], signed=True)}</span>); "
                    f"relevant entered: {_e(entered)}; left: {_e(left)}</summary>{_doc_rows(e)}</details>"
                )
    return "".join(parts)


def _section_sensitivity(bundle: Bundle) -> str:
    t = bundle.sensitivity
    if t is None or t.empty:
        return ""
    label = key_label(bundle.headline)
    t = t[t["cutoff"] == label]
    cols = list(dict.fromkeys(zip(t["kind"], t["system"], t["baseline"].fillna(""))))
    name = bundle.label
    head = "".join(f"<th>{_e(name(s) if k == 'system' else f'{name(s)} − {name(b)}')}</th>" for k, s, b in cols)
    rows = [
        f"<h2>Sensitivity to the declared choices</h2><p class='muted'>{_e(_label(bundle.headline))}: each "
        f"row changes one rule and keeps the others as declared; cells show the change from the declared "
        f"value; FLIP marks a comparison whose sign changes; {FILE} marks an undefined mean (no query left "
        f"in it).</p><table><tr><th class='l'>rule</th><th class='l'>alternative</th>{head}</tr>"
    ]
    for (rule, alt), group in t.groupby(["rule", "alternative"], sort=False):
        cells = []
        for k, s_, b in cols:
            r = group[(group["kind"] == k) & (group["system"] == s_) & (group["baseline"].fillna("") == b)]
            if r.empty:
                cells.append("<td></td>")
                continue
            r = r.iloc[0]
            if rule == "declared":
                cells.append(f"<td>{number(r['value'], signed=k == 'comparison')}</td>")
            else:
                flip = " <span class='down'>FLIP</span>" if bool(r["sign_flip"]) else ""
                cells.append(f"<td>{number(r['change'], signed=True)}{flip}</td>")
        rows.append(f"<tr><td class='l'>{_e(rule)}</td><td class='l'>{_e(alt)}</td>{''.join(cells)}</tr>")
    rows.append("</table>")
    return "".join(rows)


def _section_files(bundle: Bundle) -> str:
    files = bundle.summary.get("files") or {}
    rows = [
        "<h2>Data</h2><table><tr><th class='l'>role</th><th class='l'>file</th><th>rows</th>"
        "<th class='l'>sha256</th></tr>"
    ]
    for role, f in files.items():
        rows.append(
            f"<tr><td class='l'>{_e(role)}</td><td class='l'>{_e(f.get('path'))}</td><td>{f.get('rows')}"
            f"</td><td class='l'><code>{_e(f.get('sha256'))}</code></td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)
