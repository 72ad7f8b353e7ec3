"""Segments, guardrails, tail risk and planning figures of an evaluation, each pinned against an independent
computation: a per-segment figure against the same evaluation restricted to that segment's queries (the same seed
rule makes them equal), means and shares against ``per_query.csv`` read with pandas, URisk and TRisk against the
papers' formulas written here, the correction against Holm's procedure written here."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import SEGMENTS, examples, segments_data, segments_spec
from hypothesis import given, settings
from hypothesis import strategies as hst
from scipy import stats as st

import ndcg_mlflow
from ndcg_mlflow.cli import EXIT_DECISION, main
from ndcg_mlflow.render.words import consistency_note
from ndcg_mlflow.statistics.segments import consistency, stratified_indices


@pytest.fixture
def data(tmp_path: Path) -> Path:
    segments_data(tmp_path)
    return tmp_path


def test_segment_figures_equal_the_evaluation_restricted_to_the_segment(data: Path) -> None:
    """A segment's mean, interval, difference, paired interval and raw p-values are those of the same spec with
    ``queries.set`` = the segment's queries (the resampling is seeded by the exact list of resampled queries)."""
    result = ndcg_mlflow.evaluate(segments_spec(data))
    a = result.analysis
    for seg in SEGMENTS:
        ids = [q for q in result.query_ids if q.startswith(seg + "-")]
        (data / f"{seg}.set").write_text("".join(f"{q}\n" for q in ids))
        alone = ndcg_mlflow.evaluate(segments_spec(data, queries__segments=None, queries__set=f"{seg}.set"))
        for name in ("base", "better", "other"):
            for key in ("ndcg_at_5", "ndcg_at_10"):
                got = a.segments[seg][name][key]
                want = alone.summary["systems"][name][key]
                assert got["mean"] == want["mean"]
                assert (got["ci_low"], got["ci_high"]) == (want["ci_low"], want["ci_high"])
                assert got["n"] == want["n_evaluated"]
        for c in a.segment_comparisons:
            if c["segment"] != seg:
                continue
            w = next(x for x in alone.analysis.comparisons if (x["candidate"], x["key"]) == (c["candidate"], c["key"]))
            for field in ("delta", "ci_low", "ci_high", "p_randomization", "p_t_test", "n_paired", "wins", "losses"):
                assert c[field] == w[field], (seg, field)


def _weighted_segments(tmp: Path, seed: int) -> dict[str, list[str]]:
    """Two to four segments of 4 to 6 queries with lognormal weights (the segments' largest weights differ from the
    evaluation's largest), graded judgments and three systems' random rankings."""
    rng = np.random.default_rng(seed)
    segments = {f"s{k}": [f"s{k}-q{i}" for i in range(int(rng.integers(4, 7)))] for k in range(int(rng.integers(2, 5)))}
    queries = [q for ids in segments.values() for q in ids]
    (tmp / "segments.tsv").write_text("".join(f"{q}\t{s}\n" for s, ids in segments.items() for q in ids))
    weights = np.exp(rng.normal(0, 1, len(queries)))
    (tmp / "weights.tsv").write_text("".join(f"{q}\t{w:.6g}\n" for q, w in zip(queries, weights)))
    qrels, runs = [], {"base": [], "better": [], "other": []}
    for q in queries:
        grades = rng.integers(0, 4, size=8)
        grades[0] = 3
        qrels += [f"{q} 0 d{j} {g}\n" for j, g in enumerate(grades)]
        for name in runs:
            order = rng.permutation(8)
            runs[name] += [f"{q} Q0 d{j} {r + 1} {20 - r} t\n" for r, j in enumerate(order[:6])]
    (tmp / "qrels.txt").write_text("".join(qrels))
    for name, lines in runs.items():
        (tmp / f"{name}.run").write_text("".join(lines))
    return segments


