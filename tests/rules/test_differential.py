"""Differential and property tests on random data (hypothesis).

* against ``pytrec_eval`` (trec_eval's C code): the trec_eval settings give its per-query ``ndcg``,
  ``ndcg_cut_5`` and ``ndcg_cut_10`` and its means (with and without ``-c``);
* against ``sklearn.metrics.ndcg_score`` / ``dcg_score`` with ``ignore_ties=False``: tie-averaged gains
  (McSherry & Najork), the ideal over the returned documents, linear and exponential gains;
* properties: the ideal order scores 1, ``0 <= ndcg <= 1`` with non-negative gains, adding a constant
  to every score changes nothing, the order of the run file's lines changes nothing, and gain tables
  equal to the linear / exponential gains give the same numbers.

The comparisons with pytrec_eval and scikit-learn give the data as Python mappings
(``evaluate(spec, qrels={qid: {doc: grade}}, systems={"run": {qid: {doc: score}}})``), as those tools take
them; the properties write files, and ``test_tables_in_memory_equal_the_files`` checks that both give
the same per-query table.

Random data: 1-8 queries (ids such as ``1`` / ``01`` / ``q9`` / ``q10``), up to 30 returned documents
per query (doc ids whose string order differs from their numeric order: ``d9`` / ``d10`` / ``d09``),
grades -1..4 with whole queries of grades <= 0, scores from a small set (many ties), unjudged returned
documents, judged queries absent from the run and run queries absent from the judgments. Files are
written with a single space, a tab or several spaces between fields (both TREC reader paths).
"""

from __future__ import annotations

import math
import random
import tempfile
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ndcg_mlflow

pytrec_eval = pytest.importorskip("pytrec_eval")
sk_metrics = pytest.importorskip("sklearn.metrics")

