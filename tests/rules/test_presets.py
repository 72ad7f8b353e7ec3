"""``metric.preset``: other tools' nDCG definitions as spec presets, checked against the tools themselves.

* spec handling: a preset fills every metric field, fields beside it override it, ``validate`` / ``explain``
  say where each field came from, unknown preset names and unknown keys are errors;
* conformance: every ``ndcg`` / ``ndcg_cut_K`` value of NIST trec_eval's own test outputs
  (``NDCG_MLFLOW_TREC_EVAL_TESTS``, default ``../shared/conformance/trec_eval``, read in place, skipped when
  absent) through ``preset: trec_eval``;
* differential tests on random data (hypothesis, derandomized): ``preset: trec_eval`` against pytrec_eval,
  ``preset: sklearn`` against ``sklearn.metrics.ndcg_score(ignore_ties=False)``, ``preset: gdeval`` against a
  real run of ``gdeval.pl`` under perl; ``preset: torchmetrics`` against the values its documentation prints.

Random data: up to 6 queries, up to 25 returned documents per query, grades -1..4 with whole queries of grades 0
or <= 0, scores from a small set (many ties), unjudged returned documents, judged queries absent from the run and
run queries absent from the judgments.

pytrec_eval 0.5 hangs (a busy loop in trec_eval's C code) once it has evaluated queries whose judgments are ALL
negative: ``RelevanceEvaluator({'q': {'a': -1}, 'r': {'b': 1}}, {'ndcg'}).evaluate(...)`` repeated in one process
stops returning after somewhere between 2 and ~100 calls (a single call returns 0.0). Queries whose judgments are
all <= 0 with at least one 0 are fine (checked on 1,373 random examples). So the pytrec_eval comparison never gives
it an all-negative query (what trec_eval does with one, score 0, is checked without pytrec_eval), and pytrec_eval
runs in a worker process with a timeout: damage done by other test files' calls in the pytest process cannot reach
it, and a hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import TREC_EVAL_DATA, examples, parse_trec_eval_output, trec_eval_missing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ndcg_mlflow
from ndcg_mlflow.cli import main
from ndcg_mlflow.errors import SpecError
from ndcg_mlflow.spec import METRIC_FIELDS, load_spec
from ndcg_mlflow.spec.presets import FIELDS, PRESETS, TOOLS

CONFORMANCE = TREC_EVAL_DATA

SETTINGS = settings(
    max_examples=examples(60),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

QIDS = ["q1", "q2", "q9", "q10", "1", "01", "7", "Q3"]
NUMERIC_QIDS = ["1", "2", "7", "10", "33", "101", "250"]  # gdeval: numeric topics, no two equal as numbers
DOCS = [f"d{i}" for i in range(1, 16)] + ["d09", "d010", "D5", "a", "b", "B", "10", "9", "100", "x-1", "x_1"]
SCORES = [-1.0, 0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0]
TREC_CUTOFFS = [5, 10, 15, 20, 30, 100, 200, 500, 1000, "all"]


# --------------------------------------------------------------------------- helpers


def spec_dict(metric: dict, qrels: str = "qrels.txt", run: str = "run.txt", **extra) -> dict:
    return {
        "spec_version": 1,
        "name": "presets",
        "metric": metric,
        "queries": {"weights": "uniform"},
        "data": {"qrels": qrels, "systems": {"run": run}},
        **extra,
    }


@dataclass(frozen=True)
class Data:
    qrels: dict  # {qid: {doc: grade}}
    lines: tuple  # (qid, doc, rank, score), file order

    @property
    def run(self) -> dict:
        out: dict = {}
        for qid, doc, _, score in self.lines:
            out.setdefault(qid, {})[doc] = score
        return out

    def returned(self, qid: str) -> list[tuple[str, float]]:
        return [(doc, score) for q, doc, _, score in self.lines if q == qid]

    def write(self, folder: Path) -> None:
        qrels = [f"{q} 0 {d} {g}" for q, docs in self.qrels.items() for d, g in docs.items()]
        run = [f"{q} Q0 {d} {rank} {score!r} tag" for q, d, rank, score in self.lines]
        (folder / "qrels.txt").write_text("\n".join(qrels) + "\n")
        (folder / "run.txt").write_text("\n".join(run) + "\n")


@st.composite
def datasets(
    draw,
    qids=QIDS,
    kinds=("graded", "graded", "graded", "zero", "nonpositive", "negative"),
    grades=st.integers(-1, 4),
    max_docs: int = 25,
) -> Data:
    """Random judgments and one run. ``kinds`` of judged query: graded, all 0, all <= 0 (at least one 0),
    all negative."""
    n_q = draw(st.integers(1, 6))
    ids = draw(st.lists(st.sampled_from(qids), min_size=n_q, max_size=n_q, unique=True))
    unused = [q for q in qids if q not in ids]
    qrels: dict = {}
    run: dict = {}
    for qid in ids:
        kind = draw(st.sampled_from(kinds))
        n_judged = draw(st.integers(1, 15))
        judged_docs = draw(st.permutations(DOCS))[:n_judged]
        if kind == "graded":
            g = draw(st.lists(grades, min_size=n_judged, max_size=n_judged))
            if max(g) < 0:
                g[0] = 0  # all-negative queries only where kinds ask for them
        elif kind == "zero":
            g = [0] * n_judged
        elif kind == "nonpositive":
            g = [0] + draw(st.lists(st.integers(-1, 0), min_size=n_judged - 1, max_size=n_judged - 1))
        else:
            g = [-1] * n_judged
        qrels[qid] = dict(zip(judged_docs, g))
        if draw(st.integers(0, 5)) == 0:
            continue  # judged, absent from the run
        n_returned = draw(st.integers(1, max_docs))
        docs = draw(st.permutations(DOCS))[:n_returned]
        if draw(st.booleans()):  # mostly judged documents
            docs = draw(st.permutations((judged_docs + [d for d in docs if d not in judged_docs])[:n_returned]))
        scores = draw(st.lists(st.sampled_from(SCORES), min_size=len(docs), max_size=len(docs)))
        run[qid] = list(zip(docs, scores))
    if unused and (not run or draw(st.booleans())):  # a run query without judgments
        extra = draw(st.sampled_from(unused))
        docs = draw(st.lists(st.sampled_from(DOCS), unique=True, min_size=1, max_size=4))
        run[extra] = [(d, draw(st.sampled_from(SCORES))) for d in docs]
    if not set(run) & set(qrels):  # a run returning no judged query at all is refused (another collection's)
        run[ids[0]] = [(DOCS[0], 1.0)]
    lines = [(q, d, rank, s) for q, rows in run.items() for rank, (d, s) in enumerate(rows, 1)]
    return Data(qrels, tuple(draw(st.permutations(lines))))


def evaluate_data(data: Data, metric: dict, *, with_folder=None):
    """Evaluate ``data`` under ``metric``; ``with_folder(folder)`` runs while the files exist."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        data.write(folder)
        result = ndcg_mlflow.evaluate(spec_dict(metric), base_dir=folder)
        _ = result.per_query  # build the table while the temporary folder exists
        extra = with_folder(folder) if with_folder else None
    return result, extra


