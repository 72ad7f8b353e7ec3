"""Each rule of the spec, on tiny hand-computed cases (closed forms)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import metric_spec, write_qrels, write_run

import ndcg_mlflow
from ndcg_mlflow import DataError, EvaluationError
from ndcg_mlflow.kernel import RunRows, evaluate_rows
from ndcg_mlflow.rules import (
    DEFINITION_KEYS,
    RULES,
    Gain,
    companion_key,
    cutoff_key,
    cutoff_label,
    cutoff_of_key,
    cutoff_of_label,
    headline_key,
    key_label,
    metric_name,
    raw_definition,
)
from ndcg_mlflow.spec import load_spec
from ndcg_mlflow.spec.presets import PRESETS

L3 = np.log2(3.0)  # discount of rank 2 is 1/L3; rank 3 is 1/2; rank 4 is 1/log2(5)
L5 = np.log2(5.0)
L6 = np.log2(6.0)
L7 = np.log2(7.0)


# --------------------------------------------------------------------------- helpers


def write(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    return name


def spec(qrels, systems, **metric):
    return metric_spec(qrels, systems, name="rules", **metric)


def run_eval(tmp_path, judgments, ranking, **metric):
    qrels = write_qrels(tmp_path, judgments)
    run = write_run(tmp_path, ranking)
    return ndcg_mlflow.evaluate(spec(qrels, run, **metric), base_dir=tmp_path)


def row(result, query="q1", cutoff=3, system="sys"):
    pq = result.per_query
    sel = pq[(pq.system == system) & (pq.query_id == query) & (pq.cutoff == cutoff)]
    assert len(sel) == 1, sel
    return sel.iloc[0]


def dcg(gains, k=None):
    g = np.asarray(gains, dtype=float)[:k]
    return float(np.sum(g / np.log2(np.arange(2, g.size + 2))))


ABCD = {"q1": {"A": 3, "B": 2, "C": 1, "D": 0}}


# --------------------------------------------------------------------------- gain


def test_gain_exponential(tmp_path):
    r = row(run_eval(tmp_path, ABCD, {"q1": ["C", "A", "B"]}, gain="exponential"))
    assert r.dcg == pytest.approx(1 + 7 / L3 + 3 / 2, rel=1e-12)
    assert r.ndcg == pytest.approx((1 + 7 / L3 + 3 / 2) / (7 + 3 / L3 + 1 / 2), rel=1e-12)


def test_gain_linear(tmp_path):
    r = row(run_eval(tmp_path, ABCD, {"q1": ["C", "A", "B"]}, gain="linear"))
    assert r.dcg == pytest.approx(1 + 3 / L3 + 2 / 2, rel=1e-12)
    assert r.ndcg == pytest.approx((1 + 3 / L3 + 1) / (3 + 2 / L3 + 1 / 2), rel=1e-12)


def test_gain_table(tmp_path):
    table = {0: 0, 1: 10, 2: 20, 3: 100}
    r = row(run_eval(tmp_path, ABCD, {"q1": ["C", "A", "B"]}, gain=table))
    assert r.dcg == pytest.approx(10 + 100 / L3 + 20 / 2, rel=1e-12)
    assert r.idcg == pytest.approx(100 + 20 / L3 + 10 / 2, rel=1e-12)


@pytest.mark.parametrize("gain", ["exponential", "linear"])
def test_negative_grades_earn_zero(tmp_path, gain):
    judgments = {"q1": {"N": -2, "M": -1, "A": 1}}
    r = row(run_eval(tmp_path, judgments, {"q1": ["N", "M", "A"]}, gain=gain, cutoffs=(3, "all")), cutoff="all")
    # N and M earn 0 but hold ranks 1 and 2; A (gain 1 under both) is at rank 3
    assert r.dcg == pytest.approx(1 / 2, rel=1e-12)
    assert r.idcg == pytest.approx(1.0, rel=1e-12)  # A first, then two zeros
    assert r.ndcg == pytest.approx(0.5, rel=1e-12)


def test_gain_table_with_negative_gains(tmp_path):
    table = {-1: -2, 0: 0, 1: 1, 2: 3}
    judgments = {"q1": {"N": -1, "Z": 0, "B": 2}}
    r = row(run_eval(tmp_path, judgments, {"q1": ["N", "B", "Z"]}, gain=table))
    assert r.dcg == pytest.approx(-2 + 3 / L3 + 0, rel=1e-12)
    assert r.idcg == pytest.approx(3 + 0 / L3 - 2 / 2, rel=1e-12)
    assert r.ndcg == pytest.approx((-2 + 3 / L3) / (3 - 1), rel=1e-12)


def test_grade_missing_from_table_raises(tmp_path):
    qrels = write(tmp_path, "qrels.txt", "q1 0 A 1\nq1 0 B 2\nq1 0 C 5\n")
    run = write_run(tmp_path, {"q1": ["A"]})
    with pytest.raises(DataError, match=r"qrels\.txt:3: .*grade 5\b") as info:
        ndcg_mlflow.evaluate(spec(qrels, run, gain={0: 0, 1: 1, 2: 3}), base_dir=tmp_path)
    assert info.value.line == 3
    assert "qrels.txt" in info.value.file


def test_grade_missing_from_table_line_after_repeated_judgment(tmp_path):
    """A judgment repeated with the same grade is merged; the line named must still be the file's line."""
    qrels = write(tmp_path, "qrels.txt", "q1 0 A 1\nq1 0 A 1\nq1 0 B 2\nq1 0 C 5\n")
    run = write_run(tmp_path, {"q1": ["A"]})
    with pytest.raises(DataError, match=r"qrels\.txt:4: .*grade 5\b") as info:
        ndcg_mlflow.evaluate(spec(qrels, run, gain={0: 0, 1: 1, 2: 3}), base_dir=tmp_path)
    assert info.value.line == 4


def test_float_grades(tmp_path):
    judgments = {"q1": {"A": 1.5, "B": 0.5}}
    exp = row(run_eval(tmp_path, judgments, {"q1": ["B", "A"]}, gain="exponential"))
    assert exp.dcg == pytest.approx((2**0.5 - 1) + (2**1.5 - 1) / L3, rel=1e-12)
    assert exp.idcg == pytest.approx((2**1.5 - 1) + (2**0.5 - 1) / L3, rel=1e-12)
    lin = row(run_eval(tmp_path, judgments, {"q1": ["B", "A"]}, gain="linear"))
    assert lin.dcg == pytest.approx(0.5 + 1.5 / L3, rel=1e-12)
    tab = row(run_eval(tmp_path, judgments, {"q1": ["B", "A"]}, gain={0.5: 2, 1.5: 4}))
    assert tab.dcg == pytest.approx(2 + 4 / L3, rel=1e-12)


# --------------------------------------------------------------------------- cutoffs


def test_cutoff_larger_than_list(tmp_path):
    judgments = {"q1": {"A": 3, "B": 2, "C": 1, "D": 1}}
    res = run_eval(tmp_path, judgments, {"q1": ["B", "A"]}, cutoffs=(1, 10))
    r10 = row(res, cutoff=10)
    assert r10.dcg == pytest.approx(3 + 7 / L3, rel=1e-12)
    assert r10.idcg == pytest.approx(7 + 3 / L3 + 1 / 2 + 1 / L5, rel=1e-12)
    assert r10.ndcg == pytest.approx((3 + 7 / L3) / (7 + 3 / L3 + 1 / 2 + 1 / L5), rel=1e-12)
    assert r10.n_returned == 2
    r1 = row(res, cutoff=1)
    assert r1.dcg == pytest.approx(3.0) and r1.idcg == pytest.approx(7.0)