SETTINGS = settings(
    max_examples=examples(250),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

QIDS = ["q1", "q2", "q9", "q10", "1", "01", "7", "Q3"]
DOCS = [f"d{i}" for i in range(1, 21)] + ["d09", "d010", "D5", "a", "b", "B", "10", "9", "100", "x-1", "x_1"]
SCORES = [-1.0, 0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0]  # multiples of 1/4: shifts stay exact
CUTOFFS = [5, 10, "all"]
LABELS = ["5", "10", "all"]
UNJUDGED_QID = "zz-unjudged"


@dataclass(frozen=True)
class Data:
    qrels: dict  # {qid: {doc: grade}}; every judged query has at least one judgment
    lines: tuple  # run file lines in file order: (qid, doc, rank, score)
    sep: str = " "

    @property
    def run(self) -> dict:
        out: dict = {}
        for qid, doc, _, score in self.lines:
            out.setdefault(qid, {})[doc] = score
        return out

    def returned(self, qid: str) -> list[tuple[str, float]]:
        return [(doc, score) for q, doc, _, score in self.lines if q == qid]

    def write(self, folder: Path, *, shift: float = 0.0, lines=None) -> tuple[str, str]:
        sep = self.sep
        qrels = [sep.join((qid, "0", doc, str(g))) for qid, docs in self.qrels.items() for doc, g in docs.items()]
        run = [
            sep.join((qid, "Q0", doc, str(rank), repr(score + shift), "tag"))
            for qid, doc, rank, score in (self.lines if lines is None else lines)
        ]
        (folder / "qrels.txt").write_text("\n".join(qrels) + "\n")
        (folder / "run.txt").write_text("\n".join(run) + "\n")
        return "qrels.txt", "run.txt"


@st.composite
def datasets(draw, grades=st.integers(-1, 4), max_docs: int = 30) -> Data:
    # which documents and in which order come from one seeded generator (cheap to draw, deterministic);
    # the sizes, grades and scores are drawn by hypothesis itself, so they shrink
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    n_q = draw(st.integers(1, 8))
    qids = rnd.sample(QIDS, n_q)
    qrels: dict = {}
    run: dict = {}
    for qid in qids:
        nonpositive = draw(st.integers(0, 4)) == 0  # a query without any relevant document
        n_judged = draw(st.integers(1, 20))
        judged_docs = rnd.sample(DOCS, n_judged)
        query_grades = draw(
            st.lists(st.integers(-1, 0) if nonpositive else grades, min_size=n_judged, max_size=n_judged)
        )
        judged = dict(zip(judged_docs, query_grades))
        qrels[qid] = judged
        if qid != qids[0] and draw(st.integers(0, 5)) == 5:
            continue  # judged, absent from the run (the first query is always returned: a run sharing no
            # query with the judgments is refused as the run of another collection)
        n_returned = draw(st.integers(1, max_docs))
        docs = rnd.sample(DOCS, n_returned)
        if draw(st.booleans()):  # judged documents first: more relevant documents returned
            docs = (judged_docs + [d for d in docs if d not in judged])[:n_returned]
            rnd.shuffle(docs)
        scores = draw(st.lists(st.sampled_from(SCORES), min_size=len(docs), max_size=len(docs)))
        run[qid] = list(zip(docs, scores))
    if draw(st.booleans()):
        docs = rnd.sample(DOCS, draw(st.integers(1, 5)))
        run[UNJUDGED_QID] = [(d, rnd.choice(SCORES)) for d in docs]
    lines = [(qid, doc, rank, score) for qid, rows in run.items() for rank, (doc, score) in enumerate(rows, 1)]
    rnd.shuffle(lines)
    sep = draw(st.sampled_from([" ", "\t", "   "]))
    return Data(qrels, tuple(lines), sep)


def spec(
    qrels: str,
    run: str,
    *,
    gain="linear",
    ties="id_descending",
    ideal="judged_catalog",
    empty_ideal="zero",
    unjudged="zero",
    missing_queries="exclude",
    cutoffs=CUTOFFS,
) -> dict:
    return {
        "spec_version": 1,
        "name": "differential",
        "metric": {
            "gain": gain,
            "cutoffs": list(cutoffs),
            "discount": "log2",
            "ties": ties,
            "ideal": ideal,
            "empty_ideal": empty_ideal,
            "unjudged": unjudged,
            "missing_queries": missing_queries,
        },
        "queries": {"weights": "uniform"},
        "data": {"qrels": qrels, "systems": {"run": run}},
    }


def evaluate_files(data: Data, *, shift: float = 0.0, lines=None, **metric):
    """The evaluation of the data written as TREC files (the separator drawn by ``datasets``)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        qrels, run = data.write(folder, shift=shift, lines=lines)
        result = ndcg_mlflow.evaluate(spec(qrels, run, **metric), base_dir=folder)
        _ = result.per_query  # build the table while the temporary folder exists
    return result


def evaluate(data: Data, *, shift: float = 0.0, lines=None, **metric):
    """The evaluation of the run's lines as a DataFrame (rank column included, in line order) and the judgments
    as a mapping: no file written, so the properties run many examples; ``test_tables_in_memory_equal_the_files``
    shows this gives exactly the per-query table of the files."""
    rows = [(q, d, rank, score + shift) for q, d, rank, score in (data.lines if lines is None else lines)]
    frame = pd.DataFrame(rows, columns=["query_id", "doc_id", "rank", "score"])
    in_memory = {k: v for k, v in spec("", "", **metric).items() if k != "data"}
    return ndcg_mlflow.evaluate(in_memory, qrels=data.qrels, systems={"run": frame})


def evaluate_in_memory(data: Data, **metric):
    """The same evaluation with the data given as mappings, as pytrec_eval takes them (no file written)."""
    in_memory = {k: v for k, v in spec("", "", **metric).items() if k != "data"}
    return ndcg_mlflow.evaluate(in_memory, qrels=data.qrels, systems={"run": data.run})


def table(result) -> dict:
    """``{(qid, cutoff): row}`` of the per-query frame."""
    pq = result.per_query
    return {(str(r.query_id), str(r.cutoff)): r for r in pq.itertuples(index=False)}


def gain_of(grade, kind: str) -> float:
    if grade is None or grade <= 0:
        return 0.0
    return float(grade) if kind == "linear" else 2.0**grade - 1.0


# --------------------------------------------------------------------------- pytrec_eval (trec_eval)

TREC = dict(gain="linear", ties="id_descending", ideal="judged_catalog", empty_ideal="zero", unjudged="zero")
PYTREC_KEYS = {"ndcg": "all", "ndcg_cut_5": "5", "ndcg_cut_10": "10"}


def pytrec(data: Data) -> dict:
    """pytrec_eval's per-query values for the judged queries of the run.

    A query whose judgments are all negative is not given to pytrec_eval: trec_eval's ndcg_cut then
    starts its ideal loop at relevance level -1 (``num_rel_levels - 1``), reads before its array and may
    loop forever (seen as a hang after some thousands of evaluators in one process). trec_eval's
    definition for a query without a relevant document is 0, which is what is filled in for it.
    """
    usable = {q: dict(d) for q, d in data.qrels.items() if max(d.values()) >= 0}
    evaluator = pytrec_eval.RelevanceEvaluator(usable, {"ndcg", "ndcg_cut.5,10"})
    run = data.run
    ref = evaluator.evaluate({q: docs for q, docs in run.items() if q in usable})
    for qid in set(data.qrels) - set(usable):
        if qid in run:
            ref[qid] = {measure: 0.0 for measure in PYTREC_KEYS}
    return ref


@SETTINGS
@given(datasets())
def test_matches_pytrec_eval_per_query(data):
    ref = pytrec(data)
    result = evaluate_in_memory(data, missing_queries="exclude", **TREC)
    rows = table(result)
    run = data.run
    # pytrec_eval scores the judged queries of the run (also those without a relevant document: 0)
    assert set(ref) == {q for q in data.qrels if q in run}
    for qid in ref:
        for measure, label in PYTREC_KEYS.items():
            got = rows[(qid, label)].ndcg
            assert got == pytest.approx(ref[qid][measure], abs=1e-9, rel=0), (qid, measure, data)
    for qid in set(data.qrels) - set(run):
        for label in LABELS:
            assert rows[(qid, label)].status == "missing"
            assert math.isnan(rows[(qid, label)].ndcg)
    assert UNJUDGED_QID not in {q for q, _ in rows}

    # trec_eval's "all": the mean over the queries it evaluated
    for measure, label in PYTREC_KEYS.items():
        values = [ref[q][measure] for q in ref]
        mean = result.mean("run", label)
        if values:
            assert mean == pytest.approx(float(np.mean(values)), abs=1e-9, rel=0)
        else:
            assert math.isnan(mean)


@SETTINGS
@given(datasets())
def test_matches_pytrec_eval_with_c(data):
    """``trec_eval -c``: judged queries absent from the run score 0 and count in the mean."""
    ref = pytrec(data)
    result = evaluate_in_memory(data, missing_queries="zero", **TREC)
    rows = table(result)
    for measure, label in PYTREC_KEYS.items():
        per_query = {q: ref.get(q, {}).get(measure, 0.0) for q in data.qrels}
        for qid, want in per_query.items():
            assert rows[(qid, label)].ndcg == pytest.approx(want, abs=1e-9, rel=0), (qid, measure, data)
        want_mean = sum(per_query.values()) / len(per_query)
        assert result.mean("run", label) == pytest.approx(want_mean, abs=1e-9, rel=0)


# --------------------------------------------------------------------------- sklearn (tie-averaged nDCG)


def _sklearn(y_true: np.ndarray, y_score: np.ndarray, k) -> tuple[float, float, float]:
    """(nDCG, DCG, ideal DCG over the same documents) at ``k`` with sklearn, ties averaged."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would mean sklearn's value is not a plain number
        ndcg = sk_metrics.ndcg_score([y_true], [y_score], k=k, ignore_ties=False)
        dcg = sk_metrics.dcg_score([y_true], [y_score], k=k, ignore_ties=False)
        idcg = sk_metrics.dcg_score([y_true], [y_true], k=k, ignore_ties=True)
    return float(ndcg), float(dcg), float(idcg)


@SETTINGS
@given(datasets(), st.sampled_from(["linear", "exponential"]))
def test_matches_sklearn_tie_averaged(data, gain):
    result = evaluate_in_memory(
        data,
        gain=gain,
        ties="average",
        ideal="candidates",
        empty_ideal="zero",
        unjudged="zero",
        missing_queries="exclude",
    )
    rows = table(result)
    for qid, judged in data.qrels.items():
        returned = data.returned(qid)
        if len(returned) < 2:
            continue  # sklearn refuses a single document ("only meaningful when there is more than 1")
        # y_true = the gain of each returned doc (sklearn's own gain is linear: pass 2^g - 1 for exponential)
        y_true = np.array([gain_of(judged.get(doc), gain) for doc, _ in returned])
        y_score = np.array([score for _, score in returned])
        for k, label in zip((5, 10, None), LABELS):
            ndcg, dcg, idcg = _sklearn(y_true, y_score, k)
            row = rows[(qid, label)]
            ctx = (qid, label, gain, list(zip(y_true, y_score)))
            assert row.dcg == pytest.approx(dcg, abs=1e-9, rel=0), ctx
            assert row.idcg_candidates == pytest.approx(idcg, abs=1e-9, rel=0), ctx
            # sklearn scores 0 where the ideal DCG is 0, as empty_ideal: zero does
            assert row.ndcg == pytest.approx(ndcg, abs=1e-9, rel=0), ctx
            assert row.status == ("ok" if idcg > 0 else "empty_ideal"), ctx


def test_sklearn_scores_zero_when_the_ideal_is_zero():
    """The installed sklearn gives 0 (no warning) when every y_true is 0: empty_ideal zero matches it."""
    ndcg, dcg, idcg = _sklearn(np.zeros(3), np.array([1.0, 1.0, 0.0]), None)
    assert (ndcg, dcg, idcg) == (0.0, 0.0, 0.0)


# --------------------------------------------------------------------------- properties

NONNEG_TABLE_GAINS = st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, 7.5, 10.0]), min_size=6, max_size=6)