def rows_of(result) -> dict:
    pq = result.per_query
    return {(str(r.query_id), str(r.cutoff)): r for r in pq.itertuples(index=False)}


def mean_of(values) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


def same(a: float, b: float, tol: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol


# --------------------------------------------------------------------------- the presets themselves


def test_presets_are_complete_and_parse():
    assert set(PRESETS) == {"trec_eval", "gdeval", "sklearn", "torchmetrics"}
    assert set(FIELDS) == set(METRIC_FIELDS)
    for tool in TOOLS:
        assert set(tool.notes) == set(FIELDS), tool.name
        assert set(tool.values) == set(FIELDS), tool.name
    for name, preset in PRESETS.items():
        assert preset.reproducible
        spec = load_spec(spec_dict({"preset": name}))
        m = spec.metric
        assert m.preset == name
        assert all(m.source_of(f) == f"preset {name}" for f in METRIC_FIELDS)
        # the preset alone resolves to exactly the values it declares
        explicit = load_spec(spec_dict(dict(preset.values)))
        for f in METRIC_FIELDS:
            assert getattr(m, f) == getattr(explicit.metric, f), (name, f)
        assert spec.definition_digest() == explicit.definition_digest()
        assert spec.resolved()["metric.preset"] == name


def test_preset_values_per_tool():
    m = load_spec(spec_dict({"preset": "trec_eval"})).metric
    assert (m.gain.kind, m.ties, m.ideal, m.empty_ideal, m.unjudged, m.missing_queries) == (
        "linear",
        "id_descending",
        "judged_catalog",
        "zero",
        "zero",
        "exclude",
    )
    assert m.cutoffs == (5, 10, 15, 20, 30, 100, 200, 500, 1000, None)
    g = load_spec(spec_dict({"preset": "gdeval"})).metric
    assert (g.gain.kind, g.cutoffs, g.ties, g.empty_ideal, g.missing_queries) == (
        "exponential",
        (20,),
        "id_descending",
        "exclude",
        "exclude",
    )
    for name in ("sklearn", "torchmetrics"):
        s = load_spec(spec_dict({"preset": name})).metric
        assert (s.gain.kind, s.cutoffs, s.ties, s.ideal, s.empty_ideal) == (
            "linear",
            (None,),
            "average",
            "candidates",
            "zero",
        )


def test_fields_beside_the_preset_override_it():
    spec = load_spec(spec_dict({"preset": "trec_eval", "gain": "exponential", "cutoffs": [3, "all"]}))
    m = spec.metric
    assert m.gain.kind == "exponential" and m.cutoffs == (3, None)
    assert m.source_of("gain") == "spec" and m.source_of("cutoffs") == "spec"
    assert m.source_of("ties") == "preset trec_eval" and m.ties == "id_descending"
    # a table overrides too
    t = load_spec(spec_dict({"preset": "sklearn", "gain": {0: 0, 1: 1, 2: 5}})).metric
    assert t.gain.kind == "table" and t.gain.table == ((0.0, 0.0), (1.0, 1.0), (2.0, 5.0))
    assert t.ties == "average"
    # the preset's own list is never changed by an evaluation or an override
    assert PRESETS["trec_eval"].values["cutoffs"] == TREC_CUTOFFS


def test_preset_with_exponential_gain_gives_exponential_numbers(tmp_path):
    data = Data({"q": {"d1": 3, "d2": 1, "d3": 0}}, (("q", "d2", 1, 2.0), ("q", "d1", 2, 1.0), ("q", "d3", 3, 0.5)))
    data.write(tmp_path)
    lin = ndcg_mlflow.evaluate(spec_dict({"preset": "trec_eval"}), base_dir=tmp_path)
    exp = ndcg_mlflow.evaluate(spec_dict({"preset": "trec_eval", "gain": "exponential"}), base_dir=tmp_path)
    d = 1 / math.log2(3)
    assert lin.mean("run", "all") == pytest.approx((1 + 3 * d) / (3 + 1 * d), abs=1e-12)
    assert exp.mean("run", "all") == pytest.approx((1 + 7 * d) / (7 + 1 * d), abs=1e-12)


def test_validate_marks_where_each_field_came_from(tmp_path, capsys):
    Data({"q": {"d1": 1}}, (("q", "d1", 1, 1.0),)).write(tmp_path)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_dict({"preset": "trec_eval", "gain": "exponential"})))
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    lines = {ln.strip().split(":")[0]: ln.strip() for ln in out.splitlines() if ln.strip().startswith("metric.")}
    assert lines["metric.preset"] == "metric.preset: trec_eval"
    assert lines["metric.gain"] == "metric.gain: exponential  [from spec]"
    assert lines["metric.ties"] == "metric.ties: id_descending  [from preset trec_eval]"
    for f in ("cutoffs", "discount", "ideal", "empty_ideal", "unjudged", "missing_queries"):
        assert lines[f"metric.{f}"].endswith("[from preset trec_eval]"), lines[f"metric.{f}"]
    # without a preset every field is the spec's
    path.write_text(yaml.safe_dump(spec_dict(dict(PRESETS["gdeval"].values))))
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "metric.preset: none" in out
    assert out.count("[from spec]") == len(METRIC_FIELDS) and "[from preset" not in out