def test_cutoff_all(tmp_path):
    judgments = {"q1": {"A": 3, "B": 2, "C": 1, "D": 0, "E": 1}}
    # returned: B, x (unjudged), D, C, y (unjudged) -- five positions; A and E never returned
    res = run_eval(tmp_path, judgments, {"q1": ["B", "x", "D", "C", "y"]}, cutoffs=(2, "all"))
    r = row(res, cutoff="all")
    assert r.dcg == pytest.approx(3 + 0 + 0 + 1 / L5 + 0, rel=1e-12)
    # IDCG over every judged document: 7, 3, 1, 1, 0
    assert r.idcg == pytest.approx(7 + 3 / L3 + 1 / 2 + 1 / L5 + 0, rel=1e-12)
    assert r.idcg_candidates == pytest.approx(3 + 1 / L3, rel=1e-12)
    assert r.ndcg == pytest.approx((3 + 1 / L5) / (7 + 3 / L3 + 1 / 2 + 1 / L5), rel=1e-12)
    r2 = row(res, cutoff=2)
    assert r2.dcg == pytest.approx(3.0) and r2.idcg == pytest.approx(7 + 3 / L3)


# --------------------------------------------------------------------------- ties


def test_ties_displayed_order_uses_rank_column(tmp_path):
    """Equal scores: the rank column decides, even when the file lists the lines in another order."""
    qrels = write_qrels(tmp_path, {"q1": {"a": 0, "b": 3}})
    run = write(tmp_path, "sys.run", "q1 Q0 a 2 1.0 s\nq1 Q0 b 1 1.0 s\n")
    res = ndcg_mlflow.evaluate(spec(qrels, run, cutoffs=(1, "all")), base_dir=tmp_path)
    assert row(res, cutoff=1).dcg == pytest.approx(7.0)
    assert row(res, cutoff=1).ndcg == pytest.approx(1.0)

    run2 = write(tmp_path, "sys2.run", "q1 Q0 a 1 1.0 s\nq1 Q0 b 2 1.0 s\n")
    res2 = ndcg_mlflow.evaluate(spec(qrels, run2, cutoffs=(1, "all")), base_dir=tmp_path)
    assert row(res2, cutoff=1).dcg == 0.0
    assert row(res2, cutoff="all").dcg == pytest.approx(7 / L3)


def test_ties_displayed_order_equal_ranks_use_line_order(tmp_path):
    qrels = write_qrels(tmp_path, {"q1": {"a": 0, "b": 3}})
    for first, expected in (("a", 0.0), ("b", 7.0)):
        second = "b" if first == "a" else "a"
        run = write(tmp_path, f"{first}.run", f"q1 Q0 {first} 1 1.0 s\nq1 Q0 {second} 1 1.0 s\n")
        res = ndcg_mlflow.evaluate(spec(qrels, run, cutoffs=(1,)), base_dir=tmp_path)
        assert row(res, cutoff=1).dcg == pytest.approx(expected)


def test_ties_displayed_order_score_only_csv_uses_line_order(tmp_path):
    qrels = write_qrels(tmp_path, {"q1": {"a": 0, "b": 3, "c": 1}})
    run = write(tmp_path, "sys.csv", "query_id,doc_id,score\nq1,c,5\nq1,a,1\nq1,b,1\n")
    res = ndcg_mlflow.evaluate(spec(qrels, run, cutoffs=(2, "all")), base_dir=tmp_path)
    assert row(res, cutoff=2).dcg == pytest.approx(1 + 0 / L3)
    assert row(res, cutoff="all").dcg == pytest.approx(1 + 0 / L3 + 7 / 2)

    run2 = write(tmp_path, "sys2.csv", "query_id,doc_id,score\nq1,b,1\nq1,c,5\nq1,a,1\n")
    res2 = ndcg_mlflow.evaluate(spec(qrels, run2, cutoffs=(2, "all")), base_dir=tmp_path)
    assert row(res2, cutoff=2).dcg == pytest.approx(1 + 7 / L3)


@pytest.mark.parametrize(
    "ties,expected",
    [
        ("id_ascending", 0 + 7 / L3),  # 'd10' < 'd9' in plain string order
        ("id_descending", 7 + 0 / L3),
    ],
)
def test_ties_by_doc_id_plain_string_order(tmp_path, ties, expected):
    qrels = write_qrels(tmp_path, {"q1": {"d9": 3, "d10": 0}})
    # the file lists d9 first with rank 1: the id rule must override display order
    run = write(tmp_path, "sys.run", "q1 Q0 d9 1 2.0 s\nq1 Q0 d10 2 2.0 s\n")
    res = ndcg_mlflow.evaluate(spec(qrels, run, ties=ties, cutoffs=("all",)), base_dir=tmp_path)
    assert row(res, cutoff="all").dcg == pytest.approx(expected, rel=1e-12)


def test_ties_by_doc_id_only_within_tied_scores(tmp_path):
    qrels = write_qrels(tmp_path, {"q1": {"a": 1, "b": 2, "z": 3}})
    run = write(tmp_path, "sys.run", "q1 Q0 z 1 9 s\nq1 Q0 b 2 5 s\nq1 Q0 a 3 5 s\n")
    res = ndcg_mlflow.evaluate(spec(qrels, run, ties="id_ascending", cutoffs=("all",)), base_dir=tmp_path)
    assert row(res, cutoff="all").dcg == pytest.approx(7 + 1 / L3 + 3 / 2, rel=1e-12)


def brute_force_tie_dcg(docs_scores, gain_of, k):
    """Mean DCG@k over every ordering of docs within groups of equal score (score descending)."""
    groups = {}
    for doc, score in docs_scores:
        groups.setdefault(score, []).append(doc)
    ordered = [groups[s] for s in sorted(groups, reverse=True)]
    values = []
    for combo in itertools.product(*(itertools.permutations(g) for g in ordered)):
        ranking = [d for grp in combo for d in grp]
        values.append(dcg([gain_of(d) for d in ranking], k))
    return float(np.mean(values)), len(values)


TIE_JUDGMENTS = {"q1": {"a": 3, "b": 0, "c": 2, "d": 1, "e": 3, "f": 0, "g": 2}}
# groups: {a}, {b, c, d} cut by K=3, {e, u} with u unjudged cut by K=5, {f, g}
TIE_RUN = [("a", 9), ("b", 5), ("c", 5), ("d", 5), ("e", 4), ("u", 4), ("f", 1), ("g", 1)]


@pytest.mark.parametrize("gain", ["exponential", "linear"])
def test_ties_average_equals_mean_over_permutations(tmp_path, gain):
    judg = TIE_JUDGMENTS["q1"]

    def gain_of(doc):
        g = judg.get(doc, 0)
        return 2.0**g - 1 if gain == "exponential" else float(g)

    res = run_eval(tmp_path, TIE_JUDGMENTS, {"q1": TIE_RUN}, ties="average", gain=gain, cutoffs=(1, 2, 3, 5, "all"))
    for k in (1, 2, 3, 5, None):
        expected, n_perms = brute_force_tie_dcg(TIE_RUN, gain_of, k)
        assert n_perms == 1 * 6 * 2 * 2
        r = row(res, cutoff="all" if k is None else k)
        assert r.dcg == pytest.approx(expected, rel=1e-12), k
        assert r.ndcg == pytest.approx(expected / r.idcg, rel=1e-12), k


def test_ties_average_closed_form_cut_group(tmp_path):
    # b, c, d tied at ranks 2..4 with exponential gains 0, 3, 1 -> mean 4/3 at each of those ranks
    res = run_eval(tmp_path, TIE_JUDGMENTS, {"q1": TIE_RUN}, ties="average", cutoffs=(3,))
    assert row(res).dcg == pytest.approx(7 + (4 / 3) / L3 + (4 / 3) / 2, rel=1e-12)


