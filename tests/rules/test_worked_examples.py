"""The worked examples of the nDCG explainer (shared/reference/ndcg-explainer.txt), end to end.

Catalog of one query: A grade 3, B grade 2, C grade 1, D grade 0; cutoff K = 3.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import metric_spec, write_qrels, write_run

import ndcg_mlflow

LOG2_3 = np.log2(3.0)
GRADES = {"A": 3, "B": 2, "C": 1, "D": 0}

# closed forms
EXP_IDCG3 = 7 + 3 / LOG2_3 + 0.5  # A, B, C under 2^g - 1
LIN_IDCG3 = 3 + 2 / LOG2_3 + 0.5  # A, B, C under g
EXP_DCG_BDA = 3 + 7 / 2  # B (3) * 1 + D (0) * 0.631 + A (7) * 0.5
LIN_DCG_BDA = 2 + 3 / 2
EXP_DCG_BCD = 3 + 1 / LOG2_3  # A missed


# --------------------------------------------------------------------------- helpers


def _write_qrels(tmp_path, grades=GRADES, qid="q1", name="qrels.txt"):
    return write_qrels(tmp_path, {qid: grades}, name)


def _write_run(tmp_path, order, name, qid="q1"):
    return write_run(tmp_path, {qid: order}, name)


def _spec(qrels, systems, *, gain="exponential", ideal="judged_catalog", cutoffs=(3,)):
    return metric_spec(qrels, systems, name="worked-examples", gain=gain, ideal=ideal, cutoffs=cutoffs)


def _evaluate(tmp_path, order, *, gain="exponential", ideal="judged_catalog", cutoffs=(3,)):
    qrels = _write_qrels(tmp_path)
    run = _write_run(tmp_path, order, "sys.run")
    return ndcg_mlflow.evaluate(_spec(qrels, {"sys": run}, gain=gain, ideal=ideal, cutoffs=cutoffs), base_dir=tmp_path)


def _row(result, cutoff=3, system="sys", query="q1"):
    pq = result.per_query
    sel = pq[(pq.system == system) & (pq.query_id == query) & (pq.cutoff == cutoff)]
    assert len(sel) == 1, sel
    return sel.iloc[0]


# --------------------------------------------------------------------------- closed forms themselves


def test_closed_forms_match_explainer_numbers():
    assert EXP_DCG_BDA == 6.5
    assert pytest.approx(9.3928, abs=5e-5) == EXP_IDCG3
    assert pytest.approx(0.6920, abs=5e-5) == EXP_DCG_BDA / EXP_IDCG3
    assert pytest.approx(0.735, abs=5e-4) == LIN_DCG_BDA / LIN_IDCG3
    assert pytest.approx(3.6309, abs=5e-5) == EXP_DCG_BCD
    assert pytest.approx(0.3866, abs=5e-5) == EXP_DCG_BCD / EXP_IDCG3


# --------------------------------------------------------------------------- B, D, A, C


def test_order_bdac_exponential(tmp_path):
    res = _evaluate(tmp_path, ["B", "D", "A", "C"])
    row = _row(res)
    assert row.status == "ok"
    assert row.dcg == pytest.approx(3 + 7 / 2, rel=1e-12)
    assert row.dcg == pytest.approx(6.5, abs=5e-5)
    assert row.idcg == pytest.approx(7 + 3 / np.log2(3) + 0.5, rel=1e-12)
    assert row.idcg == pytest.approx(9.3928, abs=5e-5)
    assert row.ndcg == pytest.approx((3 + 7 / 2) / (7 + 3 / np.log2(3) + 0.5), rel=1e-12)
    assert row.ndcg == pytest.approx(0.6920, abs=5e-5)
    assert res.mean("sys", 3) == pytest.approx(row.ndcg, rel=1e-12)
    assert res.summary["systems"]["sys"]["ndcg_at_3"]["mean"] == pytest.approx(0.6920, abs=5e-5)


def test_order_bdac_linear(tmp_path):
    res = _evaluate(tmp_path, ["B", "D", "A", "C"], gain="linear")
    row = _row(res)
    assert row.dcg == pytest.approx(2 + 3 / 2, rel=1e-12)
    assert row.dcg == pytest.approx(3.5, abs=5e-5)
    assert row.idcg == pytest.approx(3 + 2 / np.log2(3) + 0.5, rel=1e-12)
    assert row.ndcg == pytest.approx(3.5 / (3 + 2 / np.log2(3) + 0.5), rel=1e-12)
    assert row.ndcg == pytest.approx(0.735, abs=5e-4)


def test_order_bdac_matches_explainer_sklearn_snippet(tmp_path):
    """The explainer's scikit-learn snippet gives the same DCG and nDCG as the tool."""
    from sklearn.metrics import dcg_score, ndcg_score

    grades = np.array([[3, 2, 1, 0]])  # A, B, C, D
    scores = np.array([[2, 4, 1, 3]])  # order B, D, A, C
    for gain, gains in [("exponential", 2.0**grades - 1), ("linear", grades)]:
        sub = tmp_path / gain
        sub.mkdir()
        row = _row(_evaluate(sub, ["B", "D", "A", "C"], gain=gain))
        assert row.dcg == pytest.approx(dcg_score(gains, scores, k=3), rel=1e-12)
        assert row.ndcg == pytest.approx(ndcg_score(gains, scores, k=3), rel=1e-12)


