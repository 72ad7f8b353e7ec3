"""The reports of an evaluation with a judge (``ndcg_mlflow.render.judge_report``): the sentences beside the verdict
(which labels it rests on, how far the judge-only view is from the declared estimate, the judge's bias test), the
section "Judgments from a model" with its tables, the comparisons' p-value named by its estimator, and a hostile
judge name shown as text. The numbers are read back against ``summary.json``'s ``judge`` and ``judge.csv``."""

from __future__ import annotations

import copy
import html
import re

import pandas as pd
import pytest
from helpers import NASTY_JUDGE, REPO, HtmlDoc, write_escaping_spec

import ndcg_mlflow
from ndcg_mlflow.outputs.write import write_outputs
from ndcg_mlflow.render.bundle import load_bundle
from ndcg_mlflow.render.format import md_text
from ndcg_mlflow.render.markdown import render_markdown
from ndcg_mlflow.render.report import render_html

HEAD = "ndcg_at_10"  # the demo's headline key (it declares no decision)


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    out = tmp_path_factory.mktemp("judged") / "out"
    write_outputs(ndcg_mlflow.evaluate(str(REPO / "configs" / "demo_judge.yaml")), out)
    return out


def _signed(x: float) -> str:
    return f"{x:+.4f}"


def _lead(page: str) -> list[str]:
    """The paragraphs of report.html's judge lead, as plain text."""
    block = re.search(r"<div class='lead' id='judge-lead'>(.*?)</div>", page, re.S)
    assert block, "no judge lead"
    return [html.unescape(p) for p in re.findall(r"<p>(.*?)</p>", block.group(1), re.S)]


def test_the_lead_says_which_labels_the_verdict_rests_on_and_how_far_the_judge_moved_it(judged):
    bundle = load_bundle(judged)
    judge = bundle.summary["judge"]
    page = (judged / "report.html").read_text(encoding="utf-8")
    # on the first screen: after the headline, before the results
    assert page.index("id='headline'") < page.index("id='judge-lead'") < page.index("id='results'")
    first, *pairs = _lead(page)
    heads = [c for c in judge["comparisons"] if c["key"] == HEAD]
    assert [c["candidate"] for c in heads] == ["reranker-v2", "dense-ties"]
    weights = ", ".join(f"{c['lambda']:.4f} for {c['candidate']} − bm25" for c in heads)
    assert first == (
        f"The verdict rests on human judgments of {judge['n_labelled']} queries and demo-judge's judgments of "
        f"{judge['n_unlabelled']} more (estimator ppi++: λ = {weights} at nDCG@10)."
    )
    assert judge["n_labelled"] + judge["n_unlabelled"] == bundle.summary["n_queries"] == 240
    assert len(pairs) == len(heads)
    for text, c in zip(pairs, heads):
        gap = c["judge_only"]["estimate"] - c["estimate"]
        bias = c["judge_bias"]
        assert bias["p_value"] > 0.05  # (the demo's judge shows no bias at these keys)
        assert text.startswith(f"{c['candidate']} − bm25 at nDCG@10: ppi++ {_signed(c['estimate'])} ")
        assert (
            f"judge-only {_signed(c['judge_only']['estimate'])} (not valid: the judge's bias is not corrected)" in text
        )
        assert f"{_signed(gap)} from the ppi++ estimate" in text
        assert f"human-only {_signed(c['human_only']['estimate'])}" in text
        assert (
            f"{_signed(bias['estimate'])} [{_signed(bias['ci_low'])}, {_signed(bias['ci_high'])}], "
            f"p {bias['p_value']:.4f}: no bias detected at the 95% level." in text
        )
    # report.md says the same, escaped for markdown, before the systems table
    md = (judged / "report.md").read_text(encoding="utf-8")
    for text in [first, *pairs]:
        assert md_text(text) in md
        assert md.index(md_text(text)) < md.index("| system |")


def test_the_lead_says_when_the_judge_is_biased_and_names_a_model_without_a_name(judged):
    bundle = load_bundle(judged)
    bundle.summary = copy.deepcopy(bundle.summary)
    judge = bundle.summary["judge"]
    judge["name"] = None
    target = next(c for c in judge["comparisons"] if c["key"] == HEAD)
    target["judge_bias"]["p_value"] = 0.01
    md = render_markdown(bundle)
    assert md_text(f"and a model's judgments of {judge['n_unlabelled']} more") in md
    assert (
        md_text(
            "p 0.0100: the judge is biased on this difference at the 95% level: the judge-only view would mislead, "
            "the ppi++ estimate corrects it."
        )
        in md
    )
    assert md.count(md_text("no bias detected")) == 1  # the other candidate's


