"""Uncertainty and paired comparisons through ``ndcg_mlflow.evaluate`` on small TREC files.

The per-query table (``result.per_query``) is the reference: every interval,
test, count and win/loss list is checked against numbers recomputed from it
(or from the files written here), not against the implementation's internals.
"""

from __future__ import annotations

import copy
import functools
import json
import math

import numpy as np
import pytest
import scipy.stats as ss

import ndcg_mlflow
from ndcg_mlflow import SpecError
from ndcg_mlflow.render.wins_losses import wins_losses_markdown
from ndcg_mlflow.statistics import inference as stats

KEY = "ndcg_at_10"


# --------------------------------------------------------------------------- data helpers


def write_qrels(path, qrels: dict[str, dict[str, float]]):
    lines = [f"{q} 0 {d} {g:g}" for q, docs in qrels.items() for d, g in docs.items()]
    path.write_text("\n".join(lines) + "\n")


def write_run(path, run: dict[str, list[str]], tag="sys"):
    lines = []
    for q, docs in run.items():
        for i, d in enumerate(docs):
            lines.append(f"{q} Q0 {d} {i + 1} {100 - i:.1f} {tag}")
    path.write_text("\n".join(lines) + "\n")


def make_data(nq: int, seed: int = 0, pool: int = 15, depth: int = 12):
    """Random graded judgments and a few systems of different quality.

    Queries q000.. each judge 10 of ``pool`` documents (grades 0-3, at least one
    relevant); the other documents are unjudged. ``bm25`` ranks at random, ``better``
    prefers relevant documents, ``noisy`` is half-way. Queries q000 and q001 are
    copies of each other (same judgments and rankings under other ids), so their
    deltas tie exactly.
    """
    r = np.random.default_rng(seed)
    qrels, runs = {}, {"bm25": {}, "better": {}, "noisy": {}}
    for i in range(nq):
        q = f"q{i:03d}"
        src = "q000" if i == 1 else q
        if i == 1:
            qrels[q] = dict(qrels["q000"])
            for s in runs:
                runs[s][q] = list(runs[s]["q000"])
            continue
        docs = [f"{src}-d{j:02d}" for j in range(pool)]
        judged = r.choice(pool, size=10, replace=False)
        grades = {docs[j]: int(r.integers(0, 4)) for j in judged}
        if max(grades.values()) == 0:
            grades[docs[judged[0]]] = 2
        qrels[q] = grades
        gain = np.array([2.0 ** grades.get(d, 0) - 1 for d in docs])
        for s, strength in (("bm25", 0.0), ("better", 2.0), ("noisy", 0.7)):
            score = strength * gain + r.normal(0, 3, size=pool)
            order = np.argsort(-score, kind="stable")[:depth]
            runs[s][q] = [docs[j] for j in order]
    return qrels, runs


def write_data(tmp_path, qrels, runs, weights=None):
    write_qrels(tmp_path / "qrels.txt", qrels)
    for name, run in runs.items():
        write_run(tmp_path / f"{name}.run", run, tag=name)
    if weights is not None:
        (tmp_path / "weights.tsv").write_text(
            "query_id\tweight\n" + "".join(f"{q}\t{w!r}\n" for q, w in weights.items())
        )


def make_spec(
    systems,
    *,
    cutoffs=(5, 10),
    resamples=1000,
    method="percentile",
    seed=12345,
    confidence=0.95,
    baseline="bm25",
    test="both",
    correction="holm",
    wins_losses=5,
    tie_tolerance=1e-9,
    weights="uniform",
    ideal="judged_catalog",
    comparison=True,
    uncertainty=True,
):
    spec = {
        "spec_version": 1,
        "name": "analysis-tests",
        "metric": {
            "gain": "exponential",
            "cutoffs": list(cutoffs),
            "discount": "log2",
            "ties": "displayed_order",
            "ideal": ideal,
            "empty_ideal": "exclude",
            "unjudged": "zero",
            "missing_queries": "zero",
        },
        "queries": {"weights": weights},
        "data": {"qrels": "qrels.txt", "systems": {s: f"{s}.run" for s in systems}},
    }
    if uncertainty:
        spec["uncertainty"] = {"resamples": resamples, "confidence": confidence, "method": method, "seed": seed}
    if comparison:
        spec["comparison"] = {
            "baseline": baseline,
            "test": test,
            "correction": correction,
            "wins_losses": wins_losses,
            "tie_tolerance": tie_tolerance,
        }
    return spec


def per_query_matrix(result, system, cutoff="10"):
    pq = result.per_query
    sel = pq[(pq.system == system) & (pq.cutoff.astype(str) == cutoff)].set_index("query_id")  # (a label)
    return sel["ndcg"], sel["weight"]


def paired(result, cand, base="bm25", cutoff="10"):
    c, w = per_query_matrix(result, cand, cutoff)
    b, _ = per_query_matrix(result, base, cutoff)
    ok = c.notna() & b.notna()
    return b[ok].to_numpy(), c[ok].to_numpy(), w[ok].to_numpy(), np.asarray(c.index[ok])


def rows(result, cand=None, key=None):
    out = [
        r
        for r in result.analysis.comparisons
        if (cand is None or r["candidate"] == cand) and (key is None or r["key"] == key)
    ]
    return out


def one_row(result, cand, key=KEY):
    found = rows(result, cand, key)
    assert len(found) == 1
    return found[0]