@settings(max_examples=examples(40))
@given(seed=hst.integers(0, 2**32 - 1), method=hst.sampled_from(["bca", "percentile"]))
def test_weighted_segment_intervals_equal_the_evaluation_restricted_to_the_segment(
    tmp_path_factory, seed: int, method: str
) -> None:
    """Under unequal weights, every per-segment interval (BCa and percentile) and paired figure is, bit for bit,
    that of the same spec restricted to the segment's queries with ``queries.set``: the segment's figures are
    computed from the segment's own weights over its largest, as the restricted evaluation's are."""
    tmp = tmp_path_factory.mktemp("weighted_segments")
    segments = _weighted_segments(tmp, seed)
    over = {"queries__weights": "weights.tsv", "uncertainty__method": method, "uncertainty__resamples": 400}
    a = ndcg_mlflow.evaluate(segments_spec(tmp, **over)).analysis
    for seg, ids in segments.items():
        (tmp / f"{seg}.set").write_text("".join(f"{q}\n" for q in ids))
        alone = ndcg_mlflow.evaluate(segments_spec(tmp, queries__segments=None, queries__set=f"{seg}.set", **over))
        for name in ("base", "better", "other"):
            for key in ("ndcg_at_5", "ndcg_at_10"):
                got, want = a.segments[seg][name][key], alone.summary["systems"][name][key]
                for field in ("mean", "ci_low", "ci_high", "std_error", "n_eff"):
                    assert got[field] == want[field], (seg, name, key, field)
        for c in a.segment_comparisons:
            if c["segment"] != seg:
                continue
            w = next(x for x in alone.analysis.comparisons if (x["candidate"], x["key"]) == (c["candidate"], c["key"]))
            for field in ("delta", "ci_low", "ci_high", "std_error", "p_randomization", "p_t_test", "effect_size_dz"):
                assert c[field] == w[field] or (math.isnan(c[field]) and math.isnan(w[field])), (seg, field)


def test_segment_means_are_the_weighted_means_of_per_query_rows(data: Path, tmp_path: Path) -> None:
    weights = {q: float(1 + (i % 5)) for i, q in enumerate(q for q, _ in segments_data(data)["queries"])}
    (data / "weights.tsv").write_text("".join(f"{q}\t{w}\n" for q, w in weights.items()))
    out = tmp_path / "out"
    assert (
        main(["run", str(segments_spec(data, queries__weights="weights.tsv")), "--out", str(out), "--no-mlflow"]) == 0
    )
    pq = pd.read_csv(out / "per_query.csv", dtype={"query_id": str, "cutoff": str})
    seg = pd.read_csv(out / "segments.csv", dtype={"cutoff": str})
    summary = json.loads((out / "summary.json").read_text())
    assert "segment" in pq.columns
    for row in seg.itertuples():
        rows = pq[(pq.segment == row.segment) & (pq.system == row.system) & (pq.cutoff == row.cutoff)]
        rows = rows[rows.ndcg.notna()]
        want = float(np.sum(rows.weight * rows.ndcg) / np.sum(rows.weight))
        assert row.mean == pytest.approx(want, rel=1e-15, abs=0)
        assert row.n == len(rows)
        assert row.n_eff == pytest.approx(rows.weight.sum() ** 2 / (rows.weight**2).sum(), rel=1e-12)
        assert summary["segments"][row.segment][row.system][row.key]["mean"] == row.mean


def test_one_correction_family_over_overall_and_segment_comparisons(data: Path) -> None:
    result = ndcg_mlflow.evaluate(segments_spec(data))
    a = result.analysis
    rows = a.comparisons + a.segment_comparisons
    fam = a.correction_family
    assert fam["size"] == len(rows) == 2 * 2 * (1 + len(SEGMENTS))
    assert [(m["candidate"], m["key"], m["segment"]) for m in fam["members"]] == [
        (r["candidate"], r["key"], r.get("segment")) for r in rows
    ]
    # Holm's step-down procedure, written out
    p = np.array([r["p_randomization"] for r in rows])
    order = np.argsort(p, kind="stable")
    m = len(p)
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    assert np.allclose([r["p_corrected"] for r in rows], adjusted, rtol=0, atol=1e-15)
    assert result.summary["correction_family"]["size"] == m