@st.composite
def metrics(
    draw,
    ties=st.sampled_from(["displayed_order", "id_ascending", "id_descending", "average"]),
    monotone_table: bool = False,
) -> dict:
    kind = draw(st.sampled_from(["linear", "exponential", "table"]))
    if kind == "table":
        values = draw(NONNEG_TABLE_GAINS)
        if monotone_table:
            values = sorted(values)
        gain = dict(zip(range(-1, 5), values))
    else:
        gain = kind
    return dict(
        gain=gain,
        ties=draw(ties),
        ideal=draw(st.sampled_from(["judged_catalog", "candidates"])),
        empty_ideal=draw(st.sampled_from(["exclude", "zero", "one"])),
        unjudged=draw(st.sampled_from(["zero", "condense"])),
        missing_queries=draw(st.sampled_from(["zero", "exclude"])),
    )


def _assert_same_per_query(a, b, context, drop=()) -> None:
    pd.testing.assert_frame_equal(
        a.per_query.drop(columns=list(drop)),
        b.per_query.drop(columns=list(drop)),
        check_exact=False,
        rtol=0,
        atol=1e-12,
        obj=str(context),
    )


@SETTINGS
@given(datasets(), metrics())
def test_tables_in_memory_equal_the_files(data, metric):
    """The run's lines as a DataFrame (rank column included) and the judgments as a mapping give exactly the
    per-query table of the files, whichever TREC reader read them."""
    pd.testing.assert_frame_equal(
        evaluate(data, **metric).per_query, evaluate_files(data, **metric).per_query, check_exact=True
    )