@pytest.fixture(scope="module")
def data40(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data40")
    qrels, runs = make_data(40, seed=1)
    write_data(folder, qrels, runs)
    return folder, qrels, runs


@pytest.fixture(scope="module")
def result40(data40):
    folder, _, _ = data40
    return ndcg_mlflow.evaluate(make_spec(["bm25", "better", "noisy"]), base_dir=folder)


# --------------------------------------------------------------------------- per-system intervals


@pytest.mark.parametrize("method", ["percentile", "bca", "studentized"])
def test_system_intervals(data40, method):
    folder, _, _ = data40
    res = ndcg_mlflow.evaluate(make_spec(["bm25", "better"], method=method, cutoffs=(5, 10, "all")), base_dir=folder)
    systems = res.summary["systems"]
    for name in ("bm25", "better"):
        for key, cutoff in (("ndcg_at_5", "5"), ("ndcg_at_10", "10"), ("ndcg_at_all", "all")):
            e = systems[name][key]
            x, w = per_query_matrix(res, name, cutoff)
            x = x.dropna().to_numpy()
            assert e["mean"] == pytest.approx(x.mean(), abs=1e-12)
            assert e["ci_low"] <= e["mean"] <= e["ci_high"], (name, key, e)
            assert e["ci_high"] - e["ci_low"] > 0
            # standard error: std of the bootstrap distribution, close to s / sqrt(n)
            assert e["std_error"] == pytest.approx(x.std(ddof=1) / math.sqrt(x.size), rel=0.15)
            assert e["n_eff"] == pytest.approx(x.size)
            # a 95% interval spans about 2 x 1.96 standard errors where the data are not
            # skewed ('better' is piled up near nDCG = 1: its studentized interval is wider)
            ratio = (e["ci_high"] - e["ci_low"]) / e["std_error"]
            if name == "bm25":
                assert ratio == pytest.approx(2 * 1.96, rel=0.15)
            else:
                assert 3.0 < ratio < 8.0
    json.loads(res.summary_json)  # JSON-ready


def test_percentile_interval_is_the_bootstrap_of_the_queries(data40):
    """Per-system percentile interval and SE from an independent bootstrap of the same per-query values.

    The resampled indices differ from ours, so the comparison is up to Monte-Carlo error.
    """
    folder, _, _ = data40
    res = ndcg_mlflow.evaluate(make_spec(["bm25", "better"], resamples=20000, method="percentile"), base_dir=folder)
    x, _ = per_query_matrix(res, "better")
    x = x.to_numpy()
    ref = ss.bootstrap((x,), np.mean, method="percentile", n_resamples=20000, rng=np.random.default_rng(0))
    e = res.summary["systems"]["better"][KEY]
    assert e["ci_low"] == pytest.approx(ref.confidence_interval.low, abs=0.01)
    assert e["ci_high"] == pytest.approx(ref.confidence_interval.high, abs=0.01)
    assert e["std_error"] == pytest.approx(ref.standard_error, rel=0.05)


# --------------------------------------------------------------------------- comparisons table


def test_comparison_rows_against_the_per_query_table(result40):
    res = result40
    assert res.summary["comparisons"] == res.analysis.comparisons
    assert len(res.analysis.comparisons) == 2 * 2  # 2 candidates x 2 cutoffs
    assert len(res.comparisons) == 4
    assert {(r["candidate"], r["key"]) for r in res.analysis.comparisons} == {
        (c, k) for c in ("better", "noisy") for k in ("ndcg_at_5", "ndcg_at_10")
    }
    for r in res.analysis.comparisons:
        cutoff = r["key"].replace("ndcg_at_", "")
        b, c, w, _ = paired(res, r["candidate"], cutoff=cutoff)
        d = c - b
        assert r["baseline"] == "bm25"
        assert r["n_paired"] == d.size == 40
        assert r["baseline_mean"] == pytest.approx(b.mean(), abs=1e-12)
        assert r["candidate_mean"] == pytest.approx(c.mean(), abs=1e-12)
        assert r["delta"] == pytest.approx(d.mean(), abs=1e-12)
        assert r["delta"] == pytest.approx(res.mean(r["candidate"], cutoff) - res.mean("bm25", cutoff), abs=1e-12)
        assert r["relative_delta"] == pytest.approx(d.mean() / b.mean(), rel=1e-10)
        assert r["effect_size_dz"] == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-10)
        assert r["ci_low"] <= r["delta"] <= r["ci_high"]
        assert r["std_error"] == pytest.approx(d.std(ddof=1) / math.sqrt(d.size), rel=0.15)
        assert r["p_t_test"] == pytest.approx(ss.ttest_rel(c, b).pvalue, rel=1e-9)
        assert r["wins"] == int(np.sum(d > 1e-9))
        assert r["losses"] == int(np.sum(d < -1e-9))
        assert r["ties"] == int(np.sum(np.abs(d) <= 1e-9))
        assert r["wins"] + r["ties"] + r["losses"] == 40
        assert r["randomization_exact"] is False  # 40 queries: Monte-Carlo
        assert 1 / 1001 <= r["p_randomization"] <= 1
        assert r["correction"] == "holm" and r["corrected_test"] == "randomization"
    # 'better' is clearly better at 10
    assert one_row(res, "better")["delta"] > 0.1
    assert one_row(res, "better")["ci_low"] > 0
    # Holm over the whole family of four randomization p-values, recomputed by hand
    ps = np.array([r["p_randomization"] for r in res.analysis.comparisons])
    order = np.argsort(ps, kind="stable")
    holm = np.empty(4)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (4 - rank) * ps[i]))
        holm[i] = running
    np.testing.assert_allclose([r["p_corrected"] for r in res.analysis.comparisons], holm)
    assert "4 comparisons" in res.summary["comparison_family"]
    json.loads(res.summary_json)


def test_t_test_p_equals_scipy_ttest_rel(result40):
    for cand in ("better", "noisy"):
        for cutoff in ("5", "10"):
            b, c, _, _ = paired(result40, cand, cutoff=cutoff)
            r = one_row(result40, cand, f"ndcg_at_{cutoff}")
            assert r["p_t_test"] == pytest.approx(ss.ttest_rel(c, b).pvalue, rel=1e-9, abs=1e-300)


def test_randomization_p_agrees_with_an_independent_sign_flip(result40):
    """Monte-Carlo p-value of 'noisy' vs an independent sign-flip estimate, within Monte-Carlo error."""
    b, c, _, _ = paired(result40, "noisy")
    d = c - b
    r = np.random.default_rng(0)
    R = 40000
    signs = r.choice([-1.0, 1.0], size=(R, d.size))
    p_ref = (1 + np.sum(np.abs(signs @ d) >= abs(d.sum()) - 1e-12)) / (R + 1)
    p = one_row(result40, "noisy")["p_randomization"]
    # ours uses 1000 resamples: allow 4 of its standard errors
    assert abs(p - p_ref) < 4 * math.sqrt(p_ref * (1 - p_ref) / 1000) + 0.002


@pytest.mark.parametrize("correction", ["holm", "bonferroni", "benjamini_hochberg", "none"])
def test_corrections_over_the_family(data40, correction):
    folder, _, _ = data40
    res = ndcg_mlflow.evaluate(
        make_spec(["bm25", "better", "noisy"], correction=correction, cutoffs=(5, 10, "all"), resamples=200),
        base_dir=folder,
    )
    rs = res.analysis.comparisons
    assert len(rs) == 6
    ps = [r["p_randomization"] for r in rs]
    np.testing.assert_allclose([r["p_corrected"] for r in rs], stats.correct(ps, correction))
    if correction == "none":
        assert [r["p_corrected"] for r in rs] == ps
    if correction == "bonferroni":
        np.testing.assert_allclose([r["p_corrected"] for r in rs], np.minimum(1, 6 * np.array(ps)))
    assert all(r["correction"] == correction for r in rs)


def test_t_test_only_and_randomization_only(data40):
    folder, _, _ = data40
    res_t = ndcg_mlflow.evaluate(make_spec(["bm25", "noisy"], test="t_test", correction="bonferroni"), base_dir=folder)
    r = one_row(res_t, "noisy")
    assert math.isnan(r["p_randomization"]) and not math.isnan(r["p_t_test"])
    assert r["corrected_test"] == "t_test"
    assert r["p_corrected"] == pytest.approx(min(1.0, 2 * r["p_t_test"]))
    res_r = ndcg_mlflow.evaluate(make_spec(["bm25", "noisy"], test="randomization"), base_dir=folder)
    r = one_row(res_r, "noisy")
    assert math.isnan(r["p_t_test"]) and not math.isnan(r["p_randomization"])
    assert r["corrected_test"] == "randomization"
    json.loads(res_t.summary_json)


# --------------------------------------------------------------------------- identical and dominant systems


def test_identical_systems(tmp_path):
    qrels, runs = make_data(30, seed=2)
    write_data(tmp_path, qrels, {"bm25": runs["bm25"], "copy": runs["bm25"]})
    for method in ("percentile", "bca", "studentized"):
        res = ndcg_mlflow.evaluate(make_spec(["bm25", "copy"], method=method), base_dir=tmp_path)
        for key in ("ndcg_at_5", "ndcg_at_10"):
            r = one_row(res, "copy", key)
            assert r["delta"] == 0
            assert r["ci_low"] == 0 and r["ci_high"] == 0, (method, r)
            assert r["std_error"] == 0
            assert r["p_randomization"] == 1.0
            assert r["p_t_test"] == 1.0
            assert r["p_corrected"] == 1.0
            assert r["wins"] == 0 and r["losses"] == 0 and r["ties"] == 30
            assert r["effect_size_dz"] == 0
            assert r["relative_delta"] == 0
        for block in res.analysis.wins_losses:
            assert block["wins"] == [] and block["losses"] == []
        s = res.summary["systems"]
        assert s["bm25"][KEY] == s["copy"][KEY]  # same data, same resamples


def _dominant_data(nq):
    """Every query: one relevant doc; the baseline shows it at rank 4, the candidate at rank 1."""
    qrels, base, cand = {}, {}, {}
    for i in range(nq):
        q = f"q{i:03d}"
        qrels[q] = {f"{q}-rel": 1 + i % 3, f"{q}-x0": 0, f"{q}-x1": 0}
        others = [f"{q}-x{j}" for j in range(5)]
        base[q] = others[:3] + [f"{q}-rel"] + others[3:]
        cand[q] = [f"{q}-rel"] + others
    return qrels, {"bm25": base, "cand": cand}


