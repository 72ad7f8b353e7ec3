"""The result as a user meets it in a notebook: its repr and HTML, the DataFrame views (means, comparisons, the
per-query table by system), the ``cutoff`` column that compares with the ints users pass, and the error for a
system or cutoff that was not evaluated."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import metric_spec, write_qrels, write_run

import ndcg_mlflow
from ndcg_mlflow.errors import EvaluationError
from ndcg_mlflow.outputs import write_outputs
from ndcg_mlflow.render.format import number, p_value
from ndcg_mlflow.result import flat_rows
from ndcg_mlflow.statistics.comparisons import Analysis

QUERIES = [f"q{i:02d}" for i in range(30)]
WEIRD = "<b>x</b>"  # a system name that is markup (the spec refuses it; a result renamed here holds it)


def _data(folder: Path) -> tuple[str, dict[str, str]]:
    rng = np.random.default_rng(5)
    docs = [f"d{j}" for j in range(12)]
    judgments = {q: {d: int(rng.integers(0, 4)) for d in docs[:8]} for q in QUERIES}
    runs = {}
    for name in ("base", "cand", "other"):
        ranking = {q: list(rng.permutation(docs)) for q in QUERIES}
        runs[name] = write_run(folder, ranking, f"{name}.run")
    return write_qrels(folder, judgments), runs


def _spec(qrels: str, runs: dict[str, str], *, cutoffs=(10, "all", 5), name="views <i>&</i>") -> dict:
    spec = metric_spec(qrels, runs, name=name, cutoffs=cutoffs)
    spec["uncertainty"] = {"resamples": 500, "confidence": 0.9, "method": "percentile", "seed": 3}
    spec["comparison"] = {
        "baseline": "base",
        "test": "randomization",
        "correction": "holm",
        "wins_losses": 2,
        "tie_tolerance": 1e-9,
    }
    spec["decision"] = {"key": "ndcg_at_10", "rule": "non_inferiority", "margin": 0.05}
    return spec


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    folder = tmp_path_factory.mktemp("views")
    qrels, runs = _data(folder)
    return folder, qrels, runs


@pytest.fixture(scope="module")
def result(made):
    folder, qrels, runs = made
    return ndcg_mlflow.evaluate(_spec(qrels, runs), base_dir=folder)


def renamed(result, old: str, new: str):
    """``result`` with the system ``old`` called ``new`` everywhere a name is held (systems, intervals,
    comparisons, the decision)."""

    def name(n):
        return new if n == old else n

    a = result.analysis
    analysis = Analysis(
        intervals={name(n): v for n, v in a.intervals.items()},
        comparisons=[{**c, "candidate": name(c["candidate"]), "baseline": name(c["baseline"])} for c in a.comparisons],
        wins_losses=a.wins_losses,
        correction_family=a.correction_family,
    )
    decision = {
        **result.decision,
        "candidates": [{**c, "candidate": name(c["candidate"])} for c in result.decision["candidates"]],
    }
    systems = {name(n): dataclasses.replace(sr, name=name(n)) for n, sr in result.systems.items()}
    return dataclasses.replace(result, systems=systems, analysis=analysis, decision=decision, _per_query=None)


def stayed_in_spark(result, path: Path):
    """``result`` as the Spark engine returns it beyond its driver limit: the summary only, the rows elsewhere."""
    return dataclasses.replace(
        result,
        query_ids=np.empty(0, dtype=object),
        weights=np.empty(0),
        systems={},
        analysis=None,
        per_query_path=path,
        grouped_summary=result.summary,
        _per_query=None,
    )


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


# --------------------------------------------------------------------------- repr


def test_repr_is_a_few_lines_saying_what_was_evaluated(result):
    text = repr(result)
    assert len(text) < 300 and len(text.splitlines()) == 2, text
    assert text.startswith("<EvaluationResult 'views <i>&</i>': engine local, 30 queries, cutoffs 10, all, 5")
    assert "3 systems: 'base', 'cand', 'other'; baseline 'base'" in text
    assert f"decision {result.decision['outcome']}" in text and text.endswith(">")
    sr = result.systems["cand"]
    assert repr(sr) == (
        f"<SystemResult 'cand': 30 queries; nDCG@10 {number(sr.means['ndcg_at_10']['mean'])}, "
        f"nDCG@all {number(sr.means['ndcg_at_all']['mean'])}, nDCG@5 {number(sr.means['ndcg_at_5']['mean'])}>"
    )
    assert "array" not in text and "Spec(" not in text


def test_repr_stays_short_for_many_systems_with_long_names(tmp_path):
    qrels = write_qrels(tmp_path, {"q1": {"d1": 2, "d2": 1}})
    runs = {("s" * 140) + f"{i:02d}": write_run(tmp_path, {"q1": ["d2", "d1"]}, f"r{i}.run") for i in range(30)}
    spec = metric_spec(qrels, runs, name="n" * 150, cutoffs=tuple(range(1, 41)))
    result = ndcg_mlflow.evaluate(spec, base_dir=tmp_path)
    text = repr(result)
    assert len(text) < 800 and len(text.splitlines()) == 2, text
    assert "1 query," in text and "30 systems" in text and "and 20 more" in text and "and 30 more" in text
    assert all(len(repr(sr)) < 400 for sr in result.systems.values())


def test_repr_says_where_the_rows_are_when_they_stayed_in_spark(result, tmp_path):
    path = tmp_path / "out.per_query" / "0123456789ab"
    grouped = stayed_in_spark(result, path)
    text = repr(grouped)
    assert text.startswith("<EvaluationResult 'views <i>&</i>': engine local, 30 queries")
    assert "3 systems: 'base', 'cand', 'other'" in text
    assert text.splitlines()[-1] == f" per-query rows: the Parquet table {path}>"


# --------------------------------------------------------------------------- HTML


def test_html_shows_means_comparisons_and_decision(result):
    page = result._repr_html_()
    ET.fromstring(page)  # well formed: every tag closed, every entity escaped
    assert len(page) < 10_000
    assert "<script" not in page and "<style" not in page and "<link" not in page and "http" not in page
    assert "<b>views &lt;i&gt;&amp;&lt;/i&gt;</b>: engine local, 30 queries" in page
    assert "<caption>Mean nDCG [90% interval]</caption>" in page
    assert "<tr><th>system</th><th>nDCG@10</th><th>nDCG@all</th><th>nDCG@5</th></tr>" in page
    for name, entries in result.summary["systems"].items():
        cells = "".join(
            f"<td>{number(e['mean'])} [{number(e['ci_low'])}, {number(e['ci_high'])}]</td>" for e in entries.values()
        )
        assert f"<tr><th>{name}</th>{cells}</tr>" in page
    assert "Against the baseline base (p corrected: holm)" in page
    for c in result.summary["comparisons"]:
        row = (
            f"<tr><th>{c['candidate']}</th><td>{c['cutoff']}</td><td>{number(c['delta'], signed=True)}</td>"
            f"<td>[{number(c['ci_low'], signed=True)}, {number(c['ci_high'], signed=True)}]</td>"
            f"<td>{p_value(c['p_corrected'])}</td><td>{c['wins']}/{c['ties']}/{c['losses']}</td></tr>"
        )
        assert row in page
    decision = result.decision
    assert f"Decision: <b>{decision['outcome']}</b>." in page
    for c in decision["candidates"]:
        assert f"<li>{c['candidate']}: <b>{c['outcome']}</b>, " in page


def test_html_escapes_a_system_name(result):
    page = renamed(result, "cand", WEIRD)._repr_html_()
    ET.fromstring(page)
    assert WEIRD not in page and "<b>x" not in page
    assert "<tr><th>&lt;b&gt;x&lt;/b&gt;</th>" in page  # its row of means and its comparisons
    assert "<li>&lt;b&gt;x&lt;/b&gt;: <b>" in page  # and its decision


def test_html_of_a_result_whose_rows_stayed_in_spark(result, tmp_path):
    path = tmp_path / "o&o.per_query" / "0123456789ab"
    page = stayed_in_spark(result, path)._repr_html_()
    ET.fromstring(page)
    assert f"per-query rows: the Parquet table <code>{str(path).replace('&', '&amp;')}</code>" in page
    assert "Against the baseline base" in page and "Decision: <b>" in page


def test_html_without_statistics_shows_the_means_alone(made):
    folder, qrels, runs = made
    plain = ndcg_mlflow.evaluate(metric_spec(qrels, runs, name="plain", cutoffs=(5,)), base_dir=folder)
    page = plain._repr_html_()
    ET.fromstring(page)
    assert "<caption>Mean nDCG</caption>" in page and "[" not in page
    assert "Against the baseline" not in page and "Decision" not in page
    assert f"<tr><th>cand</th><td>{number(plain.mean('cand', 5))}</td></tr>" in page


# --------------------------------------------------------------------------- DataFrame views


def test_means_are_the_summary_numbers(result):
    means = result.means
    systems = result.summary["systems"]
    assert list(means.columns[:6]) == ["system", "key", "cutoff", "mean", "ci_low", "ci_high"]
    assert {"n_evaluated", "n_eff", "std_error", "weight_sum"} <= set(means.columns)
    assert len(means) == sum(len(e) for e in systems.values()) == 9
    for row in means.to_dict("records"):
        entry = systems[row["system"]][row["key"]]
        assert set(row) == {"system", "key", "cutoff", *entry}
        assert all(same(row[f], v) for f, v in entry.items()), row
        assert row["cutoff"] == ("all" if row["key"] == "ndcg_at_all" else int(row["key"].removeprefix("ndcg_at_")))
        assert row["mean"] == result.mean(row["system"], row["cutoff"])


def test_means_without_an_uncertainty_section_have_empty_intervals(made):
    folder, qrels, runs = made
    plain = ndcg_mlflow.evaluate(metric_spec(qrels, runs, name="plain", cutoffs=(5,)), base_dir=folder)
    means = plain.means
    assert list(means.columns[:6]) == ["system", "key", "cutoff", "mean", "ci_low", "ci_high"]
    assert means["ci_low"].isna().all() and means["ci_high"].isna().all()
    assert means["mean"].tolist() == [plain.mean(n, 5) for n in ("base", "cand", "other")]
    assert plain.comparisons.empty


def test_comparisons_are_the_summary_numbers_with_the_same_names(result):
    frame = result.comparisons
    nested = result.summary["comparisons"]
    rows = flat_rows(nested)  # the nested risk entries as columns: urisk_<alpha>, trisk_<alpha>, trisk_p_<alpha>
    assert list(frame.columns) == list(rows[0])
    assert rows[0]["urisk_1"] == nested[0]["urisk"]["1"] and rows[0]["trisk_p_5"] == nested[0]["trisk"]["5"]["p"]
    assert "urisk" not in frame.columns and "trisk" not in frame.columns
    assert len(frame) == len(rows) == 6
    for got, want in zip(frame.to_dict("records"), rows):
        assert got["cutoff"] == ("all" if want["cutoff"] == "all" else int(want["cutoff"]))
        assert all(same(got[f], v) for f, v in want.items() if f != "cutoff"), got
    # the same names and the same cutoff column as the means and the per-query table
    shared = {"key", "cutoff", "ci_low", "ci_high", "std_error"}
    assert shared <= set(frame.columns) and shared <= set(result.means.columns)
    assert frame["cutoff"].dtype == result.means["cutoff"].dtype == result.per_query["cutoff"].dtype


def test_comparisons_of_a_result_whose_rows_stayed_in_spark(result, tmp_path):
    grouped = stayed_in_spark(result, tmp_path / "pq")
    pd.testing.assert_frame_equal(grouped.comparisons, result.comparisons)
    pd.testing.assert_frame_equal(grouped.means, result.means)
    assert grouped.mean("cand", 10) == result.mean("cand", 10)
    with pytest.raises(EvaluationError, match="stayed in Spark"):
        grouped.per_query_wide()


@pytest.mark.parametrize("cutoff", ["headline", 10, "10", 5, "all", None])
def test_per_query_wide_is_the_per_query_rows(result, cutoff):
    wide = result.per_query_wide() if cutoff == "headline" else result.per_query_wide(cutoff)
    value = {"headline": 10, "10": 10, None: "all"}.get(cutoff, cutoff)
    pq = result.per_query
    rows = pq[pq.cutoff == value]
    want = rows.pivot(index="query_id", columns="system", values="ndcg")
    assert list(wide.columns) == ["base", "cand", "other"] and wide.columns.name == "system"
    assert list(wide.index) == list(result.query_ids) and wide.index.name == "query_id"
    pd.testing.assert_frame_equal(wide, want.loc[wide.index, wide.columns], check_exact=True, check_names=False)
    assert len(rows) == wide.size


def test_per_query_wide_defaults_to_the_first_cutoff_without_10(made):
    folder, qrels, runs = made
    res = ndcg_mlflow.evaluate(metric_spec(qrels, runs, name="no10", cutoffs=("all", 3)), base_dir=folder)
    pd.testing.assert_frame_equal(res.per_query_wide(), res.per_query_wide("all"))


# --------------------------------------------------------------------------- the cutoff column


def test_the_cutoff_column_compares_with_the_cutoffs_users_pass(result):
    pq = result.per_query
    assert len(pq[pq.cutoff == 10]) == len(pq[pq.cutoff == 5]) == len(pq[pq.cutoff == "all"]) == 3 * 30
    assert pq.loc[pq.cutoff == 10, "ndcg"].notna().any()
    assert list(pq.cutoff.cat.categories) == [5, 10, "all"] and pq.cutoff.cat.ordered
    assert list(pq["cutoff"].iloc[:3]) == [10, "all", 5]  # the rows keep the spec's order
    assert list(pq.sort_values("cutoff", kind="stable").cutoff.drop_duplicates()) == [5, 10, "all"]
    table = pq.pivot_table(index="query_id", columns="cutoff", values="ndcg")
    assert list(table.columns) == [5, 10, "all"]
    for name in ("base", "cand"):
        mine = pq[(pq.system == name) & (pq.cutoff == 10)]
        assert np.average(mine["ndcg"], weights=mine["weight"]) == pytest.approx(result.mean(name, 10), abs=1e-12)
    assert (pq.cutoff.astype(str) == pq.cutoff.map(str)).all()


def test_per_query_csv_is_written_as_before_and_reads_back(result, tmp_path):
    """The file's text is that of the column of labels ('10', 'all', '5') the table held before."""
    out = write_outputs(result, tmp_path / "out", reports=False)
    pq = result.per_query
    labels = pq.assign(cutoff=np.asarray([str(c) for c in pq["cutoff"]], dtype=object))
    text = labels.to_csv(index=False, float_format="%.17g", na_rep="")
    assert (out / "per_query.csv").read_text() == text
    assert pq.to_csv(index=False, float_format="%.17g", na_rep="") == text
    assert (out / "systems" / "cand.per_query.csv").read_text() == labels[labels.system == "cand"].to_csv(
        index=False, float_format="%.17g", na_rep=""
    )
    back = pd.read_csv(io.StringIO(text), dtype={"query_id": str, "cutoff": str})
    assert back["cutoff"].tolist() == [str(c) for c in pq["cutoff"]]
    comparisons = pd.read_csv(out / "comparisons.csv", dtype={"cutoff": str})
    assert comparisons["cutoff"].tolist() == [c["cutoff"] for c in result.summary["comparisons"]]
    assert json.loads((out / "summary.json").read_text())["comparisons"][0]["cutoff"] == "10"