def test_ties_average_matches_sklearn(tmp_path):
    from sklearn.metrics import ndcg_score

    grades = {"a": 3, "b": 0, "c": 2, "d": 1, "e": 3, "f": 0, "g": 2, "h": 1}
    scores = {"a": 0.9, "b": 0.5, "c": 0.5, "d": 0.5, "e": 0.4, "f": 0.4, "g": 0.1, "h": 0.1}
    docs = sorted(grades)
    ranking = sorted(docs, key=lambda d: -scores[d])
    qrels = write_qrels(tmp_path, {"q1": grades})
    run = write_run(tmp_path, {"q1": [(d, scores[d]) for d in ranking]})
    for gain, to_gain in (("exponential", lambda g: 2.0**g - 1), ("linear", float)):
        res = ndcg_mlflow.evaluate(
            spec(qrels, run, gain=gain, ties="average", cutoffs=(1, 3, 5, "all")), base_dir=tmp_path
        )
        y_true = np.array([[to_gain(grades[d]) for d in docs]])
        y_score = np.array([[scores[d] for d in docs]])
        for k in (1, 3, 5, None):
            expected = ndcg_score(y_true, y_score, k=k, ignore_ties=False)
            assert row(res, cutoff="all" if k is None else k).ndcg == pytest.approx(expected, rel=1e-10), (gain, k)


def test_kernel_tie_average_against_brute_force_random():
    """The kernel on arrays: several queries with random tied scores vs enumeration of tie orders."""
    rng = np.random.default_rng(7)
    n_queries = 6
    qs, scores, gains = [], [], []
    for q in range(n_queries):
        n = int(rng.integers(1, 7))
        qs += [q] * n
        scores += list(rng.integers(0, 3, n).astype(float))
        gains += list(rng.integers(0, 4, n).astype(float))
    qs, scores, gains = np.array(qs), np.array(scores), np.array(gains)
    perm = rng.permutation(qs.size)  # rows in any order
    run = RunRows(query=qs[perm], score=scores[perm], gain=gains[perm], judged=np.ones(qs.size, bool))
    cutoffs = (1, 2, 4, None)
    out = evaluate_rows(
        run,
        qs,
        gains,
        n_queries,
        cutoffs=cutoffs,
        ties="average",
        unjudged="zero",
        ideal="judged_catalog",
        empty_ideal="exclude",
        missing_queries="zero",
    )
    for q in range(n_queries):
        m = qs == q
        ids = [str(i) for i in range(m.sum())]
        gmap = dict(zip(ids, gains[m]))
        for j, k in enumerate(cutoffs):
            expected, _ = brute_force_tie_dcg(list(zip(ids, scores[m])), gmap.__getitem__, k)
            assert out.dcg[q, j] == pytest.approx(expected, rel=1e-12, abs=1e-12)
            assert out.idcg[q, j] == pytest.approx(dcg(sorted(gains[m], reverse=True), k), rel=1e-12, abs=1e-12)


# --------------------------------------------------------------------------- ideal


def test_ideal_judged_catalog_vs_candidates(tmp_path):
    judgments = {"q1": {"A": 3, "B": 2, "C": 1, "D": 0}}
    ranking = {"q1": ["D", "C", "B"]}
    cat = row(run_eval(tmp_path, judgments, ranking, ideal="judged_catalog"))
    cand = row(run_eval(tmp_path, judgments, ranking, ideal="candidates"))
    d = 0 + 1 / L3 + 3 / 2
    assert cat.dcg == pytest.approx(d) and cand.dcg == pytest.approx(d)
    assert cat.ndcg == pytest.approx(d / (7 + 3 / L3 + 1 / 2), rel=1e-12)
    assert cand.ndcg == pytest.approx(d / (3 + 1 / L3 + 0), rel=1e-12)


# --------------------------------------------------------------------------- empty ideal

EMPTY = {"q1": {"A": 2, "B": 0}, "q2": {"C": 0, "D": 0}}
EMPTY_RUN = {"q1": ["B", "A"], "q2": ["C", "D"]}
Q1_NDCG = (3 / L3) / 3


def test_empty_ideal_exclude(tmp_path):
    res = run_eval(tmp_path, EMPTY, EMPTY_RUN, empty_ideal="exclude")
    r2 = row(res, "q2")
    assert r2.status == "empty_ideal" and np.isnan(r2.ndcg)
    assert r2.idcg == 0.0
    s = res.summary["systems"]["sys"]["ndcg_at_3"]
    assert s["mean"] == pytest.approx(Q1_NDCG, rel=1e-12)
    assert res.mean("sys", 3) == pytest.approx(Q1_NDCG, rel=1e-12)
    assert (s["n_evaluated"], s["n_excluded"], s["n_empty_ideal"], s["n_missing"]) == (1, 1, 1, 0)


@pytest.mark.parametrize("rule,value", [("zero", 0.0), ("one", 1.0)])
def test_empty_ideal_zero_one(tmp_path, rule, value):
    res = run_eval(tmp_path, EMPTY, EMPTY_RUN, empty_ideal=rule)
    r2 = row(res, "q2")
    assert r2.status == "empty_ideal" and r2.ndcg == value
    s = res.summary["systems"]["sys"]["ndcg_at_3"]
    assert s["mean"] == pytest.approx((Q1_NDCG + value) / 2, rel=1e-12)
    assert (s["n_evaluated"], s["n_excluded"], s["n_empty_ideal"]) == (2, 0, 1)


def test_empty_ideal_error_names_query(tmp_path):
    with pytest.raises(EvaluationError, match=r"'q2'"):
        run_eval(tmp_path, EMPTY, EMPTY_RUN, empty_ideal="error")


def test_empty_ideal_under_candidates_only(tmp_path):
    """A query whose returned documents all earn 0 has an empty ideal only under `candidates`."""
    judgments = {"q1": {"A": 2, "B": 0}}
    ranking = {"q1": ["B", "x"]}
    cat = row(run_eval(tmp_path, judgments, ranking, ideal="judged_catalog"))
    assert cat.status == "ok" and cat.ndcg == 0.0
    cand = row(run_eval(tmp_path, judgments, ranking, ideal="candidates"))
    assert cand.status == "empty_ideal" and np.isnan(cand.ndcg)
    with pytest.raises(EvaluationError, match=r"'q1'"):
        run_eval(tmp_path, judgments, ranking, ideal="candidates", empty_ideal="error")


# --------------------------------------------------------------------------- unjudged


def test_unjudged_zero_keeps_position(tmp_path):
    r = row(run_eval(tmp_path, ABCD, {"q1": ["x", "A", "y"]}, unjudged="zero"))
    assert r.dcg == pytest.approx(7 / L3, rel=1e-12)
    assert r.judged_coverage == pytest.approx(1 / 3)


def test_unjudged_condense_equals_zero_on_filtered_run(tmp_path):
    judgments = {"q1": {"A": 3, "B": 2, "C": 1, "D": 0}, "q2": {"E": 1, "F": 2}}
    full = {"q1": ["x", "B", "y", "D", "A", "z", "C"], "q2": ["u", "v", "F", "E"]}
    filtered = {q: [d for d in docs if d in judgments[q]] for q, docs in full.items()}
    for ties in ("displayed_order", "average"):
        a = run_eval(tmp_path, judgments, full, unjudged="condense", ties=ties, cutoffs=(1, 2, 3, "all"))
        b = run_eval(tmp_path, judgments, filtered, unjudged="zero", ties=ties, cutoffs=(1, 2, 3, "all"))
        cols = ["query_id", "cutoff", "ndcg", "dcg", "idcg", "idcg_candidates", "status"]
        pa, pb = a.per_query[cols], b.per_query[cols]
        assert pa.equals(pb), (pa, pb)
    r = row(a, "q1", cutoff=3)
    assert r.dcg == pytest.approx(3 + 0 / L3 + 7 / 2, rel=1e-12)


def test_unjudged_condense_coverage_before_condensing(tmp_path):
    res = run_eval(tmp_path, ABCD, {"q1": ["x", "A", "y", "B"]}, unjudged="condense", cutoffs=(1, 2, "all"))
    assert row(res, cutoff=1).judged_coverage == 0.0
    assert row(res, cutoff=2).judged_coverage == pytest.approx(0.5)
    assert row(res, cutoff="all").judged_coverage == pytest.approx(0.5)
    assert row(res, cutoff=1).dcg == pytest.approx(7.0)


def test_unjudged_error_names_file_doc_and_query(tmp_path):
    with pytest.raises(EvaluationError, match=r"sys\.run:2: .*'zz'.*'q1'"):
        run_eval(tmp_path, ABCD, {"q1": ["A", "zz", "B"]}, unjudged="error")