@SETTINGS
@given(datasets(), metrics(monotone_table=True), st.booleans())
def test_ideal_order_scores_one(data, metric, with_unjudged):
    """Every judged document ranked by grade (score = grade), unjudged ones below: nDCG 1 at every cutoff."""
    lines = []
    for qid, judged in data.qrels.items():
        for doc, g in judged.items():
            lines.append((qid, doc, 0, float(g)))
        if with_unjudged:
            extra = [d for d in DOCS if d not in judged][:3]
            lines += [(qid, d, 0, -5.0) for d in extra]
    lines = [(q, d, rank, s) for rank, (q, d, _, s) in enumerate(lines, 1)]
    ideal_data = replace(data, lines=tuple(lines))
    result = evaluate(ideal_data, **metric)
    pq = result.per_query
    assert set(pq["status"]) <= {"ok", "empty_ideal"}
    ok = pq[pq["status"] == "ok"]
    assert np.allclose(ok["ndcg"], 1.0, rtol=0, atol=1e-12), (metric, ok)
    assert np.allclose(ok["dcg"], ok["idcg"], rtol=0, atol=1e-12)
    empty = pq[pq["status"] == "empty_ideal"]
    ideal_col = "idcg" if metric["ideal"] == "judged_catalog" else "idcg_candidates"
    assert (empty[ideal_col] <= 0).all()
    # with linear / exponential gains, exactly the queries with a positive grade have a positive ideal
    if metric["gain"] in ("linear", "exponential"):
        positive = {q for q, judged in data.qrels.items() if max(judged.values()) > 0}
        assert set(ok["query_id"].astype(str)) == positive


