"""Conformance with NIST trec_eval: every ``ndcg`` / ``ndcg_cut_K`` value of its own test outputs.

The inputs and expected outputs are trec_eval's ``test/`` files, kept outside the repository: the folder named by
the environment variable ``NDCG_MLFLOW_TREC_EVAL_TESTS`` (a trec_eval checkout's ``test/``), by default
``../shared/conformance/trec_eval/``; the module is skipped, saying how to get them, when they are absent.
They are read in place and never copied into the project.

trec_eval's definitions (m_ndcg.c, m_ndcg_cut.c, form_res_rels.c, get_trec_results.c):

* gain = the grade (or a ``-m ndcg.g=gain,...`` table); grades <= 0 earn nothing;
* rank by score descending, ties broken by doc id in descending string order (rank column ignored);
* ``DCG = sum gain_i / log2(i + 1)``; the ideal uses every judged document of the query;
* ``ndcg`` (no cutoff) covers the whole returned list; a query with no relevant document scores 0;
* ``all`` is the mean over the queries evaluated: queries of the run that are judged, plus (``-c``)
  judged queries absent from the run, which then score 0;
* anything after the run-id field of a results line is ignored.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import pytest
from helpers import TREC_EVAL_DATA, parse_trec_eval_output, trec_eval_missing

import ndcg_mlflow

DATA = TREC_EVAL_DATA

if trec_eval_missing():
    pytest.skip(trec_eval_missing(), allow_module_level=True)

TREC_CUTOFFS = [5, 10, 15, 20, 30, 100, 200, 500, 1000, "all"]
# trec_eval: listed levels get the listed gain, levels <= 0 earn 0 (every grade present must be in our table)
MEAS_PARAMS_TABLE = {-1: 0, 0: 0, 1: 3, 2: 9, 4: 4.5}

# name: (expected output, qrels, run, missing_queries, gain, cutoffs)
CASES = {
    "aq": ("out.test.aq", "qrels.test", "results.test", "exclude", "linear", TREC_CUTOFFS),
    "aqc": ("out.test.aqc", "qrels.test", "results.trunc", "zero", "linear", TREC_CUTOFFS),
    "aql": ("out.test.aql", "qrels.rel_level", "results.test", "exclude", "linear", TREC_CUTOFFS),
    "meas_params": (
        "out.test.meas_params",
        "qrels.test",
        "results.test",
        "exclude",
        MEAS_PARAMS_TABLE,
        [10, 20, 23, "all"],
    ),
}


def trec_spec(
    qrels: str | Path, run: str | Path, *, missing: str = "exclude", gain="linear", cutoffs=TREC_CUTOFFS
) -> dict:
    """Our spec with the settings that reproduce trec_eval."""
    return {
        "spec_version": 1,
        "name": "trec-eval-conformance",
        "metric": {
            "gain": gain,
            "cutoffs": list(cutoffs),
            "discount": "log2",
            "ties": "id_descending",
            "ideal": "judged_catalog",
            "empty_ideal": "zero",
            "unjudged": "zero",
            "missing_queries": missing,
        },
        "queries": {"weights": "uniform"},
        "data": {"qrels": str(qrels), "systems": {"run": str(run)}},
    }


@cache
def evaluate_case(case: str, run_path: str | None = None):
    _, qrels, run, missing, gain, cutoffs = CASES[case]
    g = dict(gain) if isinstance(gain, dict) else gain
    spec = trec_spec(qrels, run_path or run, missing=missing, gain=g, cutoffs=cutoffs)
    return ndcg_mlflow.evaluate(spec, base_dir=DATA)


def _per_query_values(result) -> dict[tuple[str, str], float]:
    pq = result.per_query
    return {(str(c), str(q)): v for c, q, v in zip(pq["cutoff"], pq["query_id"], pq["ndcg"])}


def _check(result, expected_file: str, cutoffs) -> None:
    expected = parse_trec_eval_output(expected_file)
    labels = {str(k) for k in cutoffs}
    # every cutoff we evaluate is printed by trec_eval, per query and for all
    assert {c for c, _ in expected} == labels
    ours = _per_query_values(result)
    problems = []
    for (cutoff, qid), want in sorted(expected.items()):
        got = result.mean("run", cutoff) if qid == "all" else ours.get((cutoff, qid), float("nan"))
        if not (math.isfinite(got) and got == pytest.approx(want, abs=5e-5)):
            problems.append(
                f"{'ndcg' if cutoff == 'all' else 'ndcg_cut_' + cutoff} {qid}: trec_eval {want:.4f}, ours {got!r}"
            )
    assert not problems, f"{len(problems)} of {len(expected)} values differ:\n" + "\n".join(problems)

    # the queries trec_eval printed are exactly the queries we evaluated (the others are excluded)
    printed = {q for _, q in expected if q != "all"}
    pq = result.per_query
    evaluated = set(pq.loc[pq["ndcg"].notna(), "query_id"].astype(str))
    assert evaluated == printed


# --------------------------------------------------------------------------- the expected outputs


def test_parse_expected_reads_every_ndcg_line():
    aq = parse_trec_eval_output("out.test.aq")
    assert len(aq) == 4 * 10  # 3 queries + all, ndcg and 9 cutoffs
    assert aq[("all", "301")] == 0.1584
    assert aq[("5", "all")] == 0.2768
    mp = parse_trec_eval_output("out.test.meas_params")
    assert len(mp) == 4 * 4
    assert mp[("23", "302")] == 0.7964
    assert mp[("all", "all")] == 0.4021


@pytest.mark.parametrize("case", ["aq", "aql", "meas_params"])
def test_trec_eval_ndcg_values(case):
    """qrels.test / qrels.rel_level with results.test, default and custom gains (-q, trec_eval's mean)."""
    expected_file, *_, cutoffs = CASES[case]
    _check(evaluate_case(case), expected_file, cutoffs)


def test_trec_eval_ndcg_values_truncated_run_with_c():
    """out.test.aqc: ``-c`` over results.trunc, whose lines carry extra fields after the run id.

    trec_eval ignores any field after the run id ("Any field following run_id is ignored",
    get_trec_results.c), so the file is valid input for it and the preset must read it as it stands.
    """
    expected_file, *_, cutoffs = CASES["aqc"]
    _check(evaluate_case("aqc"), expected_file, cutoffs)


def test_trec_eval_ndcg_values_truncated_run_without_trailing_fields(tmp_path):
    """The same numbers as out.test.aqc from results.trunc with the trailing fields dropped (a temp file).

    Separates the numbers (query 302 absent from the run scores 0 and counts in ``all``; query 303
    returns only 84 documents) from how the reader treats the extra fields.
    """
    lines = []
    for line in (DATA / "results.trunc").read_text().splitlines():
        if line.strip():
            lines.append("\t".join(line.split()[:6]))
    run = tmp_path / "results.trunc.6cols"
    run.write_text("\n".join(lines) + "\n")
    expected_file, *_, cutoffs = CASES["aqc"]
    result = evaluate_case("aqc", str(run))
    _check(result, expected_file, cutoffs)
    pq = result.per_query
    assert set(pq.loc[pq["query_id"] == "302", "status"]) == {"missing"}


@pytest.mark.parametrize("case", ["aq", "aqc", "aql"])
def test_trec_eval_preset(case):
    """``metric: {preset: trec_eval}`` (plus ``missing_queries: zero`` for -c) gives the same values."""
    expected_file, qrels, run, missing, _, cutoffs = CASES[case]
    metric = {"preset": "trec_eval"}
    if missing != "exclude":
        metric["missing_queries"] = missing
    spec = {**trec_spec(qrels, run), "metric": metric}
    result = ndcg_mlflow.evaluate(spec, base_dir=DATA)
    assert list(cutoffs) == list(dict.fromkeys(result.per_query["cutoff"]))
    _check(result, expected_file, cutoffs)


def test_missing_query_is_left_out_of_all_without_c(tmp_path):
    """Without -c, trec_eval's ``all`` is the mean over the queries present in the run."""
    lines = [ln for ln in (DATA / "results.test").read_text().splitlines() if ln.split()[:1] != ["302"]]
    run = tmp_path / "results.no302"
    run.write_text("\n".join(lines) + "\n")
    expected = parse_trec_eval_output("out.test.aq")
    result = evaluate_case("aq", str(run))
    for k in TREC_CUTOFFS:
        label = str(k)
        want = (expected[(label, "301")] + expected[(label, "303")]) / 2
        assert result.mean("run", label) == pytest.approx(want, abs=1e-4)
    summary = result.summary["systems"]["run"]["ndcg_at_all"]
    assert summary["n_evaluated"] == 2 and summary["n_missing"] == 1


def test_gain_table_scales_binary_grades_away():
    """qrels.test is binary: the -mndcg.1=3,... table gives the linear values (trec_eval prints the same)."""
    linear = _per_query_values(evaluate_case("aq"))
    table = _per_query_values(evaluate_case("meas_params"))
    for (cutoff, qid), value in table.items():
        if (cutoff, qid) in linear:
            assert value == pytest.approx(linear[(cutoff, qid)], abs=1e-12)


def test_graded_judgments_change_the_numbers():
    """qrels.rel_level (grades -1..4) gives other values than the binary qrels.test (sanity of the cases)."""
    aq = parse_trec_eval_output("out.test.aq")
    aql = parse_trec_eval_output("out.test.aql")
    assert aq[("all", "301")] != aql[("all", "301")]
    result = evaluate_case("aql")
    pq = result.per_query
    assert pq["ndcg"].between(0, 1).all()