def test_unjudged_error_passes_when_all_judged(tmp_path):
    r = row(run_eval(tmp_path, ABCD, {"q1": ["A", "B"]}, unjudged="error"))
    assert r.judged_coverage == 1.0 and r.ndcg == pytest.approx((7 + 3 / L3) / (7 + 3 / L3 + 1 / 2))


def test_judged_coverage_of_top_k(tmp_path):
    res = run_eval(tmp_path, ABCD, {"q1": ["A", "u1", "B", "u2", "C"]}, cutoffs=(1, 3, 5, 10, "all"))
    assert row(res, cutoff=1).judged_coverage == 1.0
    assert row(res, cutoff=3).judged_coverage == pytest.approx(2 / 3)
    assert row(res, cutoff=5).judged_coverage == pytest.approx(3 / 5)
    assert row(res, cutoff=10).judged_coverage == pytest.approx(3 / 5)  # of the 5 shown
    assert row(res, cutoff="all").judged_coverage == pytest.approx(3 / 5)


def test_judged_doc_of_another_query_is_unjudged(tmp_path):
    judgments = {"q1": {"A": 3}, "q2": {"B": 3}}
    res = run_eval(tmp_path, judgments, {"q1": ["B", "A"], "q2": ["B"]})
    r = row(res, "q1")
    assert r.dcg == pytest.approx(7 / L3) and r.judged_coverage == pytest.approx(0.5)


# --------------------------------------------------------------------------- missing queries

MISS = {"q1": {"A": 1}, "q2": {"B": 1}, "q3": {"C": 1}}
MISS_RUN = {"q1": ["A"], "q3": ["x", "C"]}  # q2 not returned


def test_missing_queries_zero(tmp_path):
    res = run_eval(tmp_path, MISS, MISS_RUN, missing_queries="zero")
    r2 = row(res, "q2")
    assert r2.status == "missing" and r2.ndcg == 0.0 and r2.n_returned == 0
    s = res.summary["systems"]["sys"]["ndcg_at_3"]
    assert s["mean"] == pytest.approx((1 + 0 + 1 / L3) / 3, rel=1e-12)
    assert (s["n_evaluated"], s["n_missing"], s["n_excluded"]) == (3, 1, 0)


def test_missing_queries_exclude(tmp_path):
    res = run_eval(tmp_path, MISS, MISS_RUN, missing_queries="exclude")
    r2 = row(res, "q2")
    assert r2.status == "missing" and np.isnan(r2.ndcg)
    s = res.summary["systems"]["sys"]["ndcg_at_3"]
    assert s["mean"] == pytest.approx((1 + 1 / L3) / 2, rel=1e-12)
    assert (s["n_evaluated"], s["n_missing"], s["n_excluded"]) == (2, 1, 1)


def test_missing_queries_error(tmp_path):
    with pytest.raises(EvaluationError, match=r"'sys'.*'q2'"):
        run_eval(tmp_path, MISS, MISS_RUN, missing_queries="error")


def test_run_queries_outside_the_set_are_ignored(tmp_path):
    res = run_eval(tmp_path, {"q1": {"A": 1}}, {"q1": ["A"], "q9": ["A"]})
    assert list(res.per_query.query_id) == ["q1"]
    assert res.mean("sys", 3) == 1.0


# --------------------------------------------------------------------------- queries: set and weights

SET_J = {"q1": {"A": 1}, "q2": {"B": 1}, "q3": {"C": 1}}
SET_RUN = {"q1": ["A"], "q2": ["x", "B"], "q3": ["x", "y", "C"]}
SET_NDCG = {"q1": 1.0, "q2": 1 / L3, "q3": 1 / 2}


def test_query_set_restricts_evaluated_queries(tmp_path):
    qset = write(tmp_path, "set.txt", "q3\nq1\n")
    qrels = write_qrels(tmp_path, SET_J)
    run = write_run(tmp_path, SET_RUN)
    res = ndcg_mlflow.evaluate(spec(qrels, run, qset=qset), base_dir=tmp_path)
    assert sorted(res.per_query.query_id) == ["q1", "q3"]
    assert res.summary["n_queries"] == 2
    assert res.mean("sys", 3) == pytest.approx((1 + 1 / 2) / 2, rel=1e-12)


def test_query_set_with_unjudged_query_raises(tmp_path):
    qset = write(tmp_path, "set.txt", "q1\nq7\n")
    qrels = write_qrels(tmp_path, SET_J)
    run = write_run(tmp_path, SET_RUN)
    with pytest.raises(DataError, match=r"set\.txt.*'q7'"):
        ndcg_mlflow.evaluate(spec(qrels, run, qset=qset), base_dir=tmp_path)


@pytest.mark.parametrize(
    "text",
    [
        "query_id\tweight\nq1\t1\nq2\t3\nq3\t0.5\n",
        "q1 1\nq2  3\nq3\t0.5\n",
    ],
)
def test_weights_file_weighted_mean(tmp_path, text):
    weights = write(tmp_path, "weights.tsv" if text.startswith("query_id") else "weights.txt", text)
    qrels = write_qrels(tmp_path, SET_J)
    run = write_run(tmp_path, SET_RUN)
    res = ndcg_mlflow.evaluate(spec(qrels, run, weights=weights), base_dir=tmp_path)
    w = np.array([1, 3, 0.5])
    x = np.array([SET_NDCG[q] for q in ("q1", "q2", "q3")])
    assert res.mean("sys", 3) == pytest.approx(np.sum(w * x) / np.sum(w), rel=1e-12)
    assert res.mean("sys", 3) == pytest.approx(np.average(x, weights=w), rel=1e-12)
    pq = res.per_query.set_index("query_id")
    assert pq.loc["q2", "weight"] == 3.0
    assert res.summary["weight_sum"] == pytest.approx(4.5)


def test_weights_may_cover_more_queries_than_evaluated(tmp_path):
    weights = write(tmp_path, "w.txt", "q1 2\nq2 1\nq3 1\nq9 5\n")
    qset = write(tmp_path, "set.txt", "q1\nq2\n")
    qrels = write_qrels(tmp_path, SET_J)
    run = write_run(tmp_path, SET_RUN)
    res = ndcg_mlflow.evaluate(spec(qrels, run, weights=weights, qset=qset), base_dir=tmp_path)
    assert res.mean("sys", 3) == pytest.approx((2 * 1 + 1 / L3) / 3, rel=1e-12)


def test_missing_weight_raises(tmp_path):
    weights = write(tmp_path, "w.txt", "q1 1\nq3 2\n")
    qrels = write_qrels(tmp_path, SET_J)
    run = write_run(tmp_path, SET_RUN)
    with pytest.raises(DataError, match=r"w\.txt.*'q2'"):
        ndcg_mlflow.evaluate(spec(qrels, run, weights=weights), base_dir=tmp_path)


def test_mean_is_weighted_over_evaluated_queries_only(tmp_path):
    judgments = {"q1": {"A": 1}, "q2": {"B": 1}, "q3": {"C": 0}, "q4": {"D": 2}}
    ranking = {"q1": ["A"], "q2": ["x", "B"], "q3": ["C"]}  # q3 empty ideal, q4 missing
    weights = write(tmp_path, "w.txt", "q1 1\nq2 2\nq3 100\nq4 50\n")
    qrels = write_qrels(tmp_path, judgments)
    run = write_run(tmp_path, ranking)
    res = ndcg_mlflow.evaluate(spec(qrels, run, weights=weights, missing_queries="exclude"), base_dir=tmp_path)
    pq = res.per_query
    ok = pq[pq.ndcg.notna()]
    assert sorted(ok.query_id) == ["q1", "q2"]
    expected = (1 * 1 + 2 * (1 / L3)) / (1 + 2)
    assert res.mean("sys", 3) == pytest.approx(expected, rel=1e-12)
    assert res.mean("sys", 3) == pytest.approx(np.average(ok.ndcg, weights=ok.weight), rel=1e-12)
    s = res.summary["systems"]["sys"]["ndcg_at_3"]
    assert (s["n_evaluated"], s["n_excluded"], s["n_missing"], s["n_empty_ideal"]) == (2, 2, 1, 1)
    assert s["weight_sum"] == pytest.approx(3.0)

    # missing_queries: zero brings q4 (weight 50, nDCG 0) into the mean
    res0 = ndcg_mlflow.evaluate(spec(qrels, run, weights=weights, missing_queries="zero"), base_dir=tmp_path)
    assert res0.mean("sys", 3) == pytest.approx((1 + 2 / L3 + 0) / (1 + 2 + 50), rel=1e-12)