def test_the_section_shows_each_comparison_and_mean_under_the_three_views(judged):
    page = (judged / "report.html").read_text(encoding="utf-8")
    doc = HtmlDoc(page)
    table = pd.read_csv(judged / "judge.csv", dtype={"cutoff": str}, keep_default_na=False, na_values=[""])
    comps = doc.table("candidate", "baseline", "cutoff", "ppi++ (declared)")
    assert comps[0][3:] == [
        "ppi++ (declared)",
        "human-only",
        "judge-only (not valid)",
        "λ",
        "ρ",
        "neff",
        "judge bias [interval]",
        "p (bias)",
    ]

    def view(r, prefix: str) -> str:
        return f"{_signed(r[prefix or 'estimate'])} [{_signed(r[f'{prefix}_ci_low' if prefix else 'ci_low'])}, " + (
            f"{_signed(r[f'{prefix}_ci_high' if prefix else 'ci_high'])}]"
        )

    rows = table[table["kind"] == "comparison"].to_dict("records")
    assert len(comps) - 1 == len(rows) == 6
    for cells, r in zip(comps[1:], rows):
        assert cells[:3] == [r["system"], r["baseline"], f"nDCG@{r['cutoff']}"]
        assert cells[3:6] == [view(r, ""), view(r, "human_only"), view(r, "judge_only")]
        assert cells[6:9] == [f"{r['lambda']:.4f}", f"{r['rho']:.4f}", f"{r['n_effective']:.1f}"]
        assert cells[9:] == [view(r, "judge_bias"), f"{r['judge_bias_p']:.4f}"]
    means = doc.table("system", "cutoff", "ppi++ (declared)")
    systems = table[table["kind"] == "system"].to_dict("records")
    assert len(means) - 1 == len(systems) == 9
    for cells, r in zip(means[1:], systems):
        assert cells[:2] == [r["system"], f"nDCG@{r['cutoff']}"]
        assert cells[2] == f"{r['estimate']:.4f} [{r['ci_low']:.4f}, {r['ci_high']:.4f}]"
        assert cells[4].startswith(f"{r['judge_only']:.4f} ")
    kappa = load_bundle(judged).summary["judge"]["agreement"]["weighted_kappa"]
    assert f"quadratic-weighted κ = {kappa:.3f}" in html.unescape(page)
    assert page.index("id='judge'") < page.index("<h2>Figures</h2>")
    assert 'data-figure="judge_views"' in page and (judged / "figures" / "judge_views.svg").is_file()
    md = (judged / "report.md").read_text(encoding="utf-8")
    assert "| candidate | baseline | cutoff | ppi++ (declared) | human-only | judge-only (not valid) |" in md
    assert md.count("| reranker-v2 | bm25 | nDCG\\@") == 3


def test_the_comparisons_p_value_is_named_by_its_estimator(judged):
    doc = HtmlDoc((judged / "report.html").read_text(encoding="utf-8"))
    heads = doc.table("candidate", "baseline", "cutoff", "paired")[0]
    assert "p ppi++" in heads and "p randomization" not in heads


def test_a_hostile_judge_name_is_text_in_both_reports(tmp_path):
    spec = write_escaping_spec(tmp_path / "esc", judge=True)
    out = tmp_path / "out"
    write_outputs(ndcg_mlflow.evaluate(str(spec)), out)
    page = (out / "report.html").read_text(encoding="utf-8")
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "<script" not in page.lower()
    assert _lead(page)[0].startswith(f"The verdict rests on human judgments of 4 queries and {NASTY_JUDGE}'s ")
    assert f"and {NASTY_JUDGE}'s judgments of these" in html.unescape(page)  # the section's words
    assert not re.search(r"(?<!\\)<", md)  # no raw tag
    assert md_text(f"and {NASTY_JUDGE}'s judgments of 1 more") in md
    assert "**bold**" not in md and "\\*\\*bold\\*\\*" in md
    assert render_html(load_bundle(out)) == page  # (drawn from the folder alone)


def test_with_a_decision_the_lead_follows_it_at_its_key(tmp_path):
    import yaml

    spec = yaml.safe_load((REPO / "configs" / "demo_judge.yaml").read_text(encoding="utf-8"))
    spec["decision"] = {"key": "ndcg_at_5", "rule": "superiority", "margin": 0.0}
    path = REPO / "configs" / "demo_judge.yaml"
    out = tmp_path / "out"
    write_outputs(ndcg_mlflow.evaluate(spec, base_dir=path.parent), out)
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.index("id='decision'") < page.index("id='judge-lead'") < page.index("id='results'")
    judge = load_bundle(out).summary["judge"]
    at5 = [c for c in judge["comparisons"] if c["key"] == "ndcg_at_5"]
    first, *pairs = _lead(page)
    assert f"λ = {at5[0]['lambda']:.4f} for reranker-v2 − bm25, {at5[1]['lambda']:.4f} for dense-ties" in first
    assert [p.split(":")[0] for p in pairs] == ["reranker-v2 − bm25 at nDCG@5", "dense-ties − bm25 at nDCG@5"]