@SETTINGS
@given(datasets(), metrics())
def test_ndcg_between_zero_and_one(data, metric):
    result = evaluate(data, **metric)
    pq = result.per_query
    ndcg = pq["ndcg"].to_numpy(dtype=float)
    defined = ~np.isnan(ndcg)
    assert ((ndcg[defined] >= -1e-12) & (ndcg[defined] <= 1 + 1e-12)).all(), (metric, pq[defined])
    ok = pq[pq["status"] == "ok"]
    ideal_col = "idcg" if metric["ideal"] == "judged_catalog" else "idcg_candidates"
    assert (ok["dcg"] <= ok[ideal_col] + 1e-12).all()
    assert (pq["dcg"] >= 0).all()
    # what the policies say about undefined values
    assert pq.loc[pq["status"] == "missing", "ndcg"].pipe(
        lambda s: s.isna().all() if metric["missing_queries"] == "exclude" else (s == 0).all()
    )
    empty = pq.loc[pq["status"] == "empty_ideal", "ndcg"]
    assert {"exclude": empty.isna().all(), "zero": (empty == 0).all(), "one": (empty == 1).all()}[metric["empty_ideal"]]


@SETTINGS
@given(datasets(), metrics(), st.sampled_from([-7.0, 0.5, 3.0, 1024.0]))
def test_adding_a_constant_to_every_score_changes_nothing(data, metric, shift):
    _assert_same_per_query(evaluate(data, **metric), evaluate(data, shift=shift, **metric), (metric, shift))


@SETTINGS
@given(datasets(), metrics(), st.integers(0, 2**32 - 1))
def test_order_of_run_lines_changes_nothing(data, metric, seed):
    """Lines shuffled: the same numbers under id_descending, id_ascending and average, and under
    displayed_order too, as each line keeps its rank (the ranks of a query are distinct here)."""
    lines = list(data.lines)
    random.Random(seed).shuffle(lines)
    # judged_coverage under `average` ties: see test_judged_coverage_under_average_ties_ignores_line_order
    drop = ("judged_coverage",) if metric["ties"] == "average" else ()
    _assert_same_per_query(evaluate(data, **metric), evaluate(data, lines=lines, **metric), metric, drop)


@pytest.mark.parametrize("unjudged", ["zero", "condense"])
def test_judged_coverage_under_average_ties_ignores_line_order(unjudged):
    """Under ``ties: average`` the order inside a tied group is undefined, so no reported number may depend on
    it. nDCG does not (gains are averaged over the group), but judged_coverage at a cutoff that cuts a tied
    group counts the group's first lines in file order: the same ranking written in another line order
    reports another coverage. Expected: the group's judged share spread over its positions, as gains are
    (here 1 judged of 2 tied documents, cutoff 1: coverage 0.5 either way).
    """
    data = Data({"q": {"j": 1}}, (("q", "j", 1, 1.0), ("q", "u", 2, 1.0)))
    swapped = tuple(reversed(data.lines))
    metric = dict(
        gain="linear",
        ties="average",
        ideal="judged_catalog",
        empty_ideal="zero",
        unjudged=unjudged,
        missing_queries="exclude",
        cutoffs=[1, "all"],
    )
    a, b = table(evaluate(data, **metric)), table(evaluate(data, lines=swapped, **metric))
    # nDCG@1 is the same either way: the averaged gain (zero), or the only judged document (condense)
    assert a[("q", "1")].ndcg == b[("q", "1")].ndcg == pytest.approx(0.5 if unjudged == "zero" else 1.0)
    assert a[("q", "all")].judged_coverage == b[("q", "all")].judged_coverage == 0.5
    assert (a[("q", "1")].judged_coverage, b[("q", "1")].judged_coverage) == (0.5, 0.5)