# --------------------------------------------------------------------------- query locality


@pytest.mark.parametrize(
    "metric",
    [
        dict(),
        dict(ties="average", gain="linear"),
        dict(ties="id_ascending", unjudged="condense"),
        dict(ties="id_descending", ideal="candidates"),
    ],
)
def test_query_result_independent_of_other_queries(tmp_path, metric):
    q1_j = {"d3": 2, "d1": 3, "d10": 0, "d2": 1}
    q1_run = [("d10", 5), ("d2", 5), ("u1", 4), ("d1", 4), ("d3", 1)]
    alone = tmp_path / "alone"
    crowd = tmp_path / "crowd"
    alone.mkdir()
    crowd.mkdir()
    a = run_eval(alone, {"q1": q1_j}, {"q1": q1_run}, cutoffs=(1, 2, 3, "all"), **metric)
    others_j = {"q0": {"d1": 0, "d9": 3, "d2": 2}, "q1": q1_j, "q2": {"d10": 3, "d3": 1, "x": 2}}
    # other queries share doc ids, have more documents and their own ties; q1 sits between them
    others_run = {
        "q2": [("x", 5), ("d10", 5), ("d3", 9), ("d2", 1)],
        "q1": q1_run,
        "q0": [("d9", 5), ("d1", 5), ("d2", 5), ("zz", 7), ("d3", 2)],
    }
    b = run_eval(crowd, others_j, others_run, cutoffs=(1, 2, 3, "all"), **metric)
    cols = ["cutoff", "ndcg", "dcg", "idcg", "idcg_candidates", "judged_coverage", "n_returned", "status"]
    pa = a.per_query[a.per_query.query_id == "q1"][cols].reset_index(drop=True)
    pb = b.per_query[b.per_query.query_id == "q1"][cols].reset_index(drop=True)
    assert pa.equals(pb), (pa, pb)


def test_query_set_does_not_change_a_query(tmp_path):
    qrels = write_qrels(tmp_path, SET_J)
    run = write_run(tmp_path, SET_RUN)
    full = ndcg_mlflow.evaluate(spec(qrels, run), base_dir=tmp_path)
    qset = write(tmp_path, "set.txt", "q2\n")
    sub = ndcg_mlflow.evaluate(spec(qrels, run, qset=qset), base_dir=tmp_path)
    assert row(sub, "q2").ndcg == row(full, "q2").ndcg == pytest.approx(1 / L3, rel=1e-12)


# --------------------------------------------------------------------------- numbers at the edges


def test_exponential_gain_that_overflows_is_refused_at_its_line(tmp_path):
    """2^1024 - 1 is inf: the old code made inf gains and a NaN nDCG marked ok, silently out of the mean."""
    qrels = write(tmp_path, "qrels.txt", "q1 0 A 2\nq1 0 B 1\nq2 0 C 1023\nq2 0 D 1024\nq3 0 E 2000\n")
    run = write_run(tmp_path, {"q1": ["A", "B"], "q2": ["D", "C"], "q3": ["E"]})
    with pytest.raises(
        DataError,
        match=r"grade 1024: its exponential gain 2\^1024 - 1 overflows a float.*"
        r"2 judgments in all.*gain: linear or a gain table",
    ) as info:
        ndcg_mlflow.evaluate(spec(qrels, run, gain="exponential"), base_dir=tmp_path)
    assert info.value.line == 4 and info.value.file.endswith("qrels.txt")
    # the same grades are fine under a linear gain
    r = ndcg_mlflow.evaluate(spec(qrels, run, gain="linear", cutoffs=("all",)), base_dir=tmp_path)
    assert row(r, "q2", "all").ndcg == pytest.approx((1024 + 1023 / L3) / (1024 + 1023 / L3), rel=1e-12)


@pytest.mark.parametrize(
    "gain, grades",
    [
        ("exponential", (1023, 1023)),  # each 2^1023 - 1 is finite; their DCG is not
        ({0: 0, 1: 1, 2: 1e308}, (2, 2)),  # a table's huge finite gains
        ({0: 0, 1: 1, 2: -1e308}, (2, 2)),  # ... or huge negative ones
    ],
)
def test_gains_whose_dcg_overflows_are_refused_naming_the_query(tmp_path, gain, grades):
    judged = {"q1": {"A": 1, "B": 0}, "q2": {"C": grades[0], "D": grades[1], "E": 1}}
    qrels = write_qrels(tmp_path, judged)
    run = write_run(tmp_path, {"q1": ["A"], "q2": ["E", "D"]})
    with pytest.raises(DataError, match=r"the gains of query 'q2' .* sum to more than the largest float") as info:
        ndcg_mlflow.evaluate(spec(qrels, run, gain=gain, ties="average"), base_dir=tmp_path)
    assert info.value.line == 3  # the first judgment of q2


def test_kernel_gains_of_judged_rows_only_give_the_same_numbers_bit_for_bit():
    """``RunRows(gain=None, judged_gain=...)`` (what the evaluation passes) against every row's gain: the same
    arrays exactly, under each tie, unjudged and ideal rule, with fractional and negative gains (a negative gain
    ranks after the unjudged rows' zeros in the candidates' ideal list), rows grouped by query in score order
    (no sort) or shuffled, tied scores and queries returned by nothing."""
    rng = np.random.default_rng(11)
    checked = 0
    for case in range(60):
        n_queries = int(rng.integers(1, 9))
        sizes = rng.integers(0, 30, n_queries)
        qs = np.repeat(np.arange(n_queries), sizes)
        scores = rng.integers(0, 6, qs.size).astype(float) if case % 2 else rng.random(qs.size).round(2)
        judged = rng.random(qs.size) < 0.3
        values = rng.random(qs.size) * 3 - (1.0 if case % 3 == 0 else 0.0)  # some cases with negative gains
        values[rng.random(qs.size) < 0.2] = 0.0  # judged rows of gain 0 too
        gains = np.where(judged, values, 0.0)
        if case % 4 == 0:
            order = rng.permutation(qs.size)
        else:
            order = np.lexsort((-scores, qs))  # the usual layout: no sort, ties reordered in place
        qs, scores, judged, gains = qs[order], scores[order], judged[order], gains[order]
        rank = rng.permutation(qs.size).astype(float)
        cat_q = np.repeat(np.arange(n_queries), rng.integers(0, 6, n_queries))
        cat_gain = rng.random(cat_q.size) * 3
        for ties, unjudged, ideal in itertools.product(
            ("average", "displayed_order"), ("zero", "condense"), ("judged_catalog", "candidates")
        ):
            args = dict(
                cutoffs=(1, 3, 10, None),
                ties=ties,
                unjudged=unjudged,
                ideal=ideal,
                empty_ideal="exclude",
                missing_queries="exclude",
            )
            full = evaluate_rows(
                RunRows(qs, scores, gains, judged, rank.__getitem__), cat_q, cat_gain, n_queries, **args
            )
            sparse = evaluate_rows(
                RunRows(qs, scores, None, judged, rank.__getitem__, judged_gain=gains[judged]),
                cat_q,
                cat_gain,
                n_queries,
                **args,
            )
            for field in ("dcg", "idcg", "idcg_candidates", "ndcg", "judged_coverage", "status", "n_returned"):
                a, b = getattr(full, field), getattr(sparse, field)
                assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), (case, ties, unjudged, field)
                assert np.array_equal(np.signbit(a), np.signbit(b)), (case, field)  # not even a -0.0 differs
            assert np.array_equal(full.ranked, sparse.ranked) and np.array_equal(full.position, sparse.position)
            checked += int(np.isfinite(full.ndcg).sum())
    assert checked > 1000  # the cases do define nDCG values