@pytest.mark.parametrize("resamples", [100, 999, 2500])
def test_better_on_every_query_gives_minimum_monte_carlo_p(tmp_path, resamples):
    qrels, runs = _dominant_data(25)
    write_data(tmp_path, qrels, runs)
    res = ndcg_mlflow.evaluate(make_spec(["bm25", "cand"], resamples=resamples, cutoffs=(3, 10)), base_dir=tmp_path)
    r = one_row(res, "cand")
    assert r["randomization_exact"] is False
    assert r["p_randomization"] == 1 / (resamples + 1)
    assert r["wins"] == 25 and r["losses"] == 0 and r["ties"] == 0
    assert r["delta"] == pytest.approx(1 - 1 / math.log2(5))
    assert r["ci_low"] > 0
    r3 = one_row(res, "cand", "ndcg_at_3")
    assert r3["delta"] == 1.0 and r3["p_randomization"] == 1 / (resamples + 1)
    # holm over 2 comparisons
    assert r["p_corrected"] == pytest.approx(2 / (resamples + 1))


def test_better_on_every_query_small_n_is_exact(tmp_path):
    qrels, runs = _dominant_data(12)
    write_data(tmp_path, qrels, runs)
    res = ndcg_mlflow.evaluate(make_spec(["bm25", "cand"], cutoffs=(10,)), base_dir=tmp_path)
    r = one_row(res, "cand")
    assert r["randomization_exact"] is True
    assert r["p_randomization"] == pytest.approx(2 / 2**12)


def test_delta_interval_resamples_the_same_queries_for_both_systems(tmp_path):
    """The candidate equals the baseline except on one query where it is better.

    With the same resampled queries for both systems every resampled difference is
    >= 0, so the interval cannot go below 0 (with independent resamples it would).
    """
    qrels, runs = make_data(30, seed=3)
    cand = copy.deepcopy(runs["bm25"])
    q = "q007"
    best = sorted(qrels[q], key=lambda d: -qrels[q][d])
    cand[q] = best + [d for d in cand[q] if d not in best]
    write_data(tmp_path, qrels, {"bm25": runs["bm25"], "cand": cand})
    for method in ("percentile", "bca"):
        res = ndcg_mlflow.evaluate(make_spec(["bm25", "cand"], method=method), base_dir=tmp_path)
        r = one_row(res, "cand")
        b, c, _, ids = paired(res, "cand")
        d = c - b
        assert np.count_nonzero(d) == 1 and d[list(ids).index(q)] > 0
        assert r["wins"] == 1 and r["ties"] == 29
        assert r["ci_low"] >= 0
        assert r["ci_high"] <= 6 * d.max() / 30
        dist = res.analysis.distributions[("cand", KEY)]
        assert np.all(dist >= 0)
        # the resampled differences are multiples of d/30 (count of q in the resample)
        k = dist * 30 / d.max()
        np.testing.assert_allclose(k, np.round(k), atol=1e-9)


# --------------------------------------------------------------------------- wins and losses


def test_wins_and_losses_against_the_per_query_table_and_files(data40, result40):
    folder, qrels, runs = data40
    res = result40
    assert len(res.analysis.wins_losses) == 4
    for block in res.analysis.wins_losses:
        cand, key = block["candidate"], block["key"]
        cutoff = key.replace("ndcg_at_", "")
        k = int(cutoff)
        assert block["baseline"] == "bm25" and block["cutoff"] == cutoff
        b, c, w, ids = paired(res, cand, cutoff=cutoff)
        d = c - b
        table = sorted(zip(-d, ids, range(len(d))))
        exp_wins = [i for (nd, q, i) in table if -nd > 1e-9][:5]
        table = sorted(zip(d, ids, range(len(d))))
        exp_losses = [i for (dd, q, i) in table if dd < -1e-9][:5]
        r = one_row(res, cand, key)
        assert len(block["wins"]) == min(5, r["wins"])
        assert len(block["losses"]) == min(5, r["losses"])
        for kind, expected in (("wins", exp_wins), ("losses", exp_losses)):
            got = block[kind]
            assert [e["query_id"] for e in got] == [ids[i] for i in expected], (cand, key, kind)
            for e, i in zip(got, expected):
                assert e["delta"] == pytest.approx(d[i], abs=1e-12)
                assert e["baseline_ndcg"] == pytest.approx(b[i], abs=1e-12)
                assert e["candidate_ndcg"] == pytest.approx(c[i], abs=1e-12)
                assert e["weight"] == w[i] == 1.0
                assert e["shown"] == k
                q = e["query_id"]
                for side, system in (("baseline_top", "bm25"), ("candidate_top", cand)):
                    top = e[side]
                    assert [t["doc_id"] for t in top] == runs[system][q][:k]
                    assert [t["rank"] for t in top] == list(range(1, k + 1))
                    assert [t["grade"] for t in top] == [qrels[q].get(doc) for doc in runs[system][q][:k]]
                brel = {x for x in runs["bm25"][q][:k] if qrels[q].get(x, 0) > 0}
                crel = {x for x in runs[cand][q][:k] if qrels[q].get(x, 0) > 0}
                assert e["relevant_entered"] == sorted(crel - brel)
                assert e["relevant_left"] == sorted(brel - crel)
                assert [t["left_top_k"] for t in e["baseline_top"]] == [
                    t["doc_id"] in brel - crel for t in e["baseline_top"]
                ]
                assert [t["entered_top_k"] for t in e["candidate_top"]] == [
                    t["doc_id"] in crel - brel for t in e["candidate_top"]
                ]
        # sorted by difference, largest first
        assert [e["delta"] for e in block["wins"]] == sorted((e["delta"] for e in block["wins"]), reverse=True)
        assert [e["delta"] for e in block["losses"]] == sorted(e["delta"] for e in block["losses"])
    json.loads(res.wins_losses_json)


def test_tied_deltas_are_listed_by_query_id(tmp_path):
    """q000 and q001 are copies: their deltas are equal, and the order breaks the tie by query id."""
    qrels, runs = make_data(24, seed=1)
    write_data(tmp_path, qrels, runs)
    res = ndcg_mlflow.evaluate(make_spec(["bm25", "better"], wins_losses=100, cutoffs=(10,)), base_dir=tmp_path)
    block = res.analysis.wins_losses[0]
    entries = block["wins"] + block["losses"]
    ids = [e["query_id"] for e in entries]
    if "q000" in ids:
        assert ids.index("q001") == ids.index("q000") + 1
    r = one_row(res, "better")
    assert len(block["wins"]) == r["wins"] and len(block["losses"]) == r["losses"]


def test_wins_losses_count_is_limited(data40):
    folder, _, _ = data40
    for n in (0, 1, 3):
        res = ndcg_mlflow.evaluate(
            make_spec(["bm25", "noisy"], wins_losses=n, resamples=100, cutoffs=(10,)), base_dir=folder
        )
        block = res.analysis.wins_losses[0]
        r = one_row(res, "noisy")
        assert len(block["wins"]) == min(n, r["wins"])
        assert len(block["losses"]) == min(n, r["losses"])