# --------------------------------------------------------------------------- what was not evaluated


@pytest.mark.parametrize(
    ("system", "cutoff", "words"),
    [
        ("v3", 10, "system 'v3' was not evaluated:"),
        ("cnad", 10, "system 'cnad' was not evaluated (did you mean 'cand'?):"),
        ("cand", 7, "cutoff 7 was not evaluated:"),
        ("cand", "7", "cutoff '7' was not evaluated:"),
        ("cand", "x", "cutoff 'x' was not evaluated:"),
        ("cand", 10.5, "cutoff 10.5 was not evaluated:"),
        ("v3", 3, "system 'v3' was not evaluated and cutoff 3 was not evaluated:"),
        (None, 10, "no system was given (the first argument names one):"),
        (None, 7, "no system was given (the first argument names one) and cutoff 7 was not evaluated:"),
        (["cand"], 10, "system ['cand'] was not evaluated (did you mean 'cand'?):"),
        (3, 10, "system 3 was not evaluated:"),
        ("cand", True, "cutoff True was not evaluated:"),
        ("cand", float("inf"), "cutoff inf was not evaluated:"),
    ],
)
def test_mean_of_what_was_not_evaluated_says_what_was(result, system, cutoff, words):
    with pytest.raises(EvaluationError) as err:
        result.mean(system, cutoff)
    message = str(err.value)
    assert message.startswith(words), message
    assert message.endswith("this evaluation has the systems 'base', 'cand', 'other' and the cutoffs 10, all, 5.")


def test_per_query_wide_of_a_cutoff_not_evaluated(result):
    with pytest.raises(EvaluationError, match=r"^cutoff 20 was not evaluated: .* the cutoffs 10, all, 5\.$"):
        result.per_query_wide(20)


def test_mean_takes_the_cutoff_in_each_spelling(result):
    want = result.summary["systems"]["cand"]["ndcg_at_10"]["mean"]
    assert result.mean("cand", 10) == result.mean("cand", "10") == result.mean("cand", np.int64(10)) == want
    assert (
        result.mean("cand", "all")
        == result.mean("cand", None)
        == result.summary["systems"]["cand"]["ndcg_at_all"]["mean"]
    )


# --------------------------------------------------------------------------- the JSON texts


def test_the_json_texts_are_attributes(result):
    assert isinstance(result.summary_json, str) and isinstance(result.wins_losses_json, str)
    assert json.loads(result.summary_json)["systems"]["cand"]["ndcg_at_10"]["mean"] == result.mean("cand", 10)
    assert json.loads(result.wins_losses_json)["baseline"] == "base"