def test_kernel_run_rows_take_one_form_of_gains():
    with pytest.raises(ValueError, match="either gain"):
        RunRows(np.zeros(2, int), np.zeros(2), None, np.ones(2, bool))
    with pytest.raises(ValueError, match="either gain"):
        RunRows(np.zeros(2, int), np.zeros(2), np.zeros(2), np.ones(2, bool), judged_gain=np.zeros(2))


def test_kernel_never_returns_a_non_finite_number_marked_ok():
    """The invariant behind the data checks: an inf or NaN DCG / ideal DCG stops the kernel."""
    from ndcg_mlflow.kernel import NonFiniteError

    for gain in ([np.inf, 1.0, 1.0], [1e308, 1e308, 0.0], [np.nan, 1.0, 0.0]):
        # tied scores: the tie average sums the group's gains first (1e308 + 1e308 = inf)
        rows = RunRows(
            query=np.array([0, 0, 1]),
            score=np.array([2.0, 2.0, 1.0]),
            gain=np.array(gain),
            judged=np.ones(3, dtype=bool),
        )
        with pytest.raises(NonFiniteError, match="internal error: non-finite") as info:
            evaluate_rows(
                rows,
                np.array([0, 0, 1]),
                np.array(gain),
                2,
                cutoffs=(1, None),
                ties="average",
                unjudged="zero",
                ideal="judged_catalog",
                empty_ideal="exclude",
                missing_queries="zero",
            )
        assert info.value.queries.tolist() == [0]


def test_sensitivity_alternative_whose_gains_overflow_is_undefined(tmp_path):
    """Declared linear; grades of 1100 make the exponential alternative overflow: that row is undefined
    (NaN), not a crash, not a number."""
    qrels = write(tmp_path, "qrels.txt", "q1 0 A 1100\nq1 0 B 1\nq2 0 C 2\n")
    run = write_run(tmp_path, {"q1": ["B", "A"], "q2": ["C"]})
    raw = spec(qrels, run, gain="linear", cutoffs=(2,))
    raw["report"] = {"sensitivity": True}
    r = ndcg_mlflow.evaluate(raw, base_dir=tmp_path)
    t = r.sensitivity
    exp = t[(t.rule == "gain") & (t.alternative == "exponential")]
    assert len(exp) == 1 and np.isnan(exp.value.iloc[0]) and exp.n_used.iloc[0] == 0
    declared = t[t.rule == "declared"].value.iloc[0]
    assert declared == pytest.approx(((1 + 1100 / L3) / (1100 + 1 / L3) + 1) / 2, rel=1e-12)


def test_cutoffs_beyond_int64_count_the_whole_list(tmp_path):
    """2^63 and larger cutoffs crashed with an int64 OverflowError; beyond every list they are the list."""
    judged = {"q1": {"A": 3, "B": 2, "C": 1, "D": 0}, "q2": {"E": 1, "F": 2}}
    ranking = {"q1": ["C", "A", "X", "B"], "q2": ["F", "Y"]}
    huge = (2**63 - 1, 2**63, 2**64, 10**30)
    r = run_eval(tmp_path, judged, ranking, cutoffs=huge + (4, "all"))
    for q in ("q1", "q2"):
        whole = row(r, q, "all")
        for k in huge + (4,):
            got = row(r, q, k)
            assert (got.ndcg, got.dcg, got.idcg, got.judged_coverage) == (
                whole.ndcg,
                whole.dcg,
                whole.idcg,
                whole.judged_coverage,
            ), (q, k)
    assert r.mean("sys", 2**64) == r.mean("sys", "all")


def test_huge_cutoffs_through_every_output(tmp_path):
    """Companions, wins and losses, the reports: no int64 anywhere downstream of a huge cutoff."""
    from ndcg_mlflow.cli import main

    judged = {"q1": {"A": 3, "B": 2, "C": 1}, "q2": {"E": 1, "F": 2}, "q3": {"G": 1}}
    qrels = write_qrels(tmp_path, judged)
    a = write_run(tmp_path, {"q1": ["C", "A", "B"], "q2": ["F", "E"], "q3": ["G"]}, "a.run")
    b = write_run(tmp_path, {"q1": ["A", "B", "C"], "q2": ["E", "F"], "q3": ["H", "G"]}, "b.run")
    write(tmp_path, "dup.txt", "A g1\nB g1\n")
    raw = spec(qrels, {"a": a, "b": b}, cutoffs=(2**63, 10**30, "all"))
    raw["uncertainty"] = {"resamples": 100, "confidence": 0.9, "method": "percentile", "seed": 3}
    raw["comparison"] = {
        "baseline": "a",
        "test": "both",
        "correction": "holm",
        "wins_losses": 2**13,
        "tie_tolerance": 0,
    }
    raw["companions"] = {"duplicates": "dup.txt", "catalog": 10**30}
    raw["report"] = {"sensitivity": True}
    import yaml

    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw))
    out = tmp_path / "out"
    assert main(["run", str(tmp_path / "spec.yaml"), "--out", str(out), "--no-mlflow", "--quiet"]) == 0
    import json

    summary = json.loads((out / "summary.json").read_text())
    assert summary["systems"]["b"]["ndcg_at_9223372036854775808"] == summary["systems"]["b"]["ndcg_at_all"]
    assert summary["systems"]["a"]["ndcg_at_1000000000000000000000000000000"]["catalog_coverage"] == 6 / 10**30
    assert "nDCG@9223372036854775808" in (out / "report.md").read_text()


def test_catalog_smaller_than_the_documents_shown_is_refused(tmp_path):
    """Coverage above 100% means the declared catalog size is wrong: a spec error with both numbers."""
    from ndcg_mlflow import SpecError

    qrels = write_qrels(tmp_path, {"q1": {"A": 1}, "q2": {"B": 1}})
    run = write_run(tmp_path, {"q1": ["A", "X", "Y"], "q2": ["B", "Z"]})
    raw = spec(qrels, run, cutoffs=(2, "all"))
    raw["companions"] = {"catalog": 4}
    with pytest.raises(
        SpecError,
        match=r"at key 'companions.catalog': declares a catalog of 4 documents, but "
        r"system 'sys' shows 5 distinct documents in its whole lists",
    ):
        ndcg_mlflow.evaluate(raw, base_dir=tmp_path)
    raw["companions"] = {"catalog": 5}  # the boundary: every document of the catalog shown
    r = ndcg_mlflow.evaluate(raw, base_dir=tmp_path)
    assert r.summary["systems"]["sys"]["ndcg_at_all"]["catalog_coverage"] == 1.0
    assert r.summary["systems"]["sys"]["ndcg_at_2"]["catalog_coverage"] == 4 / 5


def test_ndcg_ratio_that_overflows_is_a_data_error(tmp_path):
    """Finite DCG and ideal DCG whose ratio overflows (a table with gains of very different sizes)."""
    judged = {"q1": {"A": 1}, "q2": {"N": -1, "P": 2}}
    qrels = write_qrels(tmp_path, judged)
    run = write_run(tmp_path, {"q1": ["A"], "q2": ["N"]})
    with pytest.raises(DataError, match=r"system 'sys': the nDCG of query 'q2' .* overflows a float"):
        ndcg_mlflow.evaluate(spec(qrels, run, gain={-1: -1e300, 1: 1, 2: 1e-300}, cutoffs=(1,)), base_dir=tmp_path)


# --------------------------------------------------------------------------- each rule declared once (rules.py)