def test_relevant_entered_and_left_by_hand(tmp_path):
    # K = 3; qb is the same for both systems (a tie)
    qrels = {"qa": {"A": 3, "B": 2, "C": 1, "D": 0, "E": 1}, "qb": {"P": 1, "R": 0}}
    runs = {
        "bm25": {"qa": ["A", "D", "C", "X", "B"], "qb": ["P", "R"]},
        "cand": {"qa": ["B", "A", "E", "C", "Y"], "qb": ["P", "R"]},
    }
    write_data(tmp_path, qrels, runs)
    res = ndcg_mlflow.evaluate(
        make_spec(["bm25", "cand"], cutoffs=(3,), wins_losses=5, resamples=100), base_dir=tmp_path
    )
    block = res.analysis.wins_losses[0]
    assert block["cutoff"] == "3"
    # gains 2^g - 1: A 7, B 3, C 1, E 1; ideal@3 = 7 + 3/log2(3) + 1/2
    idcg = 7 + 3 / math.log2(3) + 0.5
    base = (7 + 0 + 1 / 2) / idcg
    cand = (3 + 7 / math.log2(3) + 1 / 2) / idcg
    assert block["losses"] == []
    [e] = block["wins"]
    assert e["query_id"] == "qa" and e["weight"] == 1.0 and e["shown"] == 3
    assert e["baseline_ndcg"] == pytest.approx(base) and e["candidate_ndcg"] == pytest.approx(cand)
    assert e["delta"] == pytest.approx(cand - base)
    # relevant in the top 3: baseline {A, C}, candidate {B, A, E}; C is still retrieved (rank 4) but left
    assert e["relevant_entered"] == ["B", "E"]
    assert e["relevant_left"] == ["C"]
    assert [(t["doc_id"], t["grade"]) for t in e["baseline_top"]] == [("A", 3), ("D", 0), ("C", 1)]
    assert [(t["doc_id"], t["grade"]) for t in e["candidate_top"]] == [("B", 2), ("A", 3), ("E", 1)]
    assert [t["left_top_k"] for t in e["baseline_top"]] == [False, False, True]
    assert [t["entered_top_k"] for t in e["candidate_top"]] == [True, False, True]
    r = one_row(res, "cand", "ndcg_at_3")
    assert r["wins"] == 1 and r["ties"] == 1 and r["losses"] == 0
    assert r["randomization_exact"] is True
    assert r["p_randomization"] == 1.0  # 2 queries, one of them a tie: every sign vector reaches |T|
    md = wins_losses_markdown(res, res.analysis)
    assert "| qa |" in md and "⬆ entered" in md and "⬇ left" in md
    # the same pair the other way round is a loss with entered and left swapped
    res2 = ndcg_mlflow.evaluate(
        make_spec(["bm25", "cand"], cutoffs=(3,), baseline="cand", resamples=100), base_dir=tmp_path
    )
    block2 = res2.analysis.wins_losses[0]
    assert block2["wins"] == []
    [e2] = block2["losses"]
    assert e2["delta"] == pytest.approx(base - cand)
    assert e2["relevant_entered"] == ["C"] and e2["relevant_left"] == ["B", "E"]


def test_unjudged_docs_show_no_grade(tmp_path):
    qrels = {"qa": {"A": 2, "B": 1}, "qb": {"C": 1}}
    runs = {"bm25": {"qa": ["Z", "B", "A"], "qb": ["C"]}, "cand": {"qa": ["A", "Z", "B"], "qb": ["C"]}}
    write_data(tmp_path, qrels, runs)
    res = ndcg_mlflow.evaluate(make_spec(["bm25", "cand"], cutoffs=(2,), resamples=100), base_dir=tmp_path)
    [e] = res.analysis.wins_losses[0]["wins"]
    assert [(t["doc_id"], t["grade"]) for t in e["baseline_top"]] == [("Z", None), ("B", 1)]
    assert [(t["doc_id"], t["grade"]) for t in e["candidate_top"]] == [("A", 2), ("Z", None)]
    assert e["relevant_entered"] == ["A"] and e["relevant_left"] == ["B"]


def test_query_missing_from_the_candidate_run(tmp_path):
    """missing_queries: zero: the query scores 0, shows an empty top list, and every relevant doc left."""
    qrels, runs = make_data(25, seed=1)
    miss = copy.deepcopy(runs["better"])
    del miss["q005"]
    write_data(tmp_path, qrels, {"bm25": runs["bm25"], "miss": miss})
    res = ndcg_mlflow.evaluate(make_spec(["bm25", "miss"], cutoffs=(10, "all"), wins_losses=100), base_dir=tmp_path)
    for block in res.analysis.wins_losses:
        [e] = [e for e in block["wins"] + block["losses"] if e["query_id"] == "q005"]
        assert e in block["losses"]
        assert e["candidate_ndcg"] == 0 and e["candidate_top"] == []
        top = runs["bm25"]["q005"][:10]
        assert [t["doc_id"] for t in e["baseline_top"]] == top
        assert e["relevant_left"] == sorted(d for d in top if qrels["q005"].get(d, 0) > 0)
        assert e["relevant_entered"] == []
        if block["key"] == "ndcg_at_all":
            assert block["cutoff"] == "all" and e["shown"] == 10  # display depth for 'all'


def test_comparison_without_paired_queries(tmp_path):
    """A candidate with no evaluated query (ideal: candidates, nothing relevant retrieved) gets a NaN row."""
    qrels, runs = make_data(25, seed=1)
    nothing = {q: [d for d in v if qrels[q].get(d, 0) == 0] or [f"{q}-junk"] for q, v in runs["bm25"].items()}
    write_data(tmp_path, qrels, {"bm25": runs["bm25"], "nothing": nothing, "better": runs["better"]})
    res = ndcg_mlflow.evaluate(
        make_spec(["bm25", "nothing", "better"], ideal="candidates", cutoffs=(10,)), base_dir=tmp_path
    )
    r = one_row(res, "nothing")
    assert r["n_paired"] == 0 and r["wins"] == r["ties"] == r["losses"] == 0
    for k in ("delta", "ci_low", "ci_high", "p_randomization", "p_t_test", "p_corrected"):
        assert math.isnan(r[k])
    e = res.summary["systems"]["nothing"][KEY]
    assert math.isnan(e["ci_low"]) and e["n_eff"] == 0
    # the empty comparison stays in the family, counted as p = 1: Holm over 2 members gives 'better' 2 p
    rb = one_row(res, "better")
    assert rb["p_corrected"] == min(1.0, 2 * rb["p_randomization"])
    assert res.analysis.correction_family["without_p_value"] == 1
    data = json.loads(res.summary_json)
    [row] = [x for x in data["comparisons"] if x["candidate"] == "nothing"]
    assert row["delta"] is None
    json.loads(res.wins_losses_json)


def test_tie_tolerance(tmp_path):
    qrels, runs = make_data(30, seed=5)
    write_data(tmp_path, qrels, runs)
    base = ndcg_mlflow.evaluate(make_spec(["bm25", "noisy"], cutoffs=(10,), resamples=100), base_dir=tmp_path)
    b, c, _, _ = paired(base, "noisy")
    d = c - b
    tol = float(np.median(np.abs(d[d != 0])))
    res = ndcg_mlflow.evaluate(
        make_spec(["bm25", "noisy"], cutoffs=(10,), resamples=100, tie_tolerance=tol, wins_losses=100),
        base_dir=tmp_path,
    )
    r = one_row(res, "noisy")
    assert r["wins"] == int(np.sum(d > tol)) and r["losses"] == int(np.sum(d < -tol))
    assert r["ties"] == int(np.sum(np.abs(d) <= tol))
    block = res.analysis.wins_losses[0]
    assert all(e["delta"] > tol for e in block["wins"]) and all(e["delta"] < -tol for e in block["losses"])
    assert len(block["wins"]) == r["wins"] and len(block["losses"]) == r["losses"]


# --------------------------------------------------------------------------- queries valid for both