def test_explain_marks_where_each_field_came_from(tmp_path, capsys):
    Data({"q": {"d1": 1}}, (("q", "d1", 1, 1.0),)).write(tmp_path)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_dict({"preset": "trec_eval", "gain": "exponential"})))
    assert main(["explain", str(path)]) == 0
    out = capsys.readouterr().out
    assert "metric preset: trec_eval" in out
    assert "- gain: exponential  [from spec]" in out
    assert "- ties: id_descending  [from preset trec_eval]" in out


@pytest.mark.parametrize(
    "name, hint",
    [
        ("trec-eval", "trec_eval"),
        ("sklean", "sklearn"),
        ("gdevals", "gdeval"),
        ("torchmetric", "torchmetrics"),
        ("TREC_EVAL", None),
        ("ranx", None),
    ],
)
def test_unknown_preset_is_an_error_with_did_you_mean(name, hint):
    with pytest.raises(SpecError) as exc:
        load_spec(spec_dict({"preset": name}))
    text = str(exc.value)
    assert "metric.preset" in text and repr(name) in text
    for known in PRESETS:
        assert known in text
    if hint:
        assert f"did you mean '{hint}'" in text


@pytest.mark.parametrize("value", [1, ["trec_eval"], {"name": "trec_eval"}, True])
def test_preset_must_be_a_name(value):
    with pytest.raises(SpecError, match="metric.preset"):
        load_spec(spec_dict({"preset": value}))