ROUND_TRIP_VALUES = {
    "metric.gain": [
        Gain("exponential"),
        Gain("linear"),
        Gain("table", ((-1.0, 0.0), (0.5, 1.25), (3.0, 7.0))),
        Gain("table", ((1.0, 1e300),)),
    ],
    "metric.cutoffs": [(5, 10, None), (None,), (1,), (10**30, 3)],
    "queries.weights": [None, "weights.tsv", "data/w eights,1.csv"],
    "queries.set": [None, "queries.txt"],
}


def test_every_rule_and_choice_parses_back_from_its_resolved_form():
    for key, rule in RULES.items():
        values = ROUND_TRIP_VALUES.get(key, list(rule.choices))
        assert values, key
        for value in values:
            text = rule.resolve(value)
            assert isinstance(text, str)
            assert rule.parse(text) == value, (key, value, text)
            assert rule.words(value), (key, value)  # explain has words for it
            for alt in rule.alternatives(value):
                assert alt != value and rule.parse(rule.resolve(alt)) == alt


def _logged_params(spec) -> dict[str, str]:
    """The params as MLflow keeps them: every resolved field as text."""
    return {k: str(v) for k, v in spec.resolved().items()}


@pytest.mark.parametrize(
    "metric",
    [
        {},
        {
            "gain": {0: 0, 1: 1, 2: 3.5, -1: 0},
            "cutoffs": ["all", 5, 10],
            "ties": "average",
            "ideal": "candidates",
            "empty_ideal": "one",
            "unjudged": "condense",
            "missing_queries": "exclude",
        },
        {
            "gain": "linear",
            "cutoffs": [10**30],
            "ties": "id_descending",
            "empty_ideal": "error",
            "unjudged": "error",
            "missing_queries": "error",
            "weights": "w.tsv",
            "qset": "set.txt",
        },
    ],
)
def test_compare_rebuilds_the_same_definition_from_logged_params(metric):
    raw = metric_spec("qrels.tsv", "run.tsv", name="round-trip", **metric)
    spec = load_spec(raw, base_dir=".")
    rebuilt = raw_definition(_logged_params(spec))
    again = load_spec({**raw, "metric": rebuilt["metric"], "queries": rebuilt["queries"]}, base_dir=".")
    assert again.definition_digest() == spec.definition_digest()
    assert again.metric == spec.metric
    assert {k: again.resolved()[k] for k in DEFINITION_KEYS} == {k: spec.resolved()[k] for k in DEFINITION_KEYS}


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_compare_rebuilds_a_preset_definition_from_logged_params(preset):
    raw = {
        "spec_version": 1,
        "name": "p",
        "metric": {"preset": preset},
        "queries": {"weights": "uniform"},
        "data": {"qrels": "q.tsv", "systems": {"s": "r.tsv"}},
    }
    spec = load_spec(raw, base_dir=".")
    rebuilt = raw_definition(_logged_params(spec))
    assert load_spec({**raw, **rebuilt}, base_dir=".").definition_digest() == spec.definition_digest()


def test_the_digest_and_compare_use_one_list_of_definition_keys():
    from types import SimpleNamespace

    from ndcg_mlflow.tracking.compare import definition_differences

    base = load_spec(metric_spec("qrels.tsv", "run.tsv", name="a"), base_dir=".")
    assert set(DEFINITION_KEYS) == {k for k in base.resolved() if k.startswith(("metric.", "queries."))} - {
        "metric.preset"
    }

    def run(spec):
        return SimpleNamespace(data=SimpleNamespace(params=_logged_params(spec), tags={}))

    for key, change in [
        ("queries.weights", {"weights": "w.tsv"}),
        ("queries.set", {"qset": "s.txt"}),
        ("metric.ties", {"ties": "average"}),
        ("metric.cutoffs", {"cutoffs": (3, 5)}),
    ]:
        other = load_spec(metric_spec("qrels.tsv", "run.tsv", name="b", **change), base_dir=".")
        assert other.definition_digest() != base.definition_digest(), key
        assert [d.split(":")[0] for d in definition_differences(run(base), run(other))] == [key]
    # what is not a rule changes neither: the data paths, the name, the preset's name
    other = load_spec(metric_spec("elsewhere.tsv", "other.run", name="c"), base_dir=".")
    assert other.definition_digest() == base.definition_digest()
    assert definition_differences(run(base), run(other)) == []


# --------------------------------------------------------------------------- metric keys and labels


@pytest.mark.parametrize(
    "cutoff, key, label, name",
    [
        (1, "ndcg_at_1", "1", "nDCG@1"),
        (10, "ndcg_at_10", "10", "nDCG@10"),
        (None, "ndcg_at_all", "all", "nDCG@all"),
        (10**30, "ndcg_at_" + "1" + "0" * 30, "1" + "0" * 30, "nDCG@1" + "0" * 30),
    ],
)
def test_metric_key_label_and_cutoff_round_trip(cutoff, key, label, name):
    assert cutoff_key(cutoff) == key and "@" not in key
    assert cutoff_of_key(key) == cutoff and cutoff_key(cutoff_of_key(key)) == key
    assert key_label(key) == label == cutoff_label(cutoff) and cutoff_of_label(label) == cutoff
    assert metric_name(key) == name
    assert metric_name(key, lambda s: f"<{s}>") == f"nDCG@<{label}>"  # the escape applies to the cutoff only
    assert companion_key(key, "judged_coverage") == f"judged_coverage_at_{label}"


@pytest.mark.parametrize(
    "text",
    [
        "ndcg_at_",
        "ndcg_at_0",
        "ndcg_at_-1",
        "ndcg_at_010",
        "ndcg_at_ 10",
        "ndcg_at_All",
        "ndcg_at_10x",
        "ndcg_at_1.5",
        "nDCG@10",
        "err_at_10",
        "10",
        "ndcg_at_١٠",
    ],
)
def test_what_is_not_a_metric_key_is_refused(text):
    with pytest.raises(ValueError, match="not"):
        cutoff_of_key(text)
    with pytest.raises(ValueError):
        metric_name(text)


def test_headline_key_is_nDCG_at_10_when_declared_else_the_first():
    assert headline_key(["ndcg_at_5", "ndcg_at_10", "ndcg_at_all"]) == "ndcg_at_10"
    assert headline_key(["ndcg_at_all", "ndcg_at_5"]) == "ndcg_at_all"
    assert headline_key(["ndcg_at_100", "ndcg_at_1"]) == "ndcg_at_100"


def test_no_module_but_rules_builds_or_parses_a_metric_key():
    """Every metric key, its cutoff and its ``nDCG@K`` label go through the helpers of ndcg_mlflow.rules: no other
    module has a string (docstrings aside) containing ``ndcg_at_``, ``_at_`` or ``nDCG@``."""
    import ast
    from pathlib import Path

    package = Path(ndcg_mlflow.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "rules.py" and path.parent == package:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and any(s in node.value for s in ("ndcg_at_", "_at_", "nDCG@"))
            ):
                found.append(f"{path.relative_to(package)}:{node.lineno}: {node.value!r}")
    assert not found, "metric keys built outside ndcg_mlflow.rules:\n" + "\n".join(found)
    # the test sees a hand-built key (it would fail on the code this replaced)
    assert any(
        isinstance(n, ast.Constant) and "ndcg_at_" in n.value
        for n in ast.walk(ast.parse('k.replace("ndcg_at_", "nDCG@")'))
    )


# --------------------------------------------------------------------------- what each choice implies

IMPLIED = {  # choice -> (keeps displayed order, averages ties, id tiebreak)
    "displayed_order": (True, False, None),
    "id_ascending": (False, False, False),
    "id_descending": (False, False, True),
    "average": (False, True, None),
}


def test_each_tie_rule_states_what_it_implies():
    from ndcg_mlflow import rules

    assert set(IMPLIED) == set(RULES["metric.ties"].choices)
    for ties, (displayed, averaged, by_id) in IMPLIED.items():
        assert rules.keeps_displayed_order(ties) is displayed
        assert rules.averages_ties(ties) is averaged
        assert rules.id_tiebreak(ties) is by_id
        assert rules.needs_row_order(ties) is displayed
        # sensitivity recomputes under every other tie rule, displayed_order among them
        assert rules.needs_row_order(ties, sensitivity=True)