def test_comparison_uses_queries_valid_for_both(tmp_path):
    """ideal: candidates + empty_ideal: exclude leaves out, per system, queries where it retrieved nothing relevant."""
    qrels, runs = make_data(30, seed=4)
    base = copy.deepcopy(runs["bm25"])
    cand = copy.deepcopy(runs["better"])
    for i, q in enumerate(sorted(qrels)):
        if i % 5 == 0:  # baseline retrieves only non-relevant documents here
            base[q] = [d for d in base[q] if qrels[q].get(d, 0) == 0] or [f"{q}-junk"]
        if i % 7 == 3:  # the candidate here
            cand[q] = [d for d in cand[q] if qrels[q].get(d, 0) == 0] or [f"{q}-junk"]
    write_data(tmp_path, qrels, {"bm25": base, "cand": cand})
    res = ndcg_mlflow.evaluate(make_spec(["bm25", "cand"], ideal="candidates", cutoffs=(10,)), base_dir=tmp_path)
    xb, _ = per_query_matrix(res, "bm25")
    xc, _ = per_query_matrix(res, "cand")
    assert xb.isna().sum() >= 6 and xc.isna().sum() >= 4
    b, c, _, _ = paired(res, "cand")
    r = one_row(res, "cand")
    assert r["n_paired"] == b.size == int((xb.notna() & xc.notna()).sum())
    assert r["baseline_mean"] == pytest.approx(b.mean())  # over the paired queries, not all of bm25's
    assert r["candidate_mean"] == pytest.approx(c.mean())
    assert r["delta"] == pytest.approx((c - b).mean())
    assert r["wins"] + r["ties"] + r["losses"] == b.size
    assert r["p_t_test"] == pytest.approx(ss.ttest_rel(c, b).pvalue, rel=1e-9)
    # per-system intervals use each system's own evaluated queries
    s = res.summary["systems"]
    assert s["bm25"][KEY]["n_eff"] == pytest.approx(xb.notna().sum())
    assert s["bm25"][KEY]["mean"] == pytest.approx(xb.dropna().mean())
    assert s["bm25"][KEY]["ci_low"] <= s["bm25"][KEY]["mean"] <= s["bm25"][KEY]["ci_high"]
    block = res.analysis.wins_losses[0]
    for e in block["wins"] + block["losses"]:
        assert not math.isnan(e["baseline_ndcg"]) and not math.isnan(e["candidate_ndcg"])


# --------------------------------------------------------------------------- weights


def test_weighted_queries(tmp_path):
    qrels, runs = make_data(30, seed=6)
    r = np.random.default_rng(0)
    weights = {q: float(np.round(r.uniform(0.05, 3.0), 3)) for q in qrels}
    write_data(tmp_path, qrels, runs, weights=weights)
    res = ndcg_mlflow.evaluate(
        make_spec(["bm25", "better"], weights="weights.tsv", cutoffs=(10,), method="bca"), base_dir=tmp_path
    )
    w = np.array([weights[q] for q in sorted(qrels)])
    e = res.summary["systems"]["bm25"][KEY]
    assert e["n_eff"] == pytest.approx(w.sum() ** 2 / (w**2).sum())
    assert e["n_eff"] < 30
    x, ww = per_query_matrix(res, "bm25")
    np.testing.assert_allclose(ww.to_numpy(), w)
    assert e["mean"] == pytest.approx(np.sum(w * x.to_numpy()) / w.sum())
    assert e["ci_low"] <= e["mean"] <= e["ci_high"]
    b, c, wp, ids = paired(res, "better")
    d = c - b
    row = one_row(res, "better")
    assert row["delta"] == pytest.approx(np.sum(wp * d) / wp.sum())
    assert row["baseline_mean"] == pytest.approx(np.sum(wp * b) / wp.sum())
    m = np.sum(wp * d) / wp.sum()
    # d_z's weighted sd: sum w (d - m)^2 / (W - sum w^2 / W), unbiased whatever the weights
    sd = math.sqrt(np.sum(wp * (d - m) ** 2) / (wp.sum() - np.sum(wp**2) / wp.sum()))
    assert row["effect_size_dz"] == pytest.approx(m / sd, rel=1e-10)
    # the t-test: weighted mean over its bias-corrected standard error; degrees of freedom the smaller of
    # Satterthwaite's for that standard error, tr(A)^2 / tr(A^2) with se^2 = d' A d, and n_eff - 1
    h = wp / wp.sum()
    lam = h**2 / (1 - 2 * h + np.sum(h**2))
    se_t = math.sqrt(np.sum(lam * (d - m) ** 2))
    M = np.eye(h.size) - np.outer(np.ones(h.size), h)
    A = M.T @ np.diag(lam) @ M
    n_eff = wp.sum() ** 2 / np.sum(wp**2)
    df = min(np.trace(A) ** 2 / np.trace(A @ A), n_eff - 1)
    assert df < n_eff - 1.5
    assert row["p_t_test"] == pytest.approx(2 * ss.t.sf(abs(m / se_t), df), rel=1e-9)
    assert row["ci_low"] <= row["delta"] <= row["ci_high"]
    # the weighted SE is larger than the unweighted one would be for n_eff < n (roughly)
    se_w = math.sqrt(30 / 29 * np.sum(wp**2 * (d - m) ** 2)) / wp.sum()
    assert row["std_error"] == pytest.approx(se_w, rel=0.2)
    for entry in res.analysis.wins_losses[0]["wins"] + res.analysis.wins_losses[0]["losses"]:
        assert entry["weight"] == weights[entry["query_id"]]


def test_weighted_identical_systems_still_ties(tmp_path):
    qrels, runs = make_data(25, seed=7)
    weights = {q: 1.0 + (i % 4) for i, q in enumerate(sorted(qrels))}
    write_data(tmp_path, qrels, {"bm25": runs["bm25"], "copy": runs["bm25"]}, weights=weights)
    res = ndcg_mlflow.evaluate(make_spec(["bm25", "copy"], weights="weights.tsv", cutoffs=(10,)), base_dir=tmp_path)
    r = one_row(res, "copy")
    assert r["delta"] == 0 and r["ci_low"] == 0 and r["ci_high"] == 0
    assert r["p_randomization"] == 1.0 and r["ties"] == 25


# --------------------------------------------------------------------------- reproducibility


def _numbers(res, cand):
    rs = {r["key"]: {k: v for k, v in r.items()} for r in rs_of(res, cand)}
    wl = [b for b in res.analysis.wins_losses if b["candidate"] == cand]
    sysnums = {s: res.summary["systems"][s] for s in ("bm25", cand)}
    return rs, wl, sysnums


def rs_of(res, cand):
    return [r for r in res.analysis.comparisons if r["candidate"] == cand]


def _assert_same(a, b):
    """Exact equality, NaN equal to NaN."""
    assert type(a) is type(b) or (isinstance(a, (int, float)) and isinstance(b, (int, float)))
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b)
    else:
        assert a == b, (a, b)


@pytest.mark.parametrize("method", ["percentile", "bca", "studentized"])
def test_same_seed_same_numbers_with_two_or_three_systems(data40, method):
    folder, _, _ = data40
    two = ndcg_mlflow.evaluate(make_spec(["bm25", "better"], method=method, cutoffs=(5, 10, "all")), base_dir=folder)
    three = ndcg_mlflow.evaluate(
        make_spec(["bm25", "better", "noisy"], method=method, cutoffs=(5, 10, "all")), base_dir=folder
    )
    again = ndcg_mlflow.evaluate(make_spec(["bm25", "better"], method=method, cutoffs=(5, 10, "all")), base_dir=folder)
    a2, w2, s2 = _numbers(two, "better")
    a3, w3, s3 = _numbers(three, "better")
    aa, wa, sa = _numbers(again, "better")
    _assert_same(a2, aa)
    _assert_same(s2, sa)
    # the third system changes the family size, hence only the corrected p-value
    for key in a2:
        a2[key].pop("p_corrected"), a3[key].pop("p_corrected")
    _assert_same(a2, a3)
    _assert_same(w2, w3)
    _assert_same(s2, s3)


@pytest.mark.parametrize("method", ["percentile", "bca", "studentized"])
def test_same_seed_same_numbers_many_queries_two_or_three_systems(tmp_path, method):
    """Same as above with 200 queries (larger matrix products)."""
    qrels, runs = make_data(200, seed=11, pool=12, depth=10)
    write_data(tmp_path, qrels, runs)
    kw = dict(method=method, cutoffs=(10,), resamples=1100, wins_losses=0, test="t_test")
    two = ndcg_mlflow.evaluate(make_spec(["bm25", "better"], **kw), base_dir=tmp_path)
    three = ndcg_mlflow.evaluate(make_spec(["bm25", "better", "noisy"], **kw), base_dir=tmp_path)
    a2, _, s2 = _numbers(two, "better")
    a3, _, s3 = _numbers(three, "better")
    for key in a2:
        a2[key].pop("p_corrected"), a3[key].pop("p_corrected")
    _assert_same(s2, s3)
    _assert_same(a2, a3)


