"""The spec's decision section: validation, the rule against closed forms, the outputs and the exit code."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers import client_for, runs_of_key

from ndcg_mlflow.cli import EXIT_DECISION, EXIT_OK, main
from ndcg_mlflow.decision import decide
from ndcg_mlflow.errors import SpecError
from ndcg_mlflow.spec import Decision, parse_spec

D = 1 - 1 / math.log2(3)  # nDCG of the one relevant document at rank 1 minus at rank 2


def _spec(tmp_path: Path, decision: dict | None, *, candidates=("better",), worse=(), confidence=0.95) -> Path:
    """Judgments: each of 12 queries has one relevant document. The baseline shows it second; a ``better``
    system first (a per-query difference of exactly D on every query), a ``worse`` system third."""
    queries = [f"q{i:02d}" for i in range(12)]
    (tmp_path / "qrels.txt").write_text("".join(f"{q} 0 rel 1\n" for q in queries))
    orders = {"base": ["x", "rel"], **{n: ["rel"] for n in candidates}, **{n: ["x", "y", "rel"] for n in worse}}
    systems = {}
    for name, docs in orders.items():
        (tmp_path / f"{name}.run").write_text("".join(f"{q} Q0 {d} {r + 1} {10 - r} t\n" for q in queries
                                                      for r, d in enumerate(docs)))
        systems[name] = f"{name}.run"
    raw = {"spec_version": 1, "name": "gate",
           "metric": {"gain": "exponential", "cutoffs": [10], "discount": "log2", "ties": "displayed_order",
                      "ideal": "judged_catalog", "empty_ideal": "exclude", "unjudged": "zero",
                      "missing_queries": "zero"},
           "queries": {"weights": "uniform"},
           "data": {"qrels": "qrels.txt", "systems": systems},
           "uncertainty": {"resamples": 1000, "confidence": confidence, "method": "percentile", "seed": 7},
           "comparison": {"baseline": "base", "test": "both", "correction": "holm", "wins_losses": 3,
                          "tie_tolerance": 1e-9},
           "mlflow": {"experiment": "gate"}}
    if decision is not None:
        raw["decision"] = decision
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _run(spec: Path, out: Path, *extra: str) -> int:
    return main(["run", str(spec), "--out", str(out), "--no-mlflow", "--quiet", *extra])


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


# --------------------------------------------------------------------------- validation


def _raw(**decision) -> dict:
    return {"spec_version": 1, "name": "x",
            "metric": {"preset": "trec_eval"}, "queries": {"weights": "uniform"},
            "data": {"qrels": "q", "systems": {"a": "a", "b": "b"}},
            "uncertainty": {"resamples": 100, "confidence": 0.9, "method": "percentile", "seed": 1},
            "comparison": {"baseline": "a", "test": "t_test", "correction": "none", "wins_losses": 1,
                           "tie_tolerance": 0},
            "decision": decision}


@pytest.mark.parametrize("decision, path, words", [
    ({"key": "ndcg_at_11", "rule": "superiority", "margin": 0}, "decision.key", "compared keys"),
    ({"key": "nDCG@10", "rule": "superiority", "margin": 0}, "decision.key", "ndcg_at_10"),
    ({"key": "ndcg_at_10", "rule": "better", "margin": 0}, "decision.rule", "non_inferiority"),
    ({"key": "ndcg_at_10", "rule": "superiority", "margin": -0.01}, "decision.margin", "[0, 1)"),
    ({"key": "ndcg_at_10", "rule": "superiority", "margin": 1}, "decision.margin", "[0, 1)"),
    ({"key": "ndcg_at_10", "rule": "superiority", "margin": True}, "decision.margin", "[0, 1)"),
    ({"key": "ndcg_at_10", "rule": "superiority", "margin": float("nan")}, "decision.margin", "[0, 1)"),
    ({"key": "ndcg_at_10", "rule": "superiority", "margin": 0, "max_p": 0}, "decision.max_p", "(0, 1]"),
    ({"key": "ndcg_at_10", "rule": "superiority", "margin": 0, "max_p": 1.5}, "decision.max_p", "(0, 1]"),
    ({"key": "ndcg_at_10", "rule": "superiority"}, "decision.margin", "required"),
    ({"key": "ndcg_at_10", "rule": "superiority", "margin": 0, "alpha": 0.05}, "decision.alpha", "max_p"),
])
def test_a_bad_decision_names_its_key_path(decision, path, words):
    raw = _raw()
    raw["metric"] = {"preset": "trec_eval", "cutoffs": [10]}
    raw["decision"] = decision
    with pytest.raises(SpecError) as err:
        parse_spec(raw, base_dir=".")
    assert err.value.path == path and words in str(err.value)


def test_a_decision_needs_the_comparison_section():
    raw = _raw(key="ndcg_at_10", rule="superiority", margin=0)
    raw["metric"] = {"preset": "trec_eval", "cutoffs": [10]}
    del raw["comparison"]
    with pytest.raises(SpecError) as err:
        parse_spec(raw, base_dir=".")
    assert err.value.path == "decision" and "comparison" in str(err.value)


def test_the_decision_is_part_of_the_spec_and_its_parameters():
    raw = _raw(key="ndcg_at_10", rule="non_inferiority", margin=0.005, max_p=0.05)
    raw["metric"] = {"preset": "trec_eval", "cutoffs": [10]}
    spec = parse_spec(raw, base_dir=".")
    assert spec.decision == Decision("ndcg_at_10", "non_inferiority", 0.005, 0.05)
    resolved = spec.resolved()
    assert (resolved["decision.key"], resolved["decision.rule"], resolved["decision.margin"],
            resolved["decision.max_p"]) == ("ndcg_at_10", "non_inferiority", 0.005, 0.05)
    raw["decision"]["margin"] = 0.01
    assert parse_spec(raw, base_dir=".").sha256 != spec.sha256


# --------------------------------------------------------------------------- the rule


def _row(candidate="c", lo=0.01, hi=0.03, p=0.01, key="ndcg_at_10") -> dict:
    return {"candidate": candidate, "baseline": "b", "key": key, "delta": (lo + hi) / 2, "ci_low": lo,
            "ci_high": hi, "p_corrected": p, "n_paired": 50}


@pytest.mark.parametrize("rule, margin, lo, outcome", [
    ("superiority", 0.0, 1e-12, "pass"),
    ("superiority", 0.0, 0.0, "fail"),  # an interval touching the margin does not lie above it
    ("superiority", 0.01, 0.0100001, "pass"),
    ("superiority", 0.01, 0.0099999, "fail"),
    ("non_inferiority", 0.01, -0.0099999, "pass"),
    ("non_inferiority", 0.01, -0.01, "fail"),
    ("non_inferiority", 0.0, -1e-12, "fail"),
    ("superiority", 0.01, float("nan"), "fail"),  # no paired query: undecidable, so not a pass
])
def test_the_rule_reads_the_lower_end_against_the_margin(rule, margin, lo, outcome):
    d = decide(Decision("ndcg_at_10", rule, margin), [_row(lo=lo, hi=0.5), _row(key="ndcg_at_5", lo=-1)], 0.95)
    assert d["outcome"] == outcome and [r["outcome"] for r in d["candidates"]] == [outcome]
    assert d["threshold"] == (margin if rule == "superiority" else -margin)


def test_max_p_is_a_further_requirement_and_one_failing_candidate_fails_all():
    rows = [_row("a", lo=0.02, p=0.01), _row("b", lo=0.02, p=0.2), _row("c", lo=0.02, p=0.05)]
    d = decide(Decision("ndcg_at_10", "superiority", 0.01, max_p=0.05), rows, 0.9)
    assert [r["outcome"] for r in d["candidates"]] == ["pass", "fail", "pass"]
    assert d["outcome"] == "fail" and "0.2" in d["candidates"][1]["reason"]
    assert decide(Decision("ndcg_at_10", "superiority", 0.01), rows, 0.9)["outcome"] == "pass"
    assert decide(Decision("ndcg_at_10", "superiority", 0.0), [], 0.9)["outcome"] == "fail"


# --------------------------------------------------------------------------- end to end, against closed forms


@pytest.mark.parametrize("rule, margin, expected", [
    ("superiority", D - 1e-6, EXIT_OK),
    ("superiority", D + 1e-6, EXIT_DECISION),
    ("non_inferiority", 0.0, EXIT_OK),
])
def test_a_constant_difference_decides_at_its_closed_form(tmp_path, rule, margin, expected):
    """Every query gains exactly D = 1 - 1/log2(3), so every resampled mean difference is D: the interval is
    [D, D] and the rule passes exactly when D lies above the threshold."""
    spec = _spec(tmp_path, {"key": "ndcg_at_10", "rule": rule, "margin": margin})
    out = tmp_path / "out"
    assert _run(spec, out) == expected
    d = _summary(out)["decision"]
    (row,) = d["candidates"]
    assert row["ci_low"] == pytest.approx(D, abs=1e-12) and row["ci_high"] == pytest.approx(D, abs=1e-12)
    assert d["outcome"] == ("pass" if expected == EXIT_OK else "fail")
    comparisons = pd.read_csv(out / "comparisons.csv")  # the decision reads the comparison as written
    assert comparisons.loc[comparisons["candidate"] == "better", "ci_low"].item() == pytest.approx(row["ci_low"])


def test_non_inferiority_of_a_worse_candidate(tmp_path):
    """A system that shows the relevant document third loses 1/log2(3) - 1/2 on every query."""
    loss = 1 / math.log2(3) - 0.5
    spec = _spec(tmp_path, {"key": "ndcg_at_10", "rule": "non_inferiority", "margin": loss + 1e-6},
                 candidates=(), worse=("worse",))
    assert _run(spec, tmp_path / "a") == EXIT_OK
    spec = _spec(tmp_path, {"key": "ndcg_at_10", "rule": "non_inferiority", "margin": loss - 1e-6},
                 candidates=(), worse=("worse",))
    assert _run(spec, tmp_path / "b") == EXIT_DECISION
    assert _summary(tmp_path / "b")["decision"]["candidates"][0]["ci_low"] == pytest.approx(-loss, abs=1e-12)


def test_every_candidate_must_pass(tmp_path, capsys):
    spec = _spec(tmp_path, {"key": "ndcg_at_10", "rule": "non_inferiority", "margin": 0.01},
                 candidates=("better",), worse=("worse",))
    assert _run(spec, tmp_path / "out") == EXIT_DECISION
    err = capsys.readouterr().err
    assert "decision: FAIL" in err and "worse fail" in err and "better pass" in err  # shown even with --quiet
    d = _summary(tmp_path / "out")["decision"]
    assert {r["candidate"]: r["outcome"] for r in d["candidates"]} == {"better": "pass", "worse": "fail"}


def test_the_decision_comes_first_in_both_reports(tmp_path):
    spec = _spec(tmp_path, {"key": "ndcg_at_10", "rule": "superiority", "margin": 0.5})
    out = tmp_path / "out"
    assert _run(spec, out) == EXIT_DECISION
    html = (out / "report.html").read_text()
    assert "class='decision fail'" in html
    assert html.index("Decision: FAIL") < html.index("What was measured") < html.index("<h2>Results")
    md = (out / "report.md").read_text()
    assert md.index("**Decision: FAIL**") < md.index("Rules:")
    assert "better: FAIL" in md
    assert "decision: superiority at nDCG@10" in (out / "explanation.txt").read_text()


def test_without_a_decision_nothing_changes(tmp_path):
    spec = _spec(tmp_path, None)
    out = tmp_path / "out"
    assert _run(spec, out) == EXIT_OK
    assert _summary(out)["decision"] is None
    assert "Decision" not in (out / "report.html").read_text()


def test_the_decision_is_a_tag_of_the_evaluation_and_of_each_candidate(tmp_path, tracking_uri):
    spec = _spec(tmp_path, {"key": "ndcg_at_10", "rule": "non_inferiority", "margin": 0.01},
                 candidates=("better",), worse=("worse",))
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet"]) == EXIT_DECISION  # logged, and the rule says no
    client = client_for(tracking_uri)
    runs = runs_of_key(client, (out / "run_key.txt").read_text().strip())
    by_role = {(r.data.tags["ndcg_mlflow.role"], r.data.tags.get("ndcg_mlflow.system")): r for r in runs}
    parent = by_role[("evaluation", None)]
    assert parent.data.tags["ndcg_mlflow.decision"] == "fail"
    assert parent.data.tags["ndcg_mlflow.logging"] == "complete"
    assert "non-inferiority at nDCG@10" in parent.data.tags["ndcg_mlflow.decision.rule"]
    assert by_role[("system", "better")].data.tags["ndcg_mlflow.decision"] == "pass"
    assert by_role[("system", "worse")].data.tags["ndcg_mlflow.decision"] == "fail"
    assert "ndcg_mlflow.decision" not in by_role[("system", "base")].data.tags
    found = client.search_runs([parent.info.experiment_id], "tags.`ndcg_mlflow.decision` = 'fail' and "
                                                            "tags.`ndcg_mlflow.role` = 'evaluation'")
    assert [r.info.run_id for r in found] == [parent.info.run_id]


def test_a_tracking_failure_wins_over_a_failed_decision(tmp_path, monkeypatch):
    """Exit 3 (the results are not all logged) comes before 4 (logged, and the rule says no)."""
    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path, {"key": "ndcg_at_10", "rule": "superiority", "margin": 0.5})
    raw = yaml.safe_load(spec.read_text())
    raw["mlflow"].update({"timeout": 1, "max_retries": 0, "total_timeout": 5})
    spec.write_text(yaml.safe_dump(raw))
    code = main(["run", str(spec), "--out", str(tmp_path / "out"), "--quiet",
                 "--tracking-uri", "http://127.0.0.1:1"])
    assert code == 3
    assert _summary(tmp_path / "out")["decision"]["outcome"] == "fail"