@pytest.mark.parametrize("correction", ["bonferroni", "holm", "benjamini_hochberg"])
def test_a_comparison_without_a_p_value_counts_as_one_in_the_family(data: Path, correction: str) -> None:
    """A one-query segment has no t-test p-value: it stays in the family it states, counted as p = 1, and the
    other members are corrected over the family's whole size (the formulas written out over the family)."""
    seg = {q: s for q, s in segments_data(data)["queries"]}
    seg["head-00"] = "solo"
    (data / "segments.tsv").write_text("".join(f"{q}\t{s}\n" for q, s in seg.items()))
    result = ndcg_mlflow.evaluate(segments_spec(data, comparison__test="t_test", comparison__correction=correction))
    a = result.analysis
    rows = a.comparisons + a.segment_comparisons
    fam = a.correction_family
    assert fam["size"] == len(rows) == 2 * 2 * (1 + 4)
    p = np.array([r["p_t_test"] for r in rows])
    undefined = np.isnan(p)
    assert fam["without_p_value"] == int(undefined.sum()) == 4  # two candidates x two cutoffs in "solo"
    assert "4 without a p-value, each counted as p = 1" in result.summary["correction_family"]["statement"]
    full = np.where(undefined, 1.0, p)
    m = len(full)
    order = np.argsort(full, kind="stable")
    want = np.empty(m)
    if correction == "bonferroni":
        want = np.minimum(1.0, m * full)
    elif correction == "holm":
        running = 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (m - rank) * full[i]))
            want[i] = running
    else:
        running = 1.0
        for rank in range(m - 1, -1, -1):
            running = min(running, m * full[order[rank]] / (rank + 1))
            want[order[rank]] = min(1.0, running)
    got = np.array([r["p_corrected"] for r in rows])
    assert np.isnan(got[undefined]).all()
    np.testing.assert_allclose(got[~undefined], want[~undefined], rtol=1e-14)


def test_without_segments_the_numbers_are_unchanged(data: Path) -> None:
    """The overall figures do not depend on whether segments are declared, except the corrected p-values."""
    with_ = ndcg_mlflow.evaluate(segments_spec(data)).analysis
    without = ndcg_mlflow.evaluate(segments_spec(data, queries__segments=None)).analysis
    assert without.segment_comparisons == [] and without.segments == {}
    for a, b in zip(with_.comparisons, without.comparisons):
        for k in ("delta", "ci_low", "ci_high", "p_randomization", "p_t_test", "mde"):
            assert a[k] == b[k]
        assert a["p_corrected"] >= b["p_corrected"]
    assert with_.intervals == without.intervals


def test_stratified_draws_keep_each_segment_and_do_not_depend_on_chunks() -> None:
    ids = np.array([f"q{i}" for i in range(23)])
    strata = np.array([i % 3 for i in range(23)])
    a = np.vstack(list(stratified_indices(5, ids, strata, 300, chunk=7)))
    b = np.vstack(list(stratified_indices(5, ids, strata, 300, chunk=300)))
    assert np.array_equal(a, b)
    assert np.array_equal(strata[a], np.broadcast_to(strata, a.shape))  # every draw stays in its position's stratum
    assert len(np.unique(a)) == 23


def test_stratified_interval_is_a_point_when_segments_are_constant(tmp_path: Path) -> None:
    """Every query of a segment has the same nDCG: the stratified bootstrap's resampled means all equal the mean
    (a point interval), while the plain bootstrap's interval has a width."""
    lines_q, lines_r, seg = [], [], []
    for i in range(30):
        q = f"q{i:02d}"
        s = "a" if i < 12 else "b"
        seg.append(f"{q}\t{s}\n")
        lines_q.append(f"{q} 0 rel 1\n")
        docs = ["rel", "x"] if s == "a" else ["x", "y", "rel"]
        lines_r += [f"{q} Q0 {d} {r + 1} {9 - r} t\n" for r, d in enumerate(docs)]
    (tmp_path / "qrels.txt").write_text("".join(lines_q))
    for n in ("base", "better", "other"):
        (tmp_path / f"{n}.run").write_text("".join(lines_r))
    (tmp_path / "segments.tsv").write_text("".join(seg))
    plain = ndcg_mlflow.evaluate(segments_spec(tmp_path, comparison=None)).summary["systems"]["base"]["ndcg_at_10"]
    strat = ndcg_mlflow.evaluate(segments_spec(tmp_path, comparison=None, uncertainty__stratify="segments"))
    s = strat.summary["systems"]["base"]["ndcg_at_10"]
    mean = (12 * 1.0 + 18 / math.log2(4)) / 30
    assert s["mean"] == pytest.approx(mean, rel=1e-15)
    assert s["ci_low"] == pytest.approx(mean, rel=1e-14) and s["ci_high"] == pytest.approx(mean, rel=1e-14)
    assert plain["ci_high"] - plain["ci_low"] > 0.1