def test_each_empty_and_missing_rule_states_its_score():
    from ndcg_mlflow import rules

    scores = {"zero": 0.0, "one": 1.0, "exclude": None, "error": None}
    assert set(scores) == set(RULES["metric.empty_ideal"].choices)
    for choice, score in scores.items():
        got = rules.empty_ideal_score(choice)
        assert np.isnan(got) if score is None else got == score
        assert rules.stops(choice) is (choice == "error")
        assert rules.excludes(choice) is (choice == "exclude")
    for choice in RULES["metric.missing_queries"].choices:
        got = rules.missing_score(choice)
        assert got == 0.0 if choice == "zero" else np.isnan(got)
    assert [c for c in RULES["metric.unjudged"].choices if rules.condenses(c)] == ["condense"]
    assert [c for c in RULES["metric.ideal"].choices if rules.ideal_of_catalog(c)] == ["judged_catalog"]


RULE_FIELDS = ("ties", "ideal", "empty_ideal", "unjudged", "missing_queries", "gain", "kind", "rule")


def _literal_rule_comparisons(source: str, filename: str) -> list[str]:
    """Comparisons of a rule's value with one of its choices written as a literal: ``ties == "average"``."""
    import ast

    choices = {c for r in RULES.values() for c in r.choices} | {"table"}
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        literals = [
            s.value
            for s in sides
            for s in ([s] if not isinstance(s, ast.Tuple) else s.elts)
            if isinstance(s, ast.Constant) and isinstance(s.value, str)
        ]
        names = {
            n.attr if isinstance(n, ast.Attribute) else n.id
            for s in sides
            for n in ast.walk(s)
            if isinstance(n, (ast.Attribute, ast.Name))
        }
        if any(v in choices for v in literals) and names & set(RULE_FIELDS):
            found.append(f"{filename}:{node.lineno}")
    return found


def test_no_module_compares_a_rule_with_a_literal():
    """What a choice implies is asked of :mod:`ndcg_mlflow.rules`; only the modules that declare rules (and the
    presets, which are specs) write their choices."""
    from pathlib import Path

    package = Path(ndcg_mlflow.__file__).parent
    declaring = {"rules.py", "presets.py"}
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.name not in declaring:
            found += _literal_rule_comparisons(path.read_text(encoding="utf-8"), str(path.relative_to(package)))
    assert found == []
    # the check sees such a comparison where one is written
    planted = 'def f(metric, ties):\n    return metric.ties == "average" or ties in ("id_ascending",)\n'
    assert _literal_rule_comparisons(planted, "planted.py") == ["planted.py:2", "planted.py:2"]


STATISTICS_FIELDS = ("method", "test", "correction", "rule", "stratify")


def _literal_choice_uses(source: str, filename: str) -> list[str]:
    """Comparisons of a statistics or decision choice's value with one of its choices written as a literal
    (``u.method == "bca"``, ``test in ("randomization", "both")``, ``params.get("uncertainty.stratify") ==
    "segments"``), and a second declaration of a choice's values (a tuple of all of them)."""
    import ast

    from ndcg_mlflow.rules import STATISTICS_CHOICES

    choices = {c for choice in STATISTICS_CHOICES.values() for c in choice.choices}
    declared = {frozenset(choice.choices) for choice in STATISTICS_CHOICES.values()}
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Tuple) and len(node.elts) > 1:
            values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(values) == len(node.elts) and frozenset(values) in declared:
                found.append(f"{filename}:{node.lineno}: {tuple(values)} declared again")
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        literals = {
            s.value
            for s in sides
            for s in ([s] if not isinstance(s, ast.Tuple) else s.elts)
            if isinstance(s, ast.Constant) and isinstance(s.value, str)
        }
        inside = [n for s in sides for n in ast.walk(s)]
        names = {
            n.attr if isinstance(n, ast.Attribute) else n.id for n in inside if isinstance(n, (ast.Attribute, ast.Name))
        }
        keys = {n.value for n in inside if isinstance(n, ast.Constant) and n.value in STATISTICS_CHOICES}
        if literals & choices and (names & set(STATISTICS_FIELDS) or keys):
            found.append(f"{filename}:{node.lineno}")
    return sorted(found)


def test_no_module_compares_a_statistics_choice_with_a_literal():
    """The interval method, test, correction, decision rule and stratification are declared once, in
    :mod:`ndcg_mlflow.rules`, with what each implies; every other module (and the spec reference's generator)
    asks it."""
    from pathlib import Path

    package = Path(ndcg_mlflow.__file__).parent
    paths = [p for p in sorted(package.rglob("*.py")) if p.name != "rules.py"]
    paths.append(package.parent / "docs" / "gen_spec_reference.py")
    found = []
    for path in paths:
        found += _literal_choice_uses(path.read_text(encoding="utf-8"), str(path.relative_to(package.parent)))
    assert found == []
    # the check sees each kind of use where one is written
    planted = (
        "def f(spec, u, params):\n"
        '    a = u.method == "studentized" or spec.comparison.test in ("randomization", "both")\n'
        '    b = params.get("uncertainty.stratify") == "segments" or spec.decision.rule != "superiority"\n'
        '    return ("superiority", "non_inferiority")\n'
    )
    assert _literal_choice_uses(planted, "planted.py") == [
        "planted.py:2",
        "planted.py:2",
        "planted.py:3",
        "planted.py:3",
        "planted.py:4: ('superiority', 'non_inferiority') declared again",
    ]


def test_each_statistics_choice_states_what_it_implies():
    from ndcg_mlflow import rules
    from ndcg_mlflow.spec import types as T

    assert (T.CI_METHODS, T.TESTS, T.CORRECTIONS, T.DECISION_RULES, T.STRATIFY) == (
        ("bca", "percentile", "studentized"),
        ("randomization", "t_test", "both"),
        ("holm", "bonferroni", "benjamini_hochberg", "none"),
        ("superiority", "non_inferiority"),
        ("none", "segments"),
    )
    methods = rules.INTERVAL_METHOD.choices
    assert [[f(m) for f in (rules.percentile_interval, rules.bca_interval, rules.studentizes)] for m in methods] == [
        [False, True, False],
        [True, False, False],
        [False, False, True],
    ]
    tests = {t: (rules.randomizes(t), rules.t_tests(t), rules.corrected_test(t)) for t in rules.TEST.choices}
    assert tests == {
        "randomization": (True, False, "randomization"),
        "t_test": (False, True, "t_test"),
        "both": (True, True, "randomization"),
    }
    corrections = rules.CORRECTION.choices
    kinds = (rules.holm, rules.bonferroni, rules.benjamini_hochberg, rules.corrects)
    assert [[f(c) for f in kinds] for c in corrections] == [
        [True, False, False, True],
        [False, True, False, True],
        [False, False, True, True],
        [False, False, False, False],
    ]
    assert [(rules.superiority(r), rules.non_inferiority(r)) for r in rules.DECISION_RULE.choices] == [
        (True, False),
        (False, True),
    ]
    assert rules.GUARDRAIL_RULE.choices == rules.DECISION_RULE.choices
    assert [rules.stratifies(s) for s in (*rules.STRATIFY.choices, None)] == [False, True, False]
    assert [rules.stratify_text(rules.stratifies(s)) for s in rules.STRATIFY.choices] == list(rules.STRATIFY.choices)


def test_a_key_as_people_write_it():
    from ndcg_mlflow.rules import key_of_text

    keys = ["ndcg_at_5", "ndcg_at_10", "ndcg_at_all"]
    assert [key_of_text(t, keys) for t in ("10", "nDCG@10", "NDCG@all", "ndcg_at_5", "all")] == [
        "ndcg_at_10",
        "ndcg_at_10",
        "ndcg_at_all",
        "ndcg_at_5",
        "ndcg_at_all",
    ]
    assert [key_of_text(t, keys) for t in ("7", "x", "nDCG@", "010", "ndcg_at_7", "@10")] == [None] * 6