def test_unknown_key_beside_a_preset_is_still_an_error(tmp_path, capsys):
    with pytest.raises(SpecError) as exc:
        load_spec(spec_dict({"preset": "trec_eval", "gian": "exponential"}))
    assert "metric.gian" in str(exc.value) and "did you mean 'gain'" in str(exc.value)
    with pytest.raises(SpecError, match="metric.tie_breaking"):
        load_spec(spec_dict({"preset": "gdeval", "tie_breaking": "average"}))
    # through the command: exit 2, no traceback
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_dict({"preset": "trec_eval", "cutofs": [5]})))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "metric.cutofs" in err and "did you mean 'cutoffs'" in err and "Traceback" not in err


def test_invalid_value_beside_a_preset_is_checked():
    with pytest.raises(SpecError, match=r"metric\.ties.*did you mean 'average'"):
        load_spec(spec_dict({"preset": "sklearn", "ties": "averge"}))
    with pytest.raises(SpecError, match=r"metric\.cutoffs"):
        load_spec(spec_dict({"preset": "trec_eval", "cutoffs": []}))


def test_without_a_preset_every_field_is_required():
    metric = dict(PRESETS["trec_eval"].values)
    del metric["ties"]
    with pytest.raises(SpecError, match="metric.ties"):
        load_spec(spec_dict(metric))


# --------------------------------------------------------------------------- trec_eval conformance (its own files)

needs_conformance = pytest.mark.skipif(trec_eval_missing() is not None, reason=str(trec_eval_missing()))


def trec_eval_gain_table(levels: dict, qrels_file: Path) -> dict:
    """trec_eval's ``-m ndcg.g=gain,...``: listed grades get the listed gain, the others keep their own value
    (grades <= 0 earn 0). Our table must name every grade present in the qrels."""
    grades = {int(line.split()[3]) for line in qrels_file.read_text().splitlines() if line.strip()}
    return {g: levels.get(g, max(g, 0)) for g in sorted(grades | set(levels))}


CONFORMANCE_CASES = {
    # name: (expected output, qrels, run, metric fields beside `preset: trec_eval`)
    "aq": ("out.test.aq", "qrels.test", "results.test", {}),
    "aqc": ("out.test.aqc", "qrels.test", "results.trunc", {"missing_queries": "zero"}),
    "aql": ("out.test.aql", "qrels.rel_level", "results.test", {}),
    "meas_params": (
        "out.test.meas_params",
        "qrels.test",
        "results.test",
        {"gain": "TABLE", "cutoffs": [10, 20, 23, "all"]},
    ),
}