def test_same_seed_same_numbers_whatever_the_chunk(data40, monkeypatch):
    folder, _, _ = data40
    spec = make_spec(["bm25", "better", "noisy"], method="bca", resamples=1000)
    ref = ndcg_mlflow.evaluate(spec, base_dir=folder)
    monkeypatch.setattr(stats, "bootstrap_means", functools.partial(stats.bootstrap_means, chunk=7))
    monkeypatch.setattr(stats, "randomization_tests", functools.partial(stats.randomization_tests, chunk=13))
    chunked = ndcg_mlflow.evaluate(spec, base_dir=folder)
    _assert_same(ref.analysis.comparisons, chunked.analysis.comparisons)
    _assert_same(ref.summary["systems"], chunked.summary["systems"])


def test_another_seed_differs_only_by_monte_carlo_error(data40):
    folder, _, _ = data40
    a = ndcg_mlflow.evaluate(make_spec(["bm25", "better", "noisy"], seed=1, resamples=4000), base_dir=folder)
    b = ndcg_mlflow.evaluate(make_spec(["bm25", "better", "noisy"], seed=2, resamples=4000), base_dir=folder)
    changed = 0
    for ra, rb in zip(a.analysis.comparisons, b.analysis.comparisons):
        for k in (
            "delta",
            "baseline_mean",
            "candidate_mean",
            "p_t_test",
            "effect_size_dz",
            "wins",
            "ties",
            "losses",
            "relative_delta",
        ):
            assert ra[k] == rb[k]  # not random
        for k in ("ci_low", "ci_high"):
            assert ra[k] == pytest.approx(rb[k], abs=0.01)
            changed += ra[k] != rb[k]
        assert ra["std_error"] == pytest.approx(rb["std_error"], rel=0.08)
        assert abs(ra["p_randomization"] - rb["p_randomization"]) < 0.03
    assert changed > 0
    for name in ("bm25", "better", "noisy"):
        ea, eb = a.summary["systems"][name][KEY], b.summary["systems"][name][KEY]
        assert ea["mean"] == eb["mean"] and ea["n_eff"] == eb["n_eff"]
        assert ea["ci_low"] != eb["ci_low"] or ea["ci_high"] != eb["ci_high"]
        assert ea["ci_low"] == pytest.approx(eb["ci_low"], abs=0.01)
    assert a.analysis.wins_losses == b.analysis.wins_losses


# --------------------------------------------------------------------------- spec errors and absent sections


def test_comparison_without_uncertainty_is_a_spec_error(data40):
    folder, _, _ = data40
    with pytest.raises(SpecError, match="uncertainty") as err:
        ndcg_mlflow.evaluate(make_spec(["bm25", "better"], uncertainty=False), base_dir=folder)
    assert err.value.path == "comparison"


def test_unknown_baseline_is_a_spec_error_with_did_you_mean(data40):
    folder, _, _ = data40
    with pytest.raises(SpecError, match=r"did you mean 'bm25'") as err:
        ndcg_mlflow.evaluate(make_spec(["bm25", "better"], baseline="bm52"), base_dir=folder)
    assert err.value.path == "comparison.baseline"


@pytest.mark.parametrize(
    "section, key, value, path",
    [
        ("comparison", "correction", "holms", "comparison.correction"),
        ("comparison", "test", "wilcoxon", "comparison.test"),
        ("comparison", "tie_tolerance", -1.0, "comparison.tie_tolerance"),
        ("uncertainty", "method", "bootstrap-t", "uncertainty.method"),
        ("uncertainty", "confidence", 95, "uncertainty.confidence"),
        ("uncertainty", "resamples", 10, "uncertainty.resamples"),
    ],
)
def test_bad_analysis_settings_are_spec_errors(data40, section, key, value, path):
    folder, _, _ = data40
    spec = make_spec(["bm25", "better"])
    spec[section][key] = value
    with pytest.raises(SpecError) as err:
        ndcg_mlflow.evaluate(spec, base_dir=folder)
    assert err.value.path == path


def test_uncertainty_without_comparison(data40):
    folder, _, _ = data40
    res = ndcg_mlflow.evaluate(make_spec(["bm25", "better"], comparison=False), base_dir=folder)
    assert res.analysis.comparisons == [] and res.summary["comparisons"] == []
    assert res.analysis.wins_losses == []
    e = res.summary["systems"]["better"][KEY]
    assert e["ci_low"] <= e["mean"] <= e["ci_high"]
    # the per-system numbers do not depend on whether a comparison is declared
    with_cmp = ndcg_mlflow.evaluate(make_spec(["bm25", "better"]), base_dir=folder)
    _assert_same(res.summary["systems"], with_cmp.summary["systems"])


def test_no_uncertainty_no_analysis(data40):
    folder, _, _ = data40
    res = ndcg_mlflow.evaluate(make_spec(["bm25", "better"], comparison=False, uncertainty=False), base_dir=folder)
    assert res.summary["comparisons"] == []
    assert "ci_low" not in res.summary["systems"]["bm25"][KEY]


# --------------------------------------------------------------------------- edges: constant series, tiny n


def _constant_case(folder, nq: int, weights: bool):
    """Every query: two documents of grade 1, the run shows an unjudged one, then one of them: the same nDCG
    (not a binary fraction) on every query; a second system varies, so the comparison is not constant."""
    qrels = {f"q{i:02d}": {f"q{i:02d}-a": 1, f"q{i:02d}-b": 1} for i in range(nq)}
    runs = {
        "flat": {q: [f"{q}-x", f"{q}-a"] for q in qrels},
        "bm25": {q: ([f"{q}-a", f"{q}-x"] if i % 2 else [f"{q}-x", f"{q}-y", f"{q}-b"]) for i, q in enumerate(qrels)},
    }
    r = np.random.default_rng(11)
    w = {q: float(np.round(r.uniform(0.1, 3.0), 3)) for q in qrels} if weights else None
    write_data(folder, qrels, runs, weights=w)