@SETTINGS
@given(datasets(), metrics(), st.sampled_from(["linear", "exponential"]))
def test_gain_tables_equal_to_linear_and_exponential(data, metric, kind):
    """A table {g: max(g, 0)} is the linear gain, {g: 2^g - 1 (0 for g <= 0)} the exponential gain."""
    named = evaluate(data, **{**metric, "gain": kind})
    tabled = evaluate(data, **{**metric, "gain": {g: gain_of(g, kind) for g in range(-1, 5)}})
    _assert_same_per_query(named, tabled, (kind, metric))


def test_string_order_of_ids_breaks_ties():
    """id_descending is plain string order (trec_eval's strcmp): 'd9' > 'd10' > 'd09'."""
    data = Data({"q": {"d9": 0, "d10": 1, "d09": 2}}, (("q", "d10", 1, 1.0), ("q", "d09", 2, 1.0), ("q", "d9", 3, 1.0)))
    result = evaluate(data, cutoffs=[1, 2, "all"], **TREC)
    rows = table(result)
    ideal1 = 2.0
    assert rows[("q", "1")].dcg == 0.0  # d9 first
    assert rows[("q", "2")].dcg == pytest.approx(1 / math.log2(3))  # then d10
    assert rows[("q", "1")].idcg == ideal1
    ref = pytrec(data)
    assert rows[("q", "all")].ndcg == pytest.approx(ref["q"]["ndcg"], abs=1e-12)


@SETTINGS
@given(datasets(), metrics())
def test_condense_equals_zero_on_the_run_without_its_unjudged_documents(data, metric):
    """`unjudged: condense` gives the numbers of `unjudged: zero` on the run whose unjudged lines are removed
    (judged coverage aside: it describes the run as returned)."""
    judged_lines = tuple(line for line in data.lines if line[1] in data.qrels.get(line[0], {}))
    if not any(q in data.qrels for q, *_ in judged_lines):
        return  # nothing judged returned at all: the stripped run would be refused as another collection's
    condensed = evaluate(data, **{**metric, "unjudged": "condense"})
    stripped = evaluate(replace(data, lines=judged_lines), **{**metric, "unjudged": "zero"})
    # a query whose returned documents are all unjudged is still returned (condensed to nothing) in the
    # first evaluation but missing from the stripped run: compare the queries both return
    a, b = table(condensed), table(stripped)
    for key, row in b.items():
        if row.status == "missing" or a[key].status == "missing":
            continue
        for col in ("ndcg", "dcg", "idcg", "idcg_candidates"):
            x, y = getattr(a[key], col), getattr(row, col)
            assert (np.isnan(x) and np.isnan(y)) or abs(x - y) <= 1e-12, (key, col, x, y, metric)


@SETTINGS
@given(datasets(), metrics())
def test_a_query_does_not_depend_on_the_other_queries(data, metric):
    """Each query evaluated alone (its judgments and lines only) gives its row of the whole evaluation."""
    whole = table(evaluate(data, **metric))
    returned = {q for q, *_ in data.lines}
    for qid in data.qrels:
        if qid not in returned:
            continue
        alone = replace(data, qrels={qid: data.qrels[qid]}, lines=tuple(x for x in data.lines if x[0] == qid))
        for key, row in table(evaluate(alone, **metric)).items():
            for col in ("ndcg", "dcg", "idcg", "idcg_candidates", "judged_coverage", "n_returned", "status"):
                x, y = getattr(whole[key], col), getattr(row, col)
                same = x == y if isinstance(x, str) else (np.isnan(x) and np.isnan(y)) or abs(x - y) <= 1e-12
                assert same, (key, col, x, y, metric)