@needs_conformance
@pytest.mark.parametrize("case", sorted(CONFORMANCE_CASES))
def test_trec_eval_conformance_through_the_preset(case):
    expected_file, qrels, run, overrides = CONFORMANCE_CASES[case]
    metric = {"preset": "trec_eval", **overrides}
    if metric.get("gain") == "TABLE":
        metric["gain"] = trec_eval_gain_table({1: 3, 2: 9, 4: 4.5}, CONFORMANCE / qrels)
    result = ndcg_mlflow.evaluate(spec_dict(metric, qrels=qrels, run=run), base_dir=CONFORMANCE)
    m = result.spec.metric
    for f in METRIC_FIELDS:
        assert m.source_of(f) == ("spec" if f in overrides else "preset trec_eval")

    expected = parse_trec_eval_output(expected_file)
    labels = [str(k) for k in (overrides.get("cutoffs") or TREC_CUTOFFS)]
    assert {c for c, _ in expected} == set(labels)  # every value we compute, trec_eval printed
    pq = result.per_query
    ours = {(str(c), str(q)): v for c, q, v in zip(pq["cutoff"], pq["query_id"], pq["ndcg"])}
    problems = []
    for (cutoff, qid), want in sorted(expected.items()):
        got = result.mean("run", cutoff) if qid == "all" else ours.get((cutoff, qid), float("nan"))
        if not (math.isfinite(got) and abs(got - want) <= 5e-5):
            problems.append(f"{cutoff} {qid}: trec_eval {want:.4f}, ours {got!r}")
    assert not problems, f"{case}: {len(problems)} of {len(expected)} values differ:\n" + "\n".join(problems)
    # the queries trec_eval printed are the queries we averaged
    printed = {q for _, q in expected if q != "all"}
    assert set(pq.loc[pq["ndcg"].notna(), "query_id"].astype(str)) == printed
    assert len(expected) == len(labels) * (len(printed) + 1)


@needs_conformance
def test_conformance_without_c_leaves_the_absent_query_out():
    """results.trunc without -c: query 302 is absent, so 'all' is the mean of 301 and 303 (out.test.aqc / -c
    averages 0 for 302 in)."""
    result = ndcg_mlflow.evaluate(
        spec_dict({"preset": "trec_eval"}, qrels="qrels.test", run="results.trunc"), base_dir=CONFORMANCE
    )
    with_c = parse_trec_eval_output("out.test.aqc")
    for k in TREC_CUTOFFS:
        label = str(k)
        want = (with_c[(label, "301")] + with_c[(label, "303")]) / 2
        assert result.mean("run", label) == pytest.approx(want, abs=1e-4)
        assert with_c[(label, "302")] == 0.0
        assert with_c[(label, "all")] == pytest.approx(want * 2 / 3, abs=1e-4)
    assert result.summary["systems"]["run"]["ndcg_at_all"]["n_missing"] == 1


# --------------------------------------------------------------------------- trec_eval vs pytrec_eval


PYTREC_WORKER = r"""
import json, sys
import pytrec_eval
for line in sys.stdin:
    qrels, run = json.loads(line)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg", "ndcg_cut.5,10"})
    sys.stdout.write(json.dumps(evaluator.evaluate(run)) + "\n")
    sys.stdout.flush()
"""