def test_consistency_says_when_most_of_the_weight_moved_the_other_way() -> None:
    parts = [("a", -0.01, 3.0), ("b", -0.02, 3.0), ("c", 0.2, 4.0)]
    delta = (3 * -0.01 + 3 * -0.02 + 4 * 0.2) / 10
    e = consistency("cand", "ndcg_at_10", delta, parts)
    assert e["agrees"] is False and e["opposite_weight_share"] == pytest.approx(0.6)
    assert e["opposite_segments"] == ["a", "b"] and "60%" in consistency_note(e)
    assert consistency("cand", "k", delta, [("a", 0.1, 6.0), ("c", -0.2, 4.0)])["agrees"] is True


def _urisk(d: np.ndarray, alpha: float) -> float:
    """Wang, Bennett & Collins-Thompson (2012): (1/c) [sum of wins + (1 + alpha) * sum of losses]."""
    return (d[d > 0].sum() + (1 + alpha) * d[d < 0].sum()) / d.size


def test_risk_and_planning_figures_against_the_papers_formulas(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    spec = segments_spec(
        data,
        comparison__risk_alpha=[1, 5, 1.0000001],  # (1 and 1.0000001: one text to six digits, two keys)
        decision={"key": "ndcg_at_10", "rule": "non_inferiority", "margin": 0.05},
    )
    main(["run", str(spec), "--out", str(out), "--no-mlflow"])
    pq = pd.read_csv(out / "per_query.csv", dtype={"query_id": str, "cutoff": str})
    summary = json.loads((out / "summary.json").read_text())
    for c in summary["comparisons"]:
        wide = pq[pq.cutoff == c["cutoff"]].pivot(index="query_id", columns="system", values="ndcg").dropna()
        d = (wide[c["candidate"]] - wide["base"]).to_numpy()
        n = d.size
        assert list(c["urisk"]) == list(c["trisk"]) == ["1", "5", "1.0000001"]
        for alpha in (1, 5, 1.0000001):
            assert c["urisk"][str(alpha)] == pytest.approx(_urisk(d, alpha), abs=1e-15)
            z = np.where(d >= 0, d, (1 + alpha) * d)  # Dinçer, Macdonald & Ounis (2014)
            t = z.mean() / (z.std(ddof=1) / math.sqrt(n))
            assert c["trisk"][str(alpha)]["value"] == pytest.approx(t, rel=1e-12)
            assert c["trisk"][str(alpha)]["p"] == pytest.approx(2 * st.t.sf(abs(t), n - 1), rel=1e-9)
        se = d.std(ddof=1) / math.sqrt(n)
        mde = (st.t.ppf(0.975, n - 1) + st.t.ppf(0.8, n - 1)) * se
        assert c["mde"] == pytest.approx(mde, rel=1e-12)
        assert "queries_needed" in c
    columns = pd.read_csv(out / "comparisons.csv").columns
    assert {"urisk_1", "urisk_1.0000001", "trisk_1.0000001", "trisk_p_1.0000001"} <= set(columns)


def test_guardrails_fail_a_candidate_that_loses_a_segment(tmp_path: Path) -> None:
    segments_data(tmp_path, tail_loss=1.0)  # "better" puts the best document last in every tail query
    decision = {
        "key": "ndcg_at_10",
        "rule": "non_inferiority",
        "margin": 0.5,
        "guardrails": {"segments": {"rule": "non_inferiority", "margin": 0.02}},
    }
    spec = segments_spec(tmp_path, data__systems={"base": "base.run", "better": "better.run"}, decision=decision)
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--no-mlflow"]) == EXIT_DECISION
    summary = json.loads((out / "summary.json").read_text())
    row = summary["decision"]["candidates"][0]
    assert row["rule_outcome"] == "pass" and row["outcome"] == "fail"
    g = row["guardrails"][0]
    assert g["guardrail"] == "segments" and g["outcome"] == "fail" and "'tail'" in g["reason"]
    tail = next(p for p in g["segments"] if p["segment"] == "tail")
    pq = pd.read_csv(out / "per_query.csv", dtype={"query_id": str, "cutoff": str})
    wide = pq[(pq.cutoff == "10") & (pq.segment == "tail")].pivot(index="query_id", columns="system", values="ndcg")
    d = (wide["better"] - wide["base"]).to_numpy()
    half = st.t.ppf(0.975, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size)
    assert tail["ci_low"] == pytest.approx(d.mean() - half, rel=1e-12)
    assert summary["decision"]["guardrails"]["segments"] == {"rule": "non_inferiority", "margin": 0.02}


def test_regressions_guardrail_reads_the_upper_end_of_the_share(tmp_path: Path) -> None:
    segments_data(tmp_path, tail_loss=1.0)
    out = tmp_path / "out"
    decision = {
        "key": "ndcg_at_10",
        "rule": "non_inferiority",
        "margin": 0.5,
        "guardrails": {"regressions": {"delta": 0.1, "max_share": 0.3}},
    }
    spec = segments_spec(
        tmp_path, queries__segments=None, decision=decision, data__systems={"base": "base.run", "better": "better.run"}
    )
    code = main(["run", str(spec), "--out", str(out), "--no-mlflow"])
    summary = json.loads((out / "summary.json").read_text())
    c = next(c for c in summary["comparisons"] if c["key"] == "ndcg_at_10")
    pq = pd.read_csv(out / "per_query.csv", dtype={"query_id": str, "cutoff": str})
    wide = pq[pq.cutoff == "10"].pivot(index="query_id", columns="system", values="ndcg")
    share = float(np.mean((wide["better"] - wide["base"]) < -0.1))
    r = c["regressed_share"]
    assert r["share"] == pytest.approx(share, abs=1e-15)
    assert r["ci_low"] <= share <= r["ci_high"]
    g = summary["decision"]["candidates"][0]["guardrails"][0]
    assert g["ci_high"] == r["ci_high"]
    assert (g["outcome"] == "pass") == (r["ci_high"] <= 0.3)
    assert code == (0 if g["outcome"] == "pass" else EXIT_DECISION)


def test_regressions_guardrail_bounds_the_share_when_no_query_regressed(tmp_path: Path) -> None:
    """A candidate identical to the baseline: no query regresses, and the share's upper end is the exact binomial
    bound of 0 regressed queries out of n (1 - 0.025^(1/n), above 0 at any n), not 0: with n = 32 a max_share
    of 0.10 cannot be shown (0.109), one of 0.12 can."""
    segments_data(tmp_path)
    (tmp_path / "same.run").write_text((tmp_path / "base.run").read_text())
    n = sum(SEGMENTS.values())
    bound = 1 - 0.025 ** (1 / n)
    assert bound == pytest.approx(st.binomtest(0, n).proportion_ci(confidence_level=0.95, method="exact").high)
    for max_share, outcome in ((0.10, "fail"), (0.12, "pass")):
        decision = {
            "key": "ndcg_at_10",
            "rule": "non_inferiority",
            "margin": 0.5,
            "guardrails": {"regressions": {"delta": 0.1, "max_share": max_share}},
        }
        spec = segments_spec(
            tmp_path, queries__segments=None, decision=decision, data__systems={"base": "base.run", "same": "same.run"}
        )
        summary = ndcg_mlflow.evaluate(spec).summary
        r = next(c for c in summary["comparisons"] if c["key"] == "ndcg_at_10")["regressed_share"]
        assert r["share"] == 0 and r["ci_low"] == 0
        assert r["ci_high"] == pytest.approx(bound, rel=1e-12)
        row = summary["decision"]["candidates"][0]
        assert row["rule_outcome"] == "pass"
        assert row["guardrails"][0]["outcome"] == row["outcome"] == outcome


def test_segment_outputs_report_and_tables(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    main(["run", str(segments_spec(data)), "--out", str(out), "--no-mlflow"])
    sc = pd.read_csv(out / "segment_comparisons.csv")
    assert len(sc) == 2 * 2 * len(SEGMENTS) and list(sc.columns[:2]) == ["segment", "baseline"]
    html = (out / "report.html").read_text()
    assert "id='segments'" in html and 'data-figure="segment_differences"' in html
    svg = (out / "figures" / "segment_differences.svg").read_text()
    assert svg.count('<circle class="mark"') == 2 * (1 + len(SEGMENTS))
    md = (out / "report.md").read_text()
    assert "Segments at nDCG@10" in md


def test_run_and_validate_warn_when_the_margin_is_below_what_n_can_detect(data: Path, tmp_path: Path, capsys) -> None:
    decision = {"key": "ndcg_at_10", "rule": "non_inferiority", "margin": 0.001}
    spec = segments_spec(data, queries__segments=None, decision=decision)
    assert main(["validate", str(spec)]) == 0
    printed = capsys.readouterr().out
    result = ndcg_mlflow.evaluate(spec)
    notes = [n for n in result.all_notes if "non-inferiority margin 0.001" in n]
    assert len(notes) == 2  # one per candidate
    c = next(c for c in result.analysis.comparisons if c["candidate"] == "better" and c["key"] == "ndcg_at_10")
    assert c["mde"] > 0.001 and c["detectable"] is False and c["queries_needed"] > 32
    shown = [float(m) for m in re.findall(r"smallest detectable difference is ([0-9.e+-]+)\)", " ".join(notes))]
    assert any(v == pytest.approx(c["mde"], rel=1e-3) for v in shown)  # 4 significant digits
    assert printed.count("warning: ") == 2 and "non-inferiority margin 0.001" in printed
    wide = ndcg_mlflow.evaluate(segments_spec(data, queries__segments=None, decision=dict(decision, margin=0.9)))
    assert not [n for n in wide.all_notes if "non-inferiority margin" in n]


def test_the_report_says_when_a_failed_rule_could_not_have_passed(tmp_path: Path) -> None:
    segments_data(tmp_path, tail_loss=1.0)
    out = tmp_path / "out"
    decision = {"key": "ndcg_at_10", "rule": "non_inferiority", "margin": 0.02}
    assert (
        main(["run", str(segments_spec(tmp_path, decision=decision)), "--out", str(out), "--no-mlflow"])
        == EXIT_DECISION
    )
    summary = json.loads((out / "summary.json").read_text())
    rows = {r["candidate"]: r for r in summary["decision"]["candidates"]}
    comps = {c["candidate"]: c for c in summary["comparisons"] if c["key"] == "ndcg_at_10"}
    md = (out / "report.md").read_text()
    lines = {name: next(line for line in md.splitlines() if line.startswith(f"- {name}:")) for name in rows}
    for name, row in rows.items():
        says = "could not have decided the margin" in lines[name]
        assert says == (row["outcome"] == "fail" and comps[name]["detectable"] is False), name
        if says:
            assert f"about {comps[name]['queries_needed']} queries would" in lines[name]
    assert any(r["outcome"] == "fail" for r in rows.values()) and any(r["outcome"] == "pass" for r in rows.values())


def test_the_segment_tables_are_mlflow_tables(data: Path, tmp_path: Path) -> None:
    from ndcg_mlflow.tracking.tables import folder_tables

    out = tmp_path / "out"
    main(["run", str(segments_spec(data)), "--out", str(out), "--no-mlflow"])
    summary = json.loads((out / "summary.json").read_text())
    tables = dict(folder_tables(out, summary))
    seg, comps = tables["segments_table.json"], tables["segment_comparisons_table.json"]
    assert list(comps.columns[:5]) == ["segment", "candidate", "baseline", "key", "delta"]
    assert len(seg) == len(SEGMENTS) * 3 * 2 and len(comps) == len(SEGMENTS) * 2 * 2
    for row in seg.itertuples():
        assert summary["segments"][row.segment][row.system][row.key]["mean"] == row.mean
    one = dict(folder_tables(out, summary, system="better"))
    assert set(one["segment_comparisons_table.json"].candidate) == {"better"}
    assert set(one["segments_table.json"].system) == {"better"}


# --------------------------------------------------------------------------- labels as the exact strings

# labels that differ only by NULs, a lone carriage return, a line end inside: five segments of the 32 queries
ODD = {"head": ["head", "head\x00", "\x00"], "torso": ["tail\rend"], "tail": ["\r"]}


def _odd_segments(data: Path, kind: str) -> tuple[Path, dict[str, str]]:
    """The queries of :data:`SEGMENTS` relabelled with :data:`ODD` (a segment's queries dealt out among its labels
    in turn), written as JSONL or Parquet; returns the file and each query's label read back from the file by
    json / pyarrow alone."""
    queries = [(f"{seg}-{i:02d}", ODD[seg][i % len(ODD[seg])]) for seg, n in SEGMENTS.items() for i in range(n)]
    if kind == "jsonl":
        path = data / "odd.jsonl"
        path.write_text("".join(json.dumps({"query_id": q, "segment": s}) + "\n" for q, s in queries))
        back = [json.loads(line) for line in path.read_text().split("\n") if line]
        return path, {r["query_id"]: r["segment"] for r in back}
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = data / "odd.parquet"
    pq.write_table(pa.table({"query_id": [q for q, _ in queries], "segment": [s for _, s in queries]}), path)
    back = pq.read_table(path).to_pydict()
    return path, dict(zip(back["query_id"], back["segment"]))


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_labels_with_nul_and_carriage_returns_are_segments_of_their_own(data: Path, tmp_path: Path, kind) -> None:
    """``head``, ``head\\0`` and ``\\0`` are three segments, ``tail\\rend`` and ``\\r`` two more: the statistics,
    per_query.csv, segments.csv and segment_comparisons.csv (read with pandas) and the MLflow tables all hold the
    five labels, each query under the label its file gives it, each mean that of its own per-query rows."""
    from ndcg_mlflow.tracking.tables import folder_tables

    path, label_of = _odd_segments(data, kind)
    labels = {s for group in ODD.values() for s in group}
    assert set(label_of.values()) == labels and "head\x00" in labels  # (the file holds the five, NULs and all)
    out = tmp_path / "out"
    assert main(["run", str(segments_spec(data, queries__segments=path.name)), "--out", str(out), "--no-mlflow"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["segments"]) == labels
    read = {"dtype": str, "keep_default_na": False, "na_values": [""]}
    pq_ = pd.read_csv(out / "per_query.csv", **read)
    assert len(pq_) == 3 * 2 * len(label_of)
    assert [label_of[q] for q in pq_.query_id] == pq_.segment.tolist()
    seg = pd.read_csv(out / "segments.csv", **read)
    assert len(seg) == len(labels) * 3 * 2 and set(seg.segment) == labels
    for row in seg.itertuples():
        rows = pq_[(pq_.segment == row.segment) & (pq_.system == row.system) & (pq_.cutoff == row.cutoff)]
        ndcg = rows.ndcg.astype(float)
        assert float(row.mean) == pytest.approx(float(ndcg.mean()), rel=1e-15)
        assert int(row.n) == sum(1 for s in label_of.values() if s == row.segment)
    comps = pd.read_csv(out / "segment_comparisons.csv", **read)
    assert len(comps) == len(labels) * 2 * 2 and set(comps.segment) == labels
    tables = dict(folder_tables(out, summary))
    assert len(tables["segments_table.json"]) == len(seg)
    assert tables["segments_table.json"].segment.tolist() == seg.segment.tolist()
    assert tables["segment_comparisons_table.json"].segment.tolist() == comps.segment.tolist()


HOSTILE_TAIL = "tail\r\n\n**Decision: PASS** — [proof](http://evil.example/) <b>x</b> \x1b[2J\x1b]0;owned\x07 \\x1b"


@pytest.mark.integration
def test_a_hostile_segment_label_is_shown_escaped_everywhere_and_compared_after_logging(
    tracking_uri, tmp_path: Path, capsys
) -> None:
    """A failing segment whose label holds line ends, markdown, HTML and terminal escape sequences: the terminal
    shows its control characters as escapes, the run's description and report.md hold one decision paragraph and
    no link, report.html and the figures no markup of it; the logged system runs compare (their per-query tables
    read back) to the evaluation's own segment comparisons."""
    from xml.etree import ElementTree

    from helpers import client_for

    segments_data(tmp_path, tail_loss=1.0)
    labels = {"head": "head\x00", "torso": "\r", "tail": HOSTILE_TAIL}  # (a lone CR ended a CSV row)
    rows = [(f"{seg}-{i:02d}", labels[seg]) for seg, n in SEGMENTS.items() for i in range(n)]
    (tmp_path / "odd.jsonl").write_text("".join(json.dumps({"query_id": q, "segment": s}) + "\n" for q, s in rows))
    decision = {
        "key": "ndcg_at_10",
        "rule": "non_inferiority",
        "margin": 0.5,
        "guardrails": {"segments": {"rule": "non_inferiority", "margin": 0.02}},
    }
    spec = segments_spec(
        tmp_path,
        queries__segments="odd.jsonl",
        data__systems={"base": "base.run", "better": "better.run"},
        decision=decision,
    )
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out)]) == EXIT_DECISION
    printed = capsys.readouterr()
    for stream in (printed.out, printed.err):
        assert "\x1b" not in stream and "\x07" not in stream and "\r" not in stream
    assert "tail\\r\\n\\n**Decision: PASS** — [proof](http://evil.example/) <b>x</b> \\x1b[2J" in printed.out
    assert "\\x1b]0;owned\\x07 \\\\x1b" in printed.out  # (a backslash in the label shown doubled: no forged escape)

    client = client_for(tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("segments").experiment_id])
    parent = next(r for r in runs if r.data.tags["ndcg_mlflow.role"] == "evaluation")
    note = parent.data.tags["mlflow.note.content"]
    md = (out / "report.md").read_text(encoding="utf-8")
    for text in (note, md):
        decisions = [line for line in text.splitlines() if line.startswith("**")]
        assert len(decisions) == 1 and decisions[0].startswith("**Decision: FAIL**"), decisions
        assert "**Decision: PASS" not in text and "[proof](" not in text and not re.search(r"(?<!\\)<b>", text)
        assert "\x1b" not in text and "\r" not in text
    assert "\\*\\*Decision\\: PASS\\*\\*" in note  # (shown as typed)
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html and 'href="http://evil' not in html
    for figure in (out / "figures").glob("*.svg"):
        svg = figure.read_text(encoding="utf-8")
        ElementTree.fromstring(svg)  # well-formed
        assert "<b>" not in svg and "\x1b" not in svg

    system = {r.data.tags["ndcg_mlflow.system"]: r.info.run_id for r in runs if "ndcg_mlflow.system" in r.data.tags}
    compared = tmp_path / "compared"
    assert main(["compare", system["base"], system["better"], "--out", str(compared), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "IndexError" not in err, err
    mine = json.loads((out / "summary.json").read_text())["segment_comparisons"]
    theirs = json.loads((compared / "summary.json").read_text())["segment_comparisons"]
    assert {(c["segment"], c["key"]) for c in theirs} == {(c["segment"], c["key"]) for c in mine}
    assert {c["segment"] for c in theirs} == set(labels.values())


def test_consistency_weighs_segments_by_their_share_of_the_evaluations_weight(data: Path) -> None:
    """The share of the paired weight that moved against the overall difference is the segments' share of the
    evaluation's weights (each segment's figures use its own weights over its largest, which say nothing of how
    much weight the segment holds): written out from the weights file and the segments' differences."""
    queries = segments_data(data, seed=5)["queries"]  # (the other candidate loses in the head and the tail)
    scale = {"head": 1.0, "torso": 300.0, "tail": 7.0}
    weights = {q: scale[s] * (1 + i % 3) for i, (q, s) in enumerate(queries)}
    (data / "weights.tsv").write_text("".join(f"{q}\t{w}\n" for q, w in weights.items()))
    a = ndcg_mlflow.evaluate(segments_spec(data, queries__weights="weights.tsv")).analysis
    assert any(e["opposite_segments"] for e in a.consistency)
    for entry in a.consistency:
        total = against = 0.0
        overall = np.sign(entry["delta"])
        for c in a.segment_comparisons:
            if (c["candidate"], c["key"]) != (entry["candidate"], entry["key"]):
                continue
            held = sum(w for (q, s), w in zip(queries, weights.values()) if s == c["segment"])
            total += held
            if overall != 0 and np.sign(c["delta"]) == -overall:
                against += held
        assert entry["opposite_weight_share"] == pytest.approx(against / total, rel=1e-12)
        assert entry["agrees"] == (against / total <= 0.5)


def test_the_consistency_note_tells_its_share_from_half() -> None:
    """The note's share is compared with one half: 50.04% of the weight is not written as 50% (the rule is
    "more than half")."""
    e = consistency("cand", "ndcg_at_10", 0.1, [("a", 0.1, 4.996), ("b", -0.2, 5.004)])
    assert e["agrees"] is False
    assert "segments holding 50.04% of the paired weight (more than half)" in consistency_note(e)


def test_the_notes_say_why_studentized_intervals_are_undefined(data: Path, tmp_path: Path) -> None:
    """The tail's 8 queries fall short of the studentized interval's 10 effective queries: its intervals are
    undefined (empty), and the notes (summary.json, the report) say why and where; the torso's 10 reach it."""
    out = tmp_path / "out"
    spec = segments_spec(data, uncertainty__method="studentized", uncertainty__resamples=300)
    assert main(["run", str(spec), "--out", str(out), "--no-mlflow", "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    tail = summary["segments"]["tail"]["base"]["ndcg_at_10"]
    assert tail["ci_low"] is None and tail["n_eff"] == 8
    assert summary["segments"]["torso"]["base"]["ndcg_at_10"]["ci_low"] is not None
    [note] = [n for n in summary["notes"] if n.startswith("studentized intervals are undefined")]
    assert "fewer than 10 effective queries" in note and "segment 'tail' (n_eff 8)" in note
    assert "torso" not in note and "head" not in note and "all queries" not in note
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "studentized intervals are undefined with fewer than 10 effective queries" in report
