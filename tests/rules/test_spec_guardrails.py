"""The spec's fields beyond one mean: ``queries.segments``, ``uncertainty.stratify``, ``comparison.risk_alpha`` and
``decision.guardrails``. Each error names its key path; a spec without them resolves, hashes and logs as before."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from ndcg_mlflow import SpecError, load_spec
from ndcg_mlflow.render.explain import explain
from ndcg_mlflow.spec import (
    RISK_ALPHA,
    Guardrails,
    RegressionGuardrail,
    SegmentGuardrail,
    parse_spec,
)

PLAIN = {
    "spec_version": 1,
    "name": "t",
    "metric": {"preset": "trec_eval", "cutoffs": [10]},
    "queries": {"weights": "uniform"},
    "data": {"qrels": "q.tsv", "systems": {"a": "a.run", "b": "b.run"}},
    "uncertainty": {"resamples": 1000, "confidence": 0.95, "method": "percentile", "seed": 7},
    "comparison": {
        "baseline": "a",
        "test": "randomization",
        "correction": "holm",
        "wins_losses": 0,
        "tie_tolerance": 0,
    },
    "decision": {"key": "ndcg_at_10", "rule": "superiority", "margin": 0.005},
}

FULL = copy.deepcopy(PLAIN)
FULL["queries"]["segments"] = "segments.tsv"
FULL["uncertainty"]["stratify"] = "segments"
FULL["comparison"]["risk_alpha"] = [1, 2.5, 0]
FULL["decision"]["guardrails"] = {
    "segments": {"rule": "non_inferiority", "margin": 0.02},
    "regressions": {"delta": 0.1, "max_share": 0.1},
}


def changed(raw: dict, path: str, value=None, delete: bool = False) -> dict:
    raw = copy.deepcopy(raw)
    *parents, last = path.split(".")
    node = raw
    for key in parents:
        node = node.setdefault(key, {})
    if delete:
        del node[last]
    else:
        node[last] = value
    return raw


def refused(raw: dict) -> SpecError:
    with pytest.raises(SpecError) as err:
        parse_spec(raw, base_dir="/base")
    return err.value


def test_every_new_field_resolves():
    spec = parse_spec(FULL, base_dir="/base")
    assert spec.queries.segments is not None
    assert spec.queries.segments.path == Path("/base/segments.tsv") and spec.queries.segments.format == "auto"
    assert spec.uncertainty is not None and spec.uncertainty.stratify is True
    assert spec.comparison is not None and spec.comparison.risk_alpha == (1.0, 2.5, 0.0)
    assert spec.decision is not None
    assert spec.decision.guardrails == Guardrails(
        SegmentGuardrail("non_inferiority", 0.02), RegressionGuardrail(0.1, 0.1)
    )
    resolved = spec.resolved()
    assert resolved["queries.segments"] == "segments.tsv"
    assert resolved["uncertainty.stratify"] == "segments"
    assert resolved["comparison.risk_alpha"] == "1,2.5,0"
    assert resolved["decision.guardrails.segments.rule"] == "non_inferiority"
    assert resolved["decision.guardrails.segments.margin"] == 0.02
    assert resolved["decision.guardrails.regressions.delta"] == 0.1
    assert resolved["decision.guardrails.regressions.max_share"] == 0.1


def test_the_defaults_and_a_spec_without_the_new_fields():
    spec = parse_spec(PLAIN, base_dir="/base")
    assert spec.queries.segments is None
    assert spec.uncertainty is not None and spec.uncertainty.stratify is False
    assert spec.comparison is not None and spec.comparison.risk_alpha == RISK_ALPHA == (1.0, 5.0)
    assert spec.decision is not None and spec.decision.guardrails == Guardrails(None, None)
    # nothing new among the params of a spec that declares none of them (the logged params stay as they were)
    new = ("queries.segments", "stratify", "risk_alpha", "guardrails")
    assert not [k for k in spec.resolved() if any(n in k for n in new)]
    # the declared defaults are the same spec, by value and by params
    same = changed(changed(PLAIN, "uncertainty.stratify", "none"), "comparison.risk_alpha", [1, 5])
    same = changed(same, "decision.guardrails", {})
    again = parse_spec(same, base_dir="/base")
    assert (again.uncertainty, again.comparison, again.decision) == (spec.uncertainty, spec.comparison, spec.decision)
    assert again.resolved() == spec.resolved()


def test_the_definition_digest_ignores_the_statistics_and_the_segments():
    """The segments say how queries are grouped, not what a query's nDCG is: the definition stays that of the
    metric and query rules."""
    assert parse_spec(FULL, base_dir="/b").definition_digest() == parse_spec(PLAIN, base_dir="/b").definition_digest()


def test_the_spec_hash_is_the_text_as_given(tmp_path):
    path = tmp_path / "s.yaml"
    text = "# a spec\n" + yaml.safe_dump(PLAIN, sort_keys=False)
    path.write_text(text)
    import hashlib

    assert load_spec(path).sha256 == hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(
    "path, value, key, words",
    [
        ("queries.segments", 3, "queries.segments", "must be a file path"),
        ("queries.segments", "", "queries.segments", "must be a file path"),
        ("queries.segments", {"path": "s.csv", "format": "trec"}, "queries.segments.format", "auto, csv, tsv"),
        ("queries.segments", {"path": "s", "format": "delta"}, "queries.segments.format", "auto, csv, tsv"),
        ("queries.segments", {"path": "s", "version": 1}, "queries.segments.version", "unknown key"),
        ("queries.segments", {"path": "s.csv", "columns": {"qid": "x"}}, "queries.segments.columns.qid", "query_id"),
        ("queries.segments", {"path": "s.csv", "colums": {}}, "queries.segments.colums", "did you mean 'columns'"),
        ("queries.segment", "s.tsv", "queries.segment", "did you mean 'segments'"),
        ("uncertainty.stratify", "segment", "uncertainty.stratify", "did you mean 'segments'"),
        ("uncertainty.stratify", True, "uncertainty.stratify", "none, segments"),
        ("comparison.risk_alpha", 5, "comparison.risk_alpha", "non-empty list of distinct finite numbers >= 0"),
        ("comparison.risk_alpha", [], "comparison.risk_alpha", "non-empty list"),
        ("comparison.risk_alpha", [1, -0.5], "comparison.risk_alpha[1]", "must be >= 0"),
        ("comparison.risk_alpha", [1, ".inf"], "comparison.risk_alpha[1]", "must be a finite number"),
        ("comparison.risk_alpha", [1, float("inf")], "comparison.risk_alpha[1]", "must be a finite number"),
        ("comparison.risk_alpha", [1, float("nan")], "comparison.risk_alpha[1]", "must be a finite number"),
        ("comparison.risk_alpha", [True], "comparison.risk_alpha[0]", "must be a finite number"),
        ("comparison.risk_alpha", [5, 1, 5.0], "comparison.risk_alpha[2]", "listed twice (first at"),
        ("comparison.risk_alpha", [1, 1000001], "comparison.risk_alpha[1]", "must be at most 1,000,000"),
        ("comparison.risk_alpha", [1e308], "comparison.risk_alpha[0]", "must be at most 1,000,000"),
        ("comparison.risk_alfa", [1], "comparison.risk_alfa", "did you mean 'risk_alpha'"),
        ("decision.guardrails", [1], "decision.guardrails", "expected a mapping"),
        ("decision.guardrails.regression", {}, "decision.guardrails.regression", "did you mean 'regressions'"),
        ("decision.guardrails.segments", {"rule": "superiority"}, "decision.guardrails.segments.margin", "missing"),
        ("decision.guardrails.segments.rule", "non-inferiority", "decision.guardrails.segments.rule", "did you mean"),
        ("decision.guardrails.segments.margin", -0.01, "decision.guardrails.segments.margin", "number in [0, 1)"),
        ("decision.guardrails.segments.margin", 1, "decision.guardrails.segments.margin", "number in [0, 1)"),
        ("decision.guardrails.segments.margin", True, "decision.guardrails.segments.margin", "number in [0, 1)"),
        ("decision.guardrails.segments.margin", ".nan", "decision.guardrails.segments.margin", "number in [0, 1)"),
        ("decision.guardrails.segments.margin", 1e400, "decision.guardrails.segments.margin", "number in [0, 1)"),
        ("decision.guardrails.segments.margim", 0, "decision.guardrails.segments.margim", "did you mean 'margin'"),
        ("decision.guardrails.regressions", {"delta": 0.1}, "decision.guardrails.regressions.max_share", "missing"),
        ("decision.guardrails.regressions.delta", 0, "decision.guardrails.regressions.delta", "number in (0, 1)"),
        ("decision.guardrails.regressions.delta", -1, "decision.guardrails.regressions.delta", "number in (0, 1)"),
        ("decision.guardrails.regressions.delta", "0.1", "decision.guardrails.regressions.delta", "number in (0, 1)"),
        # nDCG lies in [0, 1]: no query loses 1 or more, so such a delta makes a guardrail that can never fail
        ("decision.guardrails.regressions.delta", 1, "decision.guardrails.regressions.delta", "could never fail"),
        ("decision.guardrails.regressions.delta", 5, "decision.guardrails.regressions.delta", "number in (0, 1)"),
        ("decision.guardrails.regressions.delta", 1e400, "decision.guardrails.regressions.delta", "(0, 1)"),
        ("decision.guardrails.regressions.delta", ".nan", "decision.guardrails.regressions.delta", "(0, 1)"),
        ("decision.guardrails.regressions.delta", True, "decision.guardrails.regressions.delta", "(0, 1)"),
        ("decision.guardrails.regressions.max_share", 1, "decision.guardrails.regressions.max_share", "(0, 1)"),
        ("decision.guardrails.regressions.max_share", -0.1, "decision.guardrails.regressions.max_share", "(0, 1)"),
        ("decision.guardrails.regressions.max_share", False, "decision.guardrails.regressions.max_share", "(0, 1)"),
        ("decision.guardrails.regressions.max_share", 1e9, "decision.guardrails.regressions.max_share", "(0, 1)"),
        # the share's upper bound is above 0 at any number of queries: a max_share of 0 could never pass
        ("decision.guardrails.regressions.max_share", 0, "decision.guardrails.regressions.max_share", "never pass"),
    ],
)
def test_each_field_is_checked_at_its_key_path(path, value, key, words):
    if value == ".inf":
        value = float("inf")
    if value == ".nan":
        value = float("nan")
    err = refused(changed(FULL, path, value))
    assert err.path == key, str(err)
    assert words in err.message, str(err)
    assert f"at key '{key}'" in str(err)


def test_a_segments_source_takes_a_format_and_a_column_mapping():
    raw = changed(FULL, "queries.segments", {"path": "s.csv", "format": "csv", "columns": {"segment": "market"}})
    spec = parse_spec(raw, base_dir="/base")
    src = spec.queries.segments
    assert src is not None and (src.format, src.columns) == ("csv", (("segment", "market"),))
    assert spec.resolved()["queries.segments.columns"] == "segment=market"


@pytest.mark.parametrize("alphas", [[0], [0.5], [1, 5], [5, 1, 10, 0.25]])
def test_risk_alpha_keeps_the_values_and_their_order(alphas):
    spec = parse_spec(changed(PLAIN, "comparison.risk_alpha", alphas), base_dir="/b")
    assert spec.comparison is not None and spec.comparison.risk_alpha == tuple(float(a) for a in alphas)


def test_what_needs_the_segments_names_queries_segments():
    no_segments = changed(FULL, "queries.segments", delete=True)
    err = refused(no_segments)  # the uncertainty section is read before the decision
    assert err.path == "uncertainty.stratify" and "queries.segments is not declared" in err.message
    err = refused(changed(no_segments, "uncertainty.stratify", "none"))
    assert err.path == "decision.guardrails.segments" and "queries.segments is not declared" in err.message
    # the regressions guardrail needs nothing else
    alone = changed(changed(no_segments, "uncertainty.stratify", delete=True), "decision.guardrails.segments", None)
    spec = parse_spec(alone, base_dir="/b")
    assert spec.decision is not None and spec.decision.guardrails == Guardrails(None, RegressionGuardrail(0.1, 0.1))


def test_a_null_guardrail_is_no_guardrail():
    raw = changed(PLAIN, "decision.guardrails", {"segments": None, "regressions": None})
    spec = parse_spec(raw, base_dir="/b")
    assert spec.decision is not None and spec.decision.guardrails == Guardrails()


def test_set_overrides_the_new_fields(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(PLAIN, sort_keys=False))
    spec = load_spec(
        path,
        overrides=[
            "queries.segments=seg.tsv",
            "uncertainty.stratify=segments",
            "comparison.risk_alpha=[1,2]",
            "decision.guardrails.regressions={delta: 0.05, max_share: 0.2}",
            "decision.guardrails.segments.rule=superiority",
            "decision.guardrails.segments.margin=0",
        ],
    )
    assert spec.queries.segments is not None and spec.queries.segments.path == tmp_path / "seg.tsv"
    assert spec.uncertainty is not None and spec.uncertainty.stratify
    assert spec.comparison is not None and spec.comparison.risk_alpha == (1.0, 2.0)
    assert spec.decision is not None
    assert spec.decision.guardrails == Guardrails(SegmentGuardrail("superiority", 0.0), RegressionGuardrail(0.05, 0.2))
    with pytest.raises(SpecError, match=r"'comparison.risk_alpha\[1\]'.*came from --set comparison.risk_alpha=\[1,1\]"):
        load_spec(path, overrides=["comparison.risk_alpha=[1,1]"])


def test_segments_outside_the_spec_folder_and_missing_are_said(tmp_path):
    from ndcg_mlflow.spec import check_files, outside_paths

    (tmp_path / "spec").mkdir()
    path = tmp_path / "spec" / "s.yaml"
    path.write_text(yaml.safe_dump(changed(PLAIN, "queries.segments", "../seg.tsv"), sort_keys=False))
    spec = load_spec(path)
    assert outside_paths(spec) == [f"../seg.tsv -> {tmp_path / 'seg.tsv'}"]
    problems = check_files(spec)
    assert [p for p in problems if p.startswith("at key 'queries.segments': ")], problems


def test_explain_states_each_new_field_in_words():
    text = explain(parse_spec(FULL, base_dir="/b"), [0.0, 1.0], tools=False)
    lines = text.splitlines()
    assert "    segments: from segments.tsv; every evaluated query belongs to exactly one segment" in text
    (uncertainty,) = [line for line in lines if line.startswith("- uncertainty:")]
    assert uncertainty.endswith(
        "stratified by segment: each resample draws, within every segment, as many queries as it holds"
    )
    (comparison,) = [line for line in lines if line.startswith("- comparison:")]
    assert "correction holm over all (candidate, cutoff) pairs, overall and in each segment (one family);" in comparison
    assert comparison.endswith("each loss against the baseline counts 1 + alpha times, at alpha = 1, 2.5, 0")
    # the guardrails are said once each, in the decision's statement
    (decision,) = [line for line in lines if line.startswith("- decision:")]
    assert text.count("-0.02") == 1 and "-0.02" in decision and "non-inferiority" in decision
    assert text.count("more than 0.1 ") == 1 and "more than 0.1 " in decision
    plain = explain(parse_spec(PLAIN, base_dir="/b"), [0.0, 1.0], tools=False)
    assert "segment" not in plain and "guardrail" not in plain
    assert "correction holm over all (candidate, cutoff) pairs; 0 largest" in plain
    assert "at alpha = 1, 5" in plain  # the default alphas: the tail-risk measures are always computed