class PytrecWorker:
    """pytrec_eval in its own process, one JSON line per evaluation, with a timeout.

    Its own process: heap damage done by other tests' pytrec_eval calls in this process (see the module
    docstring) cannot reach it, and a hang fails the test after ``timeout`` seconds instead of stalling the suite.
    """

    def __init__(self):
        import queue
        import sys
        import threading

        self.proc = subprocess.Popen(
            [sys.executable, "-c", PYTREC_WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(ln) for ln in self.proc.stdout], daemon=True).start()

    def evaluate(self, qrels: dict, run: dict, timeout: float = 30.0) -> dict:
        import json
        import queue

        self.proc.stdin.write(json.dumps([qrels, run]) + "\n")
        self.proc.stdin.flush()
        try:
            return json.loads(self.lines.get(timeout=timeout))
        except queue.Empty:
            self.close()
            pytest.fail(f"pytrec_eval did not answer within {timeout} s for qrels={qrels!r} run={run!r}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def pytrec_worker():
    pytest.importorskip("pytrec_eval")
    worker = PytrecWorker()
    yield worker
    worker.close()


def _pytrec(worker: PytrecWorker, data: Data) -> dict:
    # see the module docstring: never an all-negative query (pytrec_eval 0.5 hangs after a few dozen)
    assert all(max(d.values()) >= 0 for d in data.qrels.values())
    return worker.evaluate({q: dict(d) for q, d in data.qrels.items()}, data.run)


PYTREC_KEYS = {"ndcg": "all", "ndcg_cut_5": "5", "ndcg_cut_10": "10"}
PYTREC_DATA = datasets(kinds=("graded", "graded", "graded", "zero", "nonpositive"))


@pytest.mark.integration
@SETTINGS
@given(data=PYTREC_DATA)
def test_trec_eval_preset_matches_pytrec_eval(pytrec_worker, data):
    ref = _pytrec(pytrec_worker, data)
    result, _ = evaluate_data(data, {"preset": "trec_eval"})
    rows = rows_of(result)
    run = data.run
    assert set(ref) == {q for q in data.qrels if q in run}
    for qid in ref:
        for measure, label in PYTREC_KEYS.items():
            assert rows[(qid, label)].ndcg == pytest.approx(ref[qid][measure], abs=1e-9, rel=0), (qid, measure)
            # a query without a relevant document scores 0 in both
    for qid in set(data.qrels) - set(run):
        assert rows[(qid, "all")].status == "missing" and math.isnan(rows[(qid, "all")].ndcg)
    assert {q for q, _ in rows} == set(data.qrels)  # run-only queries are not evaluated
    for measure, label in PYTREC_KEYS.items():
        assert same(result.mean("run", label), mean_of([ref[q][measure] for q in ref]), 1e-9)
    # the other preset cutoffs are computed too
    assert {c for _, c in rows} == {str(k) for k in TREC_CUTOFFS}


@pytest.mark.integration
@SETTINGS
@given(data=PYTREC_DATA)
def test_trec_eval_preset_with_missing_zero_matches_trec_eval_c(pytrec_worker, data):
    """``missing_queries: zero`` beside the preset is trec_eval -c: judged queries absent from the run score 0."""
    ref = _pytrec(pytrec_worker, data)
    result, _ = evaluate_data(data, {"preset": "trec_eval", "missing_queries": "zero", "cutoffs": [5, 10, "all"]})
    rows = rows_of(result)
    for measure, label in PYTREC_KEYS.items():
        per_query = {q: ref.get(q, {}).get(measure, 0.0) for q in data.qrels}
        for qid, want in per_query.items():
            assert rows[(qid, label)].ndcg == pytest.approx(want, abs=1e-9, rel=0), (qid, measure)
        assert result.mean("run", label) == pytest.approx(float(np.mean(list(per_query.values()))), abs=1e-9)


def test_trec_eval_preset_scores_an_all_negative_query_zero(tmp_path):
    """trec_eval: a query with no relevant document scores 0 (m_ndcg.c) — also when every grade is negative.
    (Not compared with pytrec_eval, which hangs on such queries: see the module docstring.)"""
    Data(
        {"neg": {"a": -1, "b": -1}, "pos": {"a": 2}}, (("neg", "a", 1, 1.0), ("neg", "c", 2, 0.5), ("pos", "a", 1, 1.0))
    ).write(tmp_path)
    result = ndcg_mlflow.evaluate(spec_dict({"preset": "trec_eval"}), base_dir=tmp_path)
    rows = rows_of(result)
    for k in TREC_CUTOFFS:
        assert rows[("neg", str(k))].ndcg == 0.0 and rows[("neg", str(k))].status == "empty_ideal"
        assert result.mean("run", str(k)) == 0.5


# --------------------------------------------------------------------------- sklearn


def _sk_ndcg(y_true, y_score, k=None) -> float:
    sk_metrics = pytest.importorskip("sklearn.metrics")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return float(sk_metrics.ndcg_score([y_true], [y_score], k=k, ignore_ties=False))


SK_DATA = datasets(kinds=("graded", "graded", "graded", "zero"), grades=st.integers(0, 4))


@SETTINGS
@given(SK_DATA)
def test_sklearn_preset_matches_ndcg_score(data):
    pytest.importorskip("sklearn")
    result, _ = evaluate_data(data, {"preset": "sklearn"})
    with_k, _ = evaluate_data(data, {"preset": "sklearn", "cutoffs": [3, "all"]})
    rows, rows_k = rows_of(result), rows_of(with_k)
    values = []
    for qid, judged in data.qrels.items():
        returned = data.returned(qid)
        if not returned:
            assert rows[(qid, "all")].status == "missing" and math.isnan(rows[(qid, "all")].ndcg)
            continue
        # per query: y_true = the grade of each returned document, 0 where unjudged
        y_true = np.array([float(judged.get(doc, 0)) for doc, _ in returned])
        y_score = np.array([s for _, s in returned])
        if len(returned) == 1:  # sklearn refuses a single document; its definition gives 1 or 0 (all irrelevant)
            want, want_3 = float(y_true[0] > 0), float(y_true[0] > 0)
        else:
            want, want_3 = _sk_ndcg(y_true, y_score), _sk_ndcg(y_true, y_score, k=3)
        ctx = (qid, list(zip(y_true, y_score)))
        assert rows[(qid, "all")].ndcg == pytest.approx(want, abs=1e-9, rel=0), ctx
        assert rows_k[(qid, "3")].ndcg == pytest.approx(want_3, abs=1e-9, rel=0), ctx
        assert rows_k[(qid, "all")].ndcg == pytest.approx(want, abs=1e-9, rel=0), ctx
        values.append(want)
    assert same(result.mean("run", "all"), mean_of(values), 1e-9)


# --------------------------------------------------------------------------- gdeval.pl


def _gdeval_script() -> str:
    if shutil.which("perl") is None:
        pytest.skip("perl is not installed")
    ir_measures = pytest.importorskip("ir_measures")
    script = os.path.join(os.path.dirname(ir_measures.__file__), "bin", "gdeval.pl")
    if not os.path.isfile(script):
        pytest.skip(f"gdeval.pl not found at {script}")
    return script


def run_gdeval(folder: Path, k: int) -> dict[str, float]:
    """``{topic: ndcg@k}`` as gdeval.pl prints it (5 decimals)."""
    proc = subprocess.run(
        ["perl", _gdeval_script(), str(folder / "qrels.txt"), str(folder / "run.txt"), str(k)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"runid,topic,ndcg@{k},err@{k}"
    out = {}
    for line in lines[1:]:
        runid, topic, ndcg, _err = line.split(",")
        assert runid == "tag" and topic not in out
        out[topic] = float(ndcg)
    return out


GDEVAL_DATA = datasets(qids=NUMERIC_QIDS, grades=st.integers(-1, 4), max_docs=30)


@pytest.mark.integration
@SETTINGS
@given(GDEVAL_DATA)
def test_gdeval_preset_matches_gdeval_pl(data):
    _gdeval_script()
    result, ref = evaluate_data(data, {"preset": "gdeval"}, with_folder=lambda f: run_gdeval(f, 20))
    result5, ref5 = evaluate_data(data, {"preset": "gdeval", "cutoffs": [5]}, with_folder=lambda f: run_gdeval(f, 5))
    for res, gd, label in ((result, ref, "20"), (result5, ref5, "5")):
        rows = rows_of(res)
        pq = res.per_query
        ok = set(pq.loc[pq["status"] == "ok", "query_id"].astype(str))
        # gdeval reports exactly the topics we average: not the ones without a positive judgment (excluded),
        # not the judged ones absent from the run (missing), not the run's unjudged topics
        assert set(gd) == ok
        excluded = set(pq.loc[pq["status"] == "empty_ideal", "query_id"].astype(str))
        missing = set(pq.loc[pq["status"] == "missing", "query_id"].astype(str))
        assert missing == {q for q in data.qrels if q not in data.run}
        assert excluded == {q for q in data.qrels if q in data.run and max(data.qrels[q].values()) <= 0}
        assert ok | excluded | missing == set(data.qrels) and not (ok & (excluded | missing))
        for topic, want in gd.items():
            got = rows[(topic, label)].ndcg
            assert abs(got - want) <= 5e-6 + 1e-12, (topic, label, got, want)
        for q in excluded | missing:
            assert math.isnan(rows[(q, label)].ndcg)
        assert same(res.mean("run", label), mean_of(list(gd.values())), 5e-6 + 1e-12)


@pytest.mark.integration
def test_gdeval_known_topic_by_hand(tmp_path):
    """One topic worked by hand and by gdeval.pl: exponential gain, ties by doc id descending, k = 20."""
    data = Data(
        {"5": {"a": 2, "b": 0, "c": 1, "d": -1}, "6": {"a": 0}},
        (("5", "a", 1, 1.0), ("5", "c", 2, 1.0), ("5", "x", 3, 2.0), ("6", "a", 1, 1.0)),
    )
    data.write(tmp_path)
    result = ndcg_mlflow.evaluate(spec_dict({"preset": "gdeval"}), base_dir=tmp_path)
    # ranking: x (2.0), then c before a (tie, descending id): gains 0, 1, 3
    want = (1 / math.log2(3) + 3 / 2) / (3 + 1 / math.log2(3))
    assert result.mean("run", 20) == pytest.approx(want, abs=1e-12)
    assert result.summary["systems"]["run"]["ndcg_at_20"]["n_excluded"] == 1  # topic 6: no positive judgment
    script_ok = shutil.which("perl") is not None
    if script_ok:
        gd = run_gdeval(tmp_path, 20)
        assert set(gd) == {"5"} and gd["5"] == pytest.approx(want, abs=5e-6)


# --------------------------------------------------------------------------- torchmetrics (documented values)


def _write_indexed(folder: Path, indexes, preds, target) -> None:
    qrels, run = [], []
    for i, (q, p, t) in enumerate(zip(indexes, preds, target)):
        doc = f"d{i}"
        qrels.append(f"{q} 0 {doc} {int(t)}")
        run.append(f"{q} Q0 {doc} {i + 1} {p!r} tm")
    (folder / "qrels.txt").write_text("\n".join(qrels) + "\n")
    (folder / "run.txt").write_text("\n".join(run) + "\n")


def test_torchmetrics_functional_example(tmp_path):
    """torchmetrics.functional.retrieval_normalized_dcg(preds=[.1, .2, .3, 4, 70], target=[10, 0, 0, 1, 5])
    -> tensor(0.6957) (its documentation)."""
    _write_indexed(tmp_path, [0] * 5, [0.1, 0.2, 0.3, 4.0, 70.0], [10, 0, 0, 1, 5])
    result = ndcg_mlflow.evaluate(spec_dict({"preset": "torchmetrics"}), base_dir=tmp_path)
    assert round(result.mean("run", "all"), 4) == 0.6957


def test_torchmetrics_module_example(tmp_path):
    """RetrievalNormalizedDCG()(preds, target, indexes=indexes) -> tensor(0.8467) (its documentation)."""
    _write_indexed(
        tmp_path,
        [0, 0, 0, 1, 1, 1, 1],
        [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2],
        [False, False, True, False, True, False, True],
    )
    result = ndcg_mlflow.evaluate(spec_dict({"preset": "torchmetrics"}), base_dir=tmp_path)
    assert round(result.mean("run", "all"), 4) == 0.8467
    rows = rows_of(result)
    assert rows[("0", "all")].ndcg == 1.0
    assert rows[("1", "all")].ndcg == pytest.approx((1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3)), abs=1e-12)


def test_torchmetrics_query_without_positive_target_counts_as_zero(tmp_path):
    """empty_target_action='neg' (the default): a query with no positive target scores 0 and is averaged in."""
    _write_indexed(
        tmp_path,
        [0, 0, 0, 1, 1, 1, 1, 2, 2],
        [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2, 0.9, 0.1],
        [False, False, True, False, True, False, True, False, False],
    )
    result = ndcg_mlflow.evaluate(spec_dict({"preset": "torchmetrics"}), base_dir=tmp_path)
    rows = rows_of(result)
    assert rows[("2", "all")].ndcg == 0.0 and rows[("2", "all")].status == "empty_ideal"
    q1 = (1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3))
    assert result.mean("run", "all") == pytest.approx((1.0 + q1 + 0.0) / 3, abs=1e-12)
    assert result.summary["systems"]["run"]["ndcg_at_all"]["n_evaluated"] == 3


def test_torchmetrics_tied_predictions_are_averaged(tmp_path):
    """Tied predictions share their gain (torchmetrics' _tie_average_dcg, a translation of sklearn's)."""
    _write_indexed(tmp_path, [0, 0, 0], [0.5, 0.5, 0.1], [1, 0, 0])
    result = ndcg_mlflow.evaluate(spec_dict({"preset": "torchmetrics"}), base_dir=tmp_path)
    assert result.mean("run", "all") == pytest.approx(0.5 * (1 + 1 / math.log2(3)), abs=1e-12)