# --------------------------------------------------------------------------- best order


@pytest.mark.parametrize("gain", ["exponential", "linear"])
def test_best_order_scores_one(tmp_path, gain):
    res = _evaluate(tmp_path, ["A", "B", "C", "D"], gain=gain, cutoffs=(3, "all"))
    for cutoff in (3, "all"):
        row = _row(res, cutoff)
        assert row.ndcg == pytest.approx(1.0, rel=1e-12)
        assert row.dcg == pytest.approx(row.idcg, rel=1e-12)
    expected_idcg = EXP_IDCG3 if gain == "exponential" else LIN_IDCG3
    assert _row(res, 3).dcg == pytest.approx(expected_idcg, rel=1e-12)


# --------------------------------------------------------------------------- A missed


def test_miss_a_against_catalog_ideal(tmp_path):
    res = _evaluate(tmp_path, ["B", "C", "D"], ideal="judged_catalog")
    row = _row(res)
    assert row.dcg == pytest.approx(3 + 1 / np.log2(3), rel=1e-12)
    assert row.dcg == pytest.approx(3.6309, abs=5e-5)
    assert row.idcg == pytest.approx(7 + 3 / np.log2(3) + 0.5, rel=1e-12)
    assert row.idcg == pytest.approx(9.3928, abs=5e-5)
    assert row.ndcg == pytest.approx((3 + 1 / np.log2(3)) / (7 + 3 / np.log2(3) + 0.5), rel=1e-12)
    assert row.ndcg == pytest.approx(0.3866, abs=5e-5)


def test_miss_a_against_candidate_ideal(tmp_path):
    res = _evaluate(tmp_path, ["B", "C", "D"], ideal="candidates")
    row = _row(res)
    assert row.dcg == pytest.approx(3 + 1 / np.log2(3), rel=1e-12)
    assert row.idcg_candidates == pytest.approx(3 + 1 / np.log2(3), rel=1e-12)
    assert row.ndcg == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("ideal", ["judged_catalog", "candidates"])
def test_per_query_carries_both_ideals_whatever_the_ideal(tmp_path, ideal):
    res = _evaluate(tmp_path, ["B", "C", "D"], ideal=ideal)
    pq = res.per_query
    assert {"idcg", "idcg_candidates"} <= set(pq.columns)
    row = _row(res)
    assert row.idcg == pytest.approx(7 + 3 / np.log2(3) + 0.5, rel=1e-12)
    assert row.idcg_candidates == pytest.approx(3 + 1 / np.log2(3), rel=1e-12)
    expected = row.dcg / (row.idcg if ideal == "judged_catalog" else row.idcg_candidates)
    assert row.ndcg == pytest.approx(expected, rel=1e-12)


def test_same_numerator_two_denominators(tmp_path):
    """Both ideals share the DCG numerator; only the denominator changes."""
    (tmp_path / "cat").mkdir()
    (tmp_path / "cand").mkdir()
    cat = _row(_evaluate(tmp_path / "cat", ["B", "C", "D"], ideal="judged_catalog"))
    cand = _row(_evaluate(tmp_path / "cand", ["B", "C", "D"], ideal="candidates"))
    assert cat.dcg == cand.dcg
    assert cat.idcg == cand.idcg and cat.idcg_candidates == cand.idcg_candidates
    assert cat.ndcg < cand.ndcg