@pytest.mark.parametrize("method", ["percentile", "bca", "studentized"])
@pytest.mark.parametrize("nq, weights", [(3, False), (15, True)])
def test_constant_series_has_a_point_interval_and_a_report(tmp_path, monkeypatch, method, nq, weights):
    from ndcg_mlflow.cli import main

    monkeypatch.chdir(tmp_path)
    _constant_case(tmp_path, nq, weights)
    spec = make_spec(
        ["bm25", "flat"], cutoffs=(10,), resamples=300, method=method, weights="weights.tsv" if weights else "uniform"
    )
    res = ndcg_mlflow.evaluate(spec, base_dir=tmp_path)
    e = res.summary["systems"]["flat"][KEY]
    assert e["n_evaluated"] == nq
    # the interval is the mean itself, bit for bit, and the bootstrap spread is exactly 0
    assert e["ci_low"] == e["mean"] and e["ci_high"] == e["mean"] and e["std_error"] == 0.0
    assert res.analysis.intervals["flat"][KEY]["std_error"] == 0.0
    # ... while the varying system keeps a real interval (below STUDENTIZED_MIN_N_EFF queries: undefined)
    b = res.summary["systems"]["bm25"][KEY]
    if method == "studentized" and nq < stats.STUDENTIZED_MIN_N_EFF:
        assert math.isnan(b["ci_low"]) and math.isnan(b["ci_high"])
    else:
        assert b["ci_low"] < b["mean"] < b["ci_high"] and b["std_error"] > 0

    import yaml

    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    assert main(["run", str(tmp_path / "spec.yaml"), "--no-mlflow", "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    f = summary["systems"]["flat"][KEY]
    assert f["ci_low"] == f["mean"] == f["ci_high"] and f["std_error"] == 0
    assert (out / "report.html").is_file()


def test_report_error_bars_tolerate_intervals_a_rounding_error_off(tmp_path, monkeypatch):
    """figures() draws whatever the summary says: an interval one ulp inside its mean (a bar of length 0 through
    the mean, never a negative one) or undefined (no bar, the mean still drawn)."""
    import re

    from ndcg_mlflow.cli import main
    from ndcg_mlflow.render.report import figures, load_bundle, write_reports

    monkeypatch.chdir(tmp_path)
    _constant_case(tmp_path, 6, False)
    import yaml

    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(make_spec(["bm25", "flat"], cutoffs=(5, 10), resamples=200)))
    out = tmp_path / "out"
    assert main(["run", str(tmp_path / "spec.yaml"), "--no-mlflow", "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    m = summary["systems"]["flat"]["ndcg_at_5"]
    m["ci_low"] = math.nextafter(m["mean"], 1.0)  # as the old rounding produced
    m["ci_high"] = math.nextafter(m["mean"], 0.0)
    summary["systems"]["flat"][KEY]["ci_low"] = None  # undefined
    summary["systems"]["flat"][KEY]["ci_high"] = None
    (out / "summary.json").write_text(json.dumps(summary))
    figs = figures(load_bundle(out))
    svg = figs["ndcg_by_cutoff"]
    bars = re.findall(
        r"<g class=\"error-bar\"><title>([^<]*)</title><line class=\"mark\" x1=\"[^\"]*\" "
        r"y1=\"([^\"]*)\" x2=\"[^\"]*\" y2=\"([^\"]*)\"",
        svg,
    )
    named = {t.split(":")[0]: (float(y1), float(y2)) for t, y1, y2 in bars}
    assert set(named) == {"bm25, nDCG@5", "bm25, nDCG@10", "flat, nDCG@5"}  # flat's other: undefined
    y1, y2 = named["flat, nDCG@5"]
    assert y1 == y2  # the interval collapses onto the mean: a bar of length 0
    assert all(a >= b for a, b in named.values())  # from the lower bound (larger y) up to the upper one
    assert svg.count("<title>flat, nDCG@") == 2 + 1  # both means drawn as points, one bar
    write_reports(out)
    assert (out / "figures" / "ndcg_by_cutoff.svg").read_text(encoding="utf-8") == svg + "\n"


def _small_scores(n: int, seed: int = 0):
    r = np.random.default_rng(seed)
    return r.beta(0.5, 0.5, n), r.uniform(0.5, 2.0, n)


@pytest.mark.parametrize("n", [2, 3, 4, 9])
def test_studentized_is_undefined_below_its_minimum(n):
    x, w = _small_scores(n, n)
    boot = stats.bootstrap_means(x, w, resamples=500, rng=np.random.default_rng(1), studentized=True)
    lo, hi = stats.interval(boot, x, w, confidence=0.95, method="studentized")
    assert n < stats.STUDENTIZED_MIN_N_EFF
    assert math.isnan(lo[0]) and math.isnan(hi[0])
    # the other methods and the standard error stay defined
    plo, phi = stats.interval(boot, x, w, confidence=0.95, method="percentile")
    assert plo[0] < boot.theta[0] < phi[0] and stats.standard_error(boot, x)[0] > 0


def test_studentized_is_undefined_below_its_minimum_effective_number_of_queries():
    """15 queries whose lognormal weights (sigma 1) leave fewer than 10 effective ones: undefined, as below 10
    queries; the same queries with uniform weights keep their interval."""
    r = np.random.default_rng(12)
    tried = 0
    for _ in range(200):
        x = r.beta(0.6, 1.8, 15)
        w = np.exp(r.normal(0, 1, 15))
        if stats.effective_n(w) >= stats.STUDENTIZED_MIN_N_EFF:
            continue
        tried += 1
        boot = stats.bootstrap_means(x, w, resamples=300, rng=np.random.default_rng(1), studentized=True)
        lo, hi = stats.interval(boot, x, w, confidence=0.95, method="studentized")
        assert math.isnan(lo[0]) and math.isnan(hi[0]), stats.effective_n(w)
        ones = np.ones(15)
        boot = stats.bootstrap_means(x, ones, resamples=300, rng=np.random.default_rng(1), studentized=True)
        lo, hi = stats.interval(boot, x, ones, confidence=0.95, method="studentized")
        assert lo[0] < boot.theta[0] < hi[0]
    assert tried > 50


def test_an_interval_never_leaves_the_range_of_what_it_estimates():
    """A studentized interval of a mean near 0 (skewed values) reaches below 0 unclipped: the mean's interval is
    clipped to [0, 1], a difference's to [-1, 1]; the percentile interval is inside already and unchanged."""
    x = np.array([0.0] * 14 + [1.0])
    w = np.ones_like(x)
    boot = stats.bootstrap_means(x, w, resamples=2000, rng=np.random.default_rng(3), studentized=True)
    raw_lo, raw_hi = stats.interval(boot, x, w, confidence=0.95, method="studentized")
    assert raw_lo[0] < 0  # (what the clipping is for)
    lo, hi = stats.interval(boot, x, w, confidence=0.95, method="studentized", bounds=(0.0, 1.0))
    assert lo[0] == 0.0 and hi[0] == raw_hi[0]
    boot = stats.bootstrap_means(-x, w, resamples=2000, rng=np.random.default_rng(3), studentized=True)
    raw_lo, raw_hi = stats.interval(boot, -x, w, confidence=0.95, method="studentized")
    assert raw_hi[0] > 0
    lo, hi = stats.interval(boot, -x, w, confidence=0.95, method="studentized", bounds=(-1.0, 0.0))
    assert hi[0] == 0.0 and lo[0] == raw_lo[0]
    for method in ("percentile", "bca"):
        plain = stats.interval(boot, -x, w, confidence=0.95, method=method)
        clipped = stats.interval(boot, -x, w, confidence=0.95, method=method, bounds=(-1.0, 1.0))
        np.testing.assert_array_equal(plain, clipped)


def test_studentized_intervals_of_an_evaluation_stay_in_range(tmp_path):
    """Every reported studentized interval, of a mean or of a difference, lies in its range ([0, 1], [-1, 1]), or is
    undefined where n_eff is below the minimum."""
    r = np.random.default_rng(5)
    n = 30
    folder = tmp_path
    qrels, runs = [], {"bm25": [], "flat": []}
    for i in range(n):
        q = f"q{i:02d}"
        qrels += [f"{q} 0 d{j} {int(j == 0) * 3}\n" for j in range(6)]
        for name in runs:
            order = r.permutation(6) if name == "bm25" or r.random() < 0.8 else np.arange(6)
            runs[name] += [f"{q} Q0 d{j} {k + 1} {10 - k} t\n" for k, j in enumerate(order)]
    (folder / "qrels.txt").write_text("".join(qrels))
    for name, lines in runs.items():
        (folder / f"{name}.run").write_text("".join(lines))
    spec = make_spec(["bm25", "flat"], cutoffs=(1, 3), resamples=400, method="studentized")
    res = ndcg_mlflow.evaluate(spec, base_dir=folder)
    for entries in res.summary["systems"].values():
        for e in entries.values():
            assert 0 <= e["ci_low"] <= e["ci_high"] <= 1
    for c in res.analysis.comparisons:
        assert -1 <= c["ci_low"] <= c["ci_high"] <= 1


@pytest.mark.parametrize("method", ["studentized"])
def test_studentized_at_exactly_the_minimum_effective_number_of_queries(tmp_path, method):
    """One query of weight 5 and 15 of weight 1: n_eff = 20^2 / 40 = 10 exactly, the minimum, so the studentized
    interval is defined; the weights over their largest (0.2 and 1, as every figure takes them) put Kish's formula
    a few units in the last place below 10, which must not make it undefined. Written out: the same interval
    from the weights as given."""
    r = np.random.default_rng(8)
    n = 16
    qrels, runs = [], {"bm25": [], "flat": []}
    for i in range(n):
        q = f"q{i:02d}"
        qrels += [f"{q} 0 d{j} {int(j == 0) * 3}\n" for j in range(6)]
        for name in runs:
            order = r.permutation(6)
            runs[name] += [f"{q} Q0 d{j} {k + 1} {10 - k} t\n" for k, j in enumerate(order)]
    (tmp_path / "qrels.txt").write_text("".join(qrels))
    for name, lines in runs.items():
        (tmp_path / f"{name}.run").write_text("".join(lines))
    (tmp_path / "weights.tsv").write_text("".join(f"q{i:02d}\t{5 if i == 0 else 1}\n" for i in range(n)))
    spec = make_spec(["bm25", "flat"], cutoffs=(3,), resamples=400, method=method, weights="weights.tsv")
    res = ndcg_mlflow.evaluate(spec, base_dir=tmp_path)
    w = np.array([5.0] + [1.0] * (n - 1))
    assert stats.effective_n(w) == stats.STUDENTIZED_MIN_N_EFF
    e = res.summary["systems"]["bm25"]["ndcg_at_3"]
    assert e["n_evaluated"] == n
    assert 0 <= e["ci_low"] < e["mean"] < e["ci_high"] <= 1
    c = res.analysis.comparisons[0]
    assert -1 <= c["ci_low"] <= c["delta"] <= c["ci_high"] <= 1 and c["ci_low"] < c["ci_high"]
    assert list(res.query_ids) == [f"q{i:02d}" for i in range(n)]
    x = res.systems["bm25"].result.ndcg[:, :1]
    boot = stats.bootstrap_means(x, w, resamples=300, rng=np.random.default_rng(1), studentized=True)
    given = stats.interval(boot, x, w, confidence=0.95, method="studentized")
    over_largest = stats.interval(boot, x, w / 5, confidence=0.95, method="studentized")
    assert np.isfinite(given).all() and np.isfinite(over_largest).all()
    np.testing.assert_allclose(given, over_largest, rtol=1e-12)


# --------------------------------------------------------------------------- what the documentation states at the edges


def _edge_spec(metric: dict, weights="uniform") -> dict:
    return {
        "spec_version": 1,
        "name": "edges",
        "metric": metric,
        "queries": {"weights": weights},
        "data": {"qrels": "qrels.txt", "systems": {"a": "a.run"}},
    }


def test_negative_ideal_dcg_counts_as_empty_ideal(tmp_path):
    """A gain table may give negative gains: an ideal DCG below 0 is treated as an empty ideal (not divided)."""
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq1 0 d2 0\nq2 0 e1 2\nq2 0 e2 1\n")
    (tmp_path / "a.run").write_text("q1 Q0 d1 1 2 a\nq1 Q0 d2 2 1 a\nq2 Q0 e2 1 2 a\nq2 Q0 e1 2 1 a\n")
    metric = {
        "gain": {0: 0, 1: -1, 2: 3},
        "cutoffs": [5],
        "discount": "log2",
        "ties": "displayed_order",
        "ideal": "judged_catalog",
        "empty_ideal": "exclude",
        "unjudged": "zero",
        "missing_queries": "zero",
    }
    res = ndcg_mlflow.evaluate(_edge_spec(metric), base_dir=tmp_path)
    pq = res.per_query.set_index("query_id")
    assert pq.loc["q1", "idcg"] == pytest.approx(-1 / math.log2(3))  # the best order (d2, d1) is below 0
    assert pq.loc["q1", "status"] == "empty_ideal" and math.isnan(pq.loc["q1", "ndcg"])  # not -1 / -1 = 1
    assert pq.loc["q2", "status"] == "ok"
    e = res.summary["systems"]["a"]["ndcg_at_5"]
    assert e["n_empty_ideal"] == 1 and e["n_evaluated"] == 1
    metric["empty_ideal"] = "zero"
    res0 = ndcg_mlflow.evaluate(_edge_spec(metric), base_dir=tmp_path)
    assert res0.per_query.set_index("query_id").loc["q1", "ndcg"] == 0.0


def test_missing_rows_carry_dcg_zero_and_coverage_is_an_unweighted_mean_over_returned_queries(tmp_path):
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq2 0 e1 1\nq3 0 f1 1\nq3 0 f2 1\n")
    # q1: 1 of 2 shown judged; q3: 2 of 2 judged; q2 missing from the run
    (tmp_path / "a.run").write_text("q1 Q0 d1 1 2 a\nq1 Q0 x 2 1 a\nq3 Q0 f1 1 2 a\nq3 Q0 f2 2 1 a\n")
    (tmp_path / "weights.tsv").write_text("query_id\tweight\nq1\t1\nq2\t5\nq3\t9\n")
    for missing in ("zero", "exclude"):
        metric = {"preset": "trec_eval", "cutoffs": [5], "missing_queries": missing}
        res = ndcg_mlflow.evaluate(_edge_spec(metric, weights="weights.tsv"), base_dir=tmp_path)
        pq = res.per_query.set_index("query_id")
        assert pq.loc["q2", "status"] == "missing" and pq.loc["q2", "dcg"] == 0.0
        assert math.isnan(pq.loc["q2", "judged_coverage"])
        e = res.summary["systems"]["a"]["ndcg_at_5"]
        assert e["judged_coverage"] == pytest.approx((0.5 + 1.0) / 2)  # not weighted (1, 9), not over q2


def test_trec_eval_preset_equals_ir_measures_per_query_and_in_the_mean_only_with_missing_zero(tmp_path):
    ir_measures = pytest.importorskip("ir_measures")
    qrels = "q1 0 d1 2\nq1 0 d2 1\nq1 0 d3 0\nq2 0 e1 1\nq3 0 f1 3\nq3 0 f2 1\n"
    run = "q1 Q0 d2 1 3 a\nq1 Q0 x 2 2 a\nq1 Q0 d1 3 1 a\nq3 Q0 f2 1 2 a\nq3 Q0 f1 2 1 a\n"  # q2 missing
    (tmp_path / "qrels.txt").write_text(qrels)
    (tmp_path / "a.run").write_text(run)
    measure = ir_measures.nDCG @ 10
    q = list(ir_measures.read_trec_qrels(qrels))
    r = list(ir_measures.read_trec_run(run))
    theirs = {m.query_id: m.value for m in ir_measures.iter_calc([measure], q, r)}
    assert theirs["q2"] == 0.0  # a judged query missing from the run scores 0
    their_mean = ir_measures.calc_aggregate([measure], q, r)[measure]
    means = {}
    for missing in ("exclude", "zero"):  # the preset's default, and trec_eval -c
        res = ndcg_mlflow.evaluate(
            _edge_spec({"preset": "trec_eval", "cutoffs": [10], "missing_queries": missing}), base_dir=tmp_path
        )
        ours = res.per_query.set_index("query_id")["ndcg"]
        for qid in ("q1", "q3"):
            assert ours[qid] == pytest.approx(theirs[qid], abs=1e-12)
        means[missing] = res.mean("a", 10)
    assert means["zero"] == pytest.approx(their_mean, abs=1e-12)
    assert abs(means["exclude"] - their_mean) > 0.1


def test_one_dominant_weight_gives_no_t_test_and_a_sane_effect_size(tmp_path):
    """Weights [1e12, 1, 1, ...]: the weighted mean rests on one query (n_eff ~ 1), so the t-test is undefined
    (NaN, was p ~ 1e-74) and d_z stays of the order of the differences' spread (was ~ -1.9e5)."""
    qrels, runs = make_data(12, seed=3)
    weights = {q: (1e12 if i == 5 else 1.0) for i, q in enumerate(sorted(qrels))}
    write_data(tmp_path, qrels, runs, weights=weights)
    res = ndcg_mlflow.evaluate(
        make_spec(["bm25", "noisy"], weights="weights.tsv", cutoffs=(10,), test="t_test"), base_dir=tmp_path
    )
    row = one_row(res, "noisy")
    assert row["n_paired"] == 12 and math.isnan(row["p_t_test"]) and math.isnan(row["p_corrected"])
    b, c, wp, _ = paired(res, "noisy")
    d = c - b
    assert np.ptp(d) > 0
    m = np.sum(wp * d) / wp.sum()
    sd = math.sqrt(np.sum(wp * (d - m) ** 2) / (wp.sum() - np.sum(wp**2) / wp.sum()))
    assert row["effect_size_dz"] == pytest.approx(m / sd, rel=1e-4)  # W - sum w^2 / W loses digits here
    assert abs(row["effect_size_dz"]) < 5
