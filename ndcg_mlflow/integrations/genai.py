"""nDCG@K for ``mlflow.genai.evaluate``: a scorer of a trace's retriever span, and the paired comparison of two
GenAI evaluation runs.

::

    scorer = ndcg_scorer("eval.yaml", k=10)
    mlflow.genai.evaluate(data=[{"inputs": {"question": "..."}, "expectations": {"relevance": {"doc-7": 2}}}, ...],
                          predict_fn=app, scorers=[scorer])

* **The ranking** is the documents the trace's ``RETRIEVER`` span returned, in their order (rank 1 first). A
  document's id is, by default, its ``metadata["doc_uri"]`` (what MLflow's own retrieval scorers read);
  ``doc_id="id"`` reads the Document's ``id`` instead and any other name reads that metadata key. With several
  retriever spans in a trace, ``span_name=`` names the one to score.
* **The judgments** are ``expectations["relevance"]`` (``relevance=`` names another key): a mapping
  ``{doc_id: grade}``. The query's id is ``expectations["query_id"]`` when given, else the trace's inputs as
  JSON (keys sorted): what pairs the queries of two runs.
* **The rules** are the spec's (gain, ideal, empty ideal, unjudged, missing queries) at the cutoff ``k``; the
  value is computed by the engine itself (:func:`~ndcg_mlflow.engines.local.pipeline.evaluate_tables` on the one query),
  so it equals the per-query value ``ndcg-mlflow run`` gives for the same ranking. A retrieval is an order without
  scores, so ties cannot occur: the spec must say ``ties: displayed_order`` (other tie rules are refused when
  the scorer is made), and ``queries.weights: uniform`` without ``queries.set`` or ``queries.segments`` (one
  trace is one query).
* **Undefined values are not 0.** A query whose ideal DCG is 0 under ``empty_ideal: exclude`` or ``error``, a
  query without judgments, a retrieval of nothing under ``missing_queries: exclude`` or ``error``, and any bad
  input (no retriever span, a document without an id, a document returned twice) give a Feedback carrying an
  error, which MLflow's mean leaves out (as the engine leaves excluded queries out of its mean).

Each Feedback's metadata holds the query's row of the per-query table (``query_id``, ``cutoff``, ``dcg``,
``idcg``, ``idcg_candidates``, ``judged_coverage``, ``n_returned``, ``status``) and the definition's digest;
:func:`compare_genai_runs` reads them back from two evaluation runs' traces to give ``compare``'s intervals, paired
tests, wins and losses. A row of a run without its score (MLflow only warns when it fails to write a trace or a
score, as it does on a SQLite store at its default parallelism: see :data:`SQLITE_MAX_WORKERS`) is reported as
missing, counted against the rows of the run's logged dataset, never passed over.

mlflow is imported inside the functions only.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import DataError, NdcgError, SpecError, preview
from ..paths import shown_path
from ..rules import cutoff_key, cutoff_label, keeps_displayed_order, metric_name, missing_score

SYSTEM = "retriever"
ERROR_CODE = "NDCG_UNDEFINED"
META = "ndcg_mlflow."  # prefix of the Feedback metadata keys
ROW_FIELDS = ("dcg", "idcg", "idcg_candidates", "judged_coverage")
DEFAULT_NAME = cutoff_key(10)  # the scorer's name (and its assessments') at the default k


def load_scorer_spec(spec: Any, k: int | str, base_dir: str | Path | None = None):
    """The spec as the scorer applies it to one query: its metric at the one cutoff ``k``, without its data,
    statistics, report or companion sections; refused (SpecError naming the key) where a trace cannot follow it."""
    from ..spec import MAX_CUTOFF, Spec

    if isinstance(spec, Spec):
        _no_judge({"judge": spec.judge}, str(spec.source) if spec.source else None)
        loaded = spec
    else:  # the data and comparison sections do not apply to one trace (a comparison names other systems)
        raw, folder, source = _raw_spec(spec, base_dir)
        raw.pop("data", None)
        raw.pop("comparison", None)
        loaded = parse_raw(raw, folder, source, (SYSTEM,))
    source = str(loaded.source) if loaded.source else None
    if not keeps_displayed_order(loaded.metric.ties):
        raise SpecError(
            "metric.ties",
            f"is {loaded.metric.ties!r}, but a retriever span returns its documents in an "
            f"order, without scores: no two documents tie, so no tie rule applies. Write "
            f"ties: displayed_order (the order returned) for the scorer.",
            source,
        )
    if loaded.queries.weights is not None or loaded.queries.set is not None or loaded.queries.segments is not None:
        raise SpecError(
            "queries",
            "the scorer evaluates one trace (one query) at a time: queries.weights must be "
            "uniform, and queries.set and queries.segments absent.",
            source,
        )
    if k == "all":
        cutoff = None
    elif isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= MAX_CUTOFF:
        cutoff = k
    else:
        raise SpecError("k", f"is the cutoff: a positive integer or 'all', got {k!r}.")
    metric = dataclasses.replace(loaded.metric, cutoffs=(cutoff,))
    return dataclasses.replace(loaded, metric=metric, uncertainty=None, comparison=None, report=None, companions=None)


def ndcg_scorer(
    spec: Any,
    *,
    k: int | str = 10,
    name: str | None = None,
    relevance: str = "relevance",
    doc_id: str = "doc_uri",
    span_name: str | None = None,
    base_dir: str | Path | None = None,
):
    """A scorer for ``mlflow.genai.evaluate``: nDCG@``k`` of the trace's retriever span under ``spec`` (a path to
    its YAML file, a mapping or a :class:`~ndcg_mlflow.spec.Spec`; its ``data`` section may be left out). Its
    name, the assessment's, is ``ndcg_at_<k>`` unless ``name`` is given. See the module docstring."""
    one = load_scorer_spec(spec, k, base_dir)
    for label, value in (("relevance", relevance), ("doc_id", doc_id)):
        if not isinstance(value, str) or not value:
            raise SpecError(label, f"is a non-empty string, got {value!r}.")
    cls = scorer_class()
    scorer = cls(
        name=name or cutoff_key(one.metric.cutoffs[0]),
        relevance=relevance,
        doc_id=doc_id,
        span_name=span_name,
        description=f"{metric_name(cutoff_key(one.metric.cutoffs[0]))} of the "
        f"retriever span's documents under the spec '{one.name}'",
    )
    scorer.bind(one)
    return scorer


@functools.lru_cache(maxsize=1)
def scorer_class() -> Any:
    """The scorer's class, made on first use (it subclasses MLflow's Scorer, so defining it imports mlflow)."""
    from mlflow.entities import Feedback
    from mlflow.genai.scorers import Scorer
    from pydantic import PrivateAttr

    class NdcgScorer(Scorer):
        relevance: str = "relevance"
        doc_id: str = "doc_uri"
        span_name: str | None = None
        _spec: Any = PrivateAttr(default=None)

        def bind(self, spec: Any) -> None:
            self._spec = spec

        def __call__(
            self,
            *,
            inputs: Any = None,
            outputs: Any = None,
            expectations: Any = None,
            trace: Any = None,
            session: Any = None,
        ) -> Feedback:
            return score_trace(self._spec, self, inputs, expectations, trace)

    return NdcgScorer


def _feedback(value: float | None, error: str | None, metadata: dict[str, str], rationale: str | None = None):
    from mlflow.entities import AssessmentError, Feedback

    err = AssessmentError(error_code=ERROR_CODE, error_message=error) if error is not None else None
    return Feedback(value=value, error=err, metadata=metadata, rationale=rationale)


def query_id_of(inputs: Any, expectations: Any) -> str:
    """``expectations["query_id"]``, else the inputs as JSON with sorted keys."""
    if isinstance(expectations, Mapping) and expectations.get("query_id") is not None:
        return str(expectations["query_id"])
    return json.dumps(inputs, sort_keys=True, ensure_ascii=False, default=str)


def retrieved_ids(trace: Any, doc_id: str, span_name: str | None) -> list[Any]:
    """The document ids of the trace's retriever span, in the order returned (a DataError when there is no such
    span, several without ``span_name``, or a document without the id field)."""
    from mlflow.entities import SpanType

    if trace is None:
        raise DataError("trace", "no trace was given to the scorer: score the outputs of predict_fn, or traces.")
    spans = trace.search_spans(span_type=SpanType.RETRIEVER)
    if span_name is not None:
        spans = [s for s in spans if s.name == span_name]
    if not spans:
        which = f" named {span_name!r}" if span_name is not None else ""
        raise DataError(
            f"trace {trace.info.trace_id}",
            f"has no RETRIEVER span{which}: decorate the retrieval with @mlflow.trace(span_type=SpanType.RETRIEVER).",
        )
    if len(spans) > 1:
        names = ", ".join(repr(s.name) for s in spans)
        raise DataError(
            f"trace {trace.info.trace_id}",
            f"has {len(spans)} RETRIEVER spans ({names}): name the one to score with ndcg_scorer(..., span_name=...).",
        )
    docs = spans[0].outputs or []
    if not isinstance(docs, list):
        raise DataError(f"span {spans[0].name!r}", f"returned {type(docs).__name__}, not a list of documents.")
    ids = []
    for i, d in enumerate(docs):
        raw = d.to_dict() if hasattr(d, "to_dict") else d
        value = (
            (raw.get("id") if doc_id == "id" else (raw.get("metadata") or {}).get(doc_id))
            if isinstance(raw, Mapping)
            else None
        )
        if value is None or value == "":
            where = "its 'id'" if doc_id == "id" else f"metadata[{doc_id!r}]"
            raise DataError(f"span {spans[0].name!r}", f"document {i + 1} has no {where} (doc_id={doc_id!r} reads it).")
        ids.append(_id(value))
    return ids


def _id(value: Any) -> Any:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def score_trace(spec: Any, scorer: Any, inputs: Any, expectations: Any, trace: Any):
    """One trace's Feedback (see the module docstring)."""
    cutoff = spec.metric.cutoffs[0]
    qid = query_id_of(inputs, expectations)
    meta = {
        f"{META}query_id": qid,
        f"{META}cutoff": cutoff_label(cutoff),
        f"{META}definition_sha256": spec.definition_digest(),
    }
    try:
        grades = _grades(expectations, scorer.relevance)
        docs = retrieved_ids(trace, scorer.doc_id, scorer.span_name)
    except NdcgError as exc:
        return _feedback(None, str(exc), {**meta, f"{META}status": "error"})
    if not grades:
        return _feedback(
            None,
            f"query {qid!r} has no judged document: a query without judgments is not in the "
            f"evaluated set, so its nDCG is undefined.",
            {**meta, f"{META}status": "error"},
        )
    if not docs:
        rule = spec.metric.missing_queries
        row = {f"{META}status": "missing", f"{META}n_returned": "0", f"{META}dcg": "0.0"}
        score = missing_score(rule)
        if not math.isnan(score):
            why = f"the retriever returned no document: {score:g} under missing_queries: {rule}"
            return _feedback(score, None, {**meta, **row}, why)
        return _feedback(
            None,
            f"the retriever returned no document for query {qid!r}; metric.missing_queries is "
            f"{rule!r}, so the query has no value.",
            {**meta, **row},
        )
    import pandas as pd

    from ..engines.local.pipeline import evaluate_tables

    qrels = pd.DataFrame(
        {
            "query_id": [qid] * len(grades),
            "doc_id": pd.array(list(grades), dtype=object),
            "grade": list(grades.values()),
        }
    )
    run = pd.DataFrame(
        {"query_id": [qid] * len(docs), "doc_id": pd.array(docs, dtype=object), "rank": range(1, len(docs) + 1)}
    )
    try:
        result = evaluate_tables(spec, qrels, {SYSTEM: run})
    except NdcgError as exc:
        return _feedback(None, str(exc), {**meta, f"{META}status": "error"})
    row = result.per_query.iloc[0]
    meta.update({f"{META}{f}": repr(float(row[f])) for f in ROW_FIELDS})
    meta.update({f"{META}n_returned": str(int(row["n_returned"])), f"{META}status": str(row["status"])})
    value = float(row["ndcg"])
    if math.isnan(value):
        return _feedback(
            None,
            f"query {qid!r} has an ideal DCG of {float(row['idcg']):g} under ideal "
            f"{spec.metric.ideal!r}: its nDCG is undefined (empty_ideal: "
            f"{spec.metric.empty_ideal}), left out of the mean, not 0.",
            meta,
        )
    return _feedback(
        value,
        None,
        meta,
        f"DCG {float(row['dcg']):.6g} over ideal DCG {float(row['idcg']):.6g} of "
        f"{len(docs)} documents returned, {len(grades)} judged",
    )


def _grades(expectations: Any, key: str) -> dict[Any, Any]:
    if not isinstance(expectations, Mapping) or key not in expectations:
        raise DataError(
            "expectations",
            f"no expectations[{key!r}]: give each row the graded judgments of its "
            f"query as {{doc_id: grade}} under that key.",
        )
    grades = expectations[key]
    if not isinstance(grades, Mapping):
        raise DataError(
            f"expectations[{key!r}]", f"is {type(grades).__name__}; the judgments are a mapping {{doc_id: grade}}."
        )
    return {_id(d): g for d, g in grades.items()}


# --------------------------------------------------------------------------- two evaluation runs


# MLFLOW_GENAI_EVAL_MAX_WORKERS on a SQLite store: MLflow's default, 10 prediction and 10 scoring threads each
# writing traces and scores, outruns SQLAlchemy's pool of a SQLite store (5 connections and 10 more), and MLflow
# only warns of a trace or a score it then fails to write
SQLITE_MAX_WORKERS = 4
LOST = (
    "MLflow only warns when it fails to write a trace or a score; on a SQLite store its default parallelism runs "
    f"out of database connections: evaluate again with MLFLOW_GENAI_EVAL_MAX_WORKERS={SQLITE_MAX_WORKERS}."
)


@dataclasses.dataclass
class RunScores:
    """A GenAI evaluation run's scores: the per-query table of its traces that carry the scorer's assessment, the
    traces that carry none (their ids and inputs) and the number of rows of the data it evaluated (its logged
    dataset's, None where MLflow recorded none)."""

    run: Any
    table: Any
    unscored: list[str]
    rows: int | None

    def missing(self, name: str, other: RunScores | None = None) -> str | None:
        """The rows without a score, in words (how many, which traces, and which queries, those scored in
        ``other`` but not here); None when every row has its score."""
        scored = len(self.table)
        lost = self.rows - scored if self.rows is not None else len(self.unscored)
        if lost <= 0:
            return None
        rows = f"{lost} of its {self.rows} rows have" if self.rows is not None else f"{lost} of its traces have"
        words = [f"{rows} no {name!r} score ({scored + len(self.unscored)} traces logged, {scored} scored)"]
        if self.unscored:
            words.append(f"traces without it: {preview(self.unscored, 3)}")
        gone = sorted(set(other.table["query_id"]) - set(self.table["query_id"])) if other is not None else []
        if other is not None and gone:
            words.append(f"queries scored in run {other.run.info.run_id} but not here: {preview(gone, 10)}")
        why = "no trace carries a score of ndcg_scorer (was it among the scorers?)" if not scored else LOST
        return "; ".join(words) + f". {why}"


def read_scores(client: Any, run_id: str, name: str) -> RunScores:
    """The scores of the scorer's assessment ``name`` in a GenAI evaluation run (see :class:`RunScores`). Refused
    (DataError): a run without traces or data, a name that is not the scorer's (the names it logged are given), two
    traces of one query, a query that could not be scored, assessments of two cutoffs or definitions."""
    import pandas as pd

    run = client.get_run(run_id)
    traces, token = [], None
    while True:
        page = client.search_traces(
            locations=[run.info.experiment_id], run_id=run_id, include_spans=False, page_token=token
        )
        traces.extend(page)
        token = page.token
        if not token:
            break
    n_rows = _dataset_rows(run)
    if not traces and n_rows is None:
        raise DataError(f"run {run_id}", "has no traces: give the run of an mlflow.genai.evaluate call.")
    rows: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    unscored: list[str] = []
    names: set[str] = set()
    for trace in traces:
        ours = [a for a in trace.info.assessments or [] if (a.metadata or {}).get(f"{META}query_id") is not None]
        found = [a for a in ours if a.name == name and a.feedback is not None]
        if not found:
            names.update(a.name for a in ours)
            unscored.append(f"{trace.info.trace_id} (inputs {(trace.info.request_preview or '')[:80]})")
            continue
        a = max(found, key=lambda x: x.last_update_time_ms or 0)  # the latest, should the trace be scored again
        m = a.metadata
        qid = m[f"{META}query_id"]
        if qid in seen:
            raise DataError(
                f"run {run_id}",
                f"traces {seen[qid]} and {trace.info.trace_id} are both of query "
                f"{qid!r}: a run holds one trace per query.",
            )
        seen[qid] = trace.info.trace_id
        value = a.feedback.value if a.feedback.error is None else None
        status = m.get(f"{META}status", "error")
        if status == "error":
            raise DataError(
                f"run {run_id}",
                f"trace {trace.info.trace_id} (query {qid!r}) could not be scored: "
                f"{a.feedback.error.error_message if a.feedback.error else status}.",
            )
        rows.append(
            {
                "query_id": qid,
                "cutoff": m[f"{META}cutoff"],
                "ndcg": float(value) if value is not None else math.nan,
                **{f: float(m.get(f"{META}{f}", "nan")) for f in ROW_FIELDS},
                "n_returned": int(m.get(f"{META}n_returned", "0")),
                "weight": 1.0,
                "status": status,
                "definition_sha256": m.get(f"{META}definition_sha256", ""),
            }
        )
    if not rows and names:
        raise DataError(
            f"run {run_id}",
            f"no trace has an assessment {name!r} of ndcg_scorer; its traces carry "
            f"{', '.join(map(repr, sorted(names)))}: give the name the scorer logged (its name=).",
        )
    columns = ["query_id", "cutoff", "ndcg", *ROW_FIELDS, "n_returned", "weight", "status", "definition_sha256"]
    table = pd.DataFrame(rows, columns=columns)
    for column in ("cutoff", "definition_sha256"):
        values = sorted(set(table[column]))
        if len(values) > 1:
            raise DataError(f"run {run_id}", f"its {name!r} assessments differ in {column}: {values}.")
    return RunScores(run, table, unscored, n_rows)


def _dataset_rows(run: Any) -> int | None:
    """The rows of the data a GenAI evaluation run evaluated: the ``num_rows`` of its one logged dataset."""
    counts = set()
    for entry in getattr(run.inputs, "dataset_inputs", None) or []:
        try:
            profile = json.loads(entry.dataset.profile or "null")
        except ValueError:
            profile = None
        if isinstance(profile, dict) and isinstance(profile.get("num_rows"), int):
            counts.add(profile["num_rows"])
    return counts.pop() if len(counts) == 1 else None


def genai_per_query(run_id: str, *, name: str = DEFAULT_NAME, tracking_uri: str | None = None):
    """The per-query table (the columns of ``per_query.csv``) of a GenAI evaluation run: one row per trace of the
    run that carries the scorer's assessment ``name``, read from its metadata. Rows of the run without that score
    (MLflow failed to write their trace or score) are refused, counted and named, as is everything
    :func:`read_scores` refuses (DataError)."""
    from mlflow.tracking import MlflowClient

    scores = read_scores(MlflowClient(tracking_uri=tracking_uri), run_id, name)
    missing = scores.missing(name)
    if missing:
        raise DataError(f"run {run_id}", missing)
    return scores.table


def compare_genai_runs(
    run_a: str,
    run_b: str,
    spec: Any,
    *,
    name: str = DEFAULT_NAME,
    tracking_uri: str | None = None,
    out: str | Path | None = None,
    base_dir: str | Path | None = None,
):
    """Compare two GenAI evaluation runs as ``ndcg-mlflow compare`` compares two systems: intervals, the paired
    tests, wins and losses, on the queries both runs scored, under ``spec``'s ``uncertainty`` and ``comparison``
    sections. Each run is a system named by what it evaluated (:func:`run_names`); ``comparison.baseline`` names the
    baseline run (by that name, its run name or its id; run A when the section names none) and is refused when it
    names neither run. The spec's metric and query rules must be those the scorer applied (the digest each Feedback
    records), else a SpecError; a run whose rows lack scores is refused, naming them (DataError). Returns the
    :class:`~ndcg_mlflow.result.EvaluationResult`; ``out`` also writes its output folder (report
    included), whose ``mlflow.experiment`` is the baseline run's experiment (where ``ndcg-mlflow upload OUT`` logs
    it)."""
    from mlflow.tracking import MlflowClient

    from ..statistics.comparisons import analyze
    from ..tracking.compare import SystemRun, result_from_tables

    if run_a == run_b:
        raise DataError(f"run {run_a}", "is given twice: compare two different evaluation runs.")
    client = MlflowClient(tracking_uri=tracking_uri)
    scores = [read_scores(client, r, name) for r in (run_a, run_b)]
    missing = [f"run {s.run.info.run_id}: {m}" for s, o in zip(scores, scores[::-1]) if (m := s.missing(name, o))]
    if missing:
        raise DataError(
            "runs", "scores are missing, so the runs cannot be paired query by query:\n  " + "\n  ".join(missing)
        )
    cutoffs = {s.table["cutoff"].iloc[0] for s in scores}
    if len(cutoffs) > 1:
        raise DataError("runs", f"the two runs' {name!r} assessments are at different cutoffs: {sorted(cutoffs)}.")
    raw, folder, source = _raw_spec(spec, base_dir)
    raw.pop("data", None)
    raw["metric"] = {**raw.get("metric", {}), "cutoffs": [_cutoff_value(cutoffs.pop())]}
    names = run_names(client, [s.run for s in scores])
    first = 0
    if isinstance(raw.get("comparison"), dict):
        first = _baseline_run(raw["comparison"].get("baseline", names[0]), names, [s.run for s in scores], source)
        raw["comparison"] = {**raw["comparison"], "baseline": names[first]}
    order = (first, 1 - first)
    section = raw.get("mlflow")
    if section is None or isinstance(section, dict):  # logged beside the runs compared
        experiment = client.get_experiment(scores[first].run.info.experiment_id).name
        raw["mlflow"] = {
            **(section or {}),
            "experiment": experiment,
            **({"tracking_uri": tracking_uri} if tracking_uri else {}),
        }
    loaded = parse_raw(raw, folder, source, tuple(names[i] for i in order))
    if loaded.uncertainty is None or loaded.comparison is None:
        raise SpecError(
            "comparison",
            "comparing two runs needs the spec's uncertainty and comparison sections "
            "(resamples, confidence, method, seed; test, correction, wins_losses, "
            "tie_tolerance).",
        )
    digest = load_scorer_spec(loaded, _cutoff_value(loaded.metric.cutoffs[0] or "all")).definition_digest()
    for s in scores:
        if s.table["definition_sha256"].iloc[0] != digest:
            raise SpecError(
                "metric",
                f"run {s.run.info.run_id} was scored under other metric or query rules than this spec's "
                f"(definition digest {s.table['definition_sha256'].iloc[0][:12]}… vs "
                f"{digest[:12]}…): compare under the spec the scorer used.",
            )
    tables = [scores[i].table.drop(columns="definition_sha256") for i in order]
    systems = [(names[i], SystemRun(None, names[i], t, None)) for i, t in zip(order, tables)]
    result = result_from_tables(loaded, systems)
    only = sorted(set(tables[0]["query_id"]) ^ set(tables[1]["query_id"]))
    if only:
        result.notes.append(f"{len(only)} queries were scored in one run only and are not paired")
    ids = [scores[i].run.info.run_id for i in order]
    result.notes.append(
        f"compared GenAI evaluation runs: baseline {names[order[0]]} = run {ids[0]}, "
        f"candidate {names[order[1]]} = run {ids[1]}"
    )
    result.analysis = analyze(result, loaded.uncertainty, loaded.comparison)
    if out is not None:
        from ..outputs.write import write_outputs

        write_outputs(result, out)
    return result


def run_names(client: Any, runs: list[Any]) -> list[str]:
    """Each GenAI evaluation run's system name: what it evaluated (its logged model, by registered name and version
    or by name: :func:`~ndcg_mlflow.tracking.compare.model_label`), else the run name given to it (not one MLflow
    made up), else its id; made distinct with the ids when equal."""
    from ..tracking.compare import model_label, user_run_name

    names = [model_label(client, r) or user_run_name(r) or r.info.run_id for r in runs]
    if len(set(names)) < len(names):
        names = [f"{n}-{r.info.run_id[:8]}" for n, r in zip(names, runs)]
    return names


def _baseline_run(baseline: Any, names: list[str], runs: list[Any], source: str | None) -> int:
    """Which run ``comparison.baseline`` names: by its system name, its run name or its id."""
    hits = [i for i, r in enumerate(runs) if baseline in (names[i], r.info.run_name, r.info.run_id)]
    if len(hits) != 1:
        which = "neither" if not hits else "both"
        shown = " and ".join(
            repr(n) + ("" if n == r.info.run_id else f" (run {r.info.run_id})") for n, r in zip(names, runs)
        )
        raise SpecError(
            "comparison.baseline",
            f"is {baseline!r}, which names {which} of the runs compared, {shown}: name the baseline run by one "
            f"of these names or its run id.",
            source,
        )
    return hits[0]


def _cutoff_value(label: Any) -> int | str:
    return "all" if label in ("all", None) else int(label)


def _raw_spec(spec: Any, base_dir: str | Path | None) -> tuple[dict[str, Any], Path, str | None]:
    """The spec as a mapping to adjust (its data section, cutoff and baseline), the folder its paths are relative
    to, and its file (named in errors)."""
    import copy

    import yaml

    from ..spec import Spec

    if isinstance(spec, Mapping):
        _no_judge(spec, None)
        return copy.deepcopy(dict(spec)), Path(base_dir) if base_dir else Path.cwd(), None
    if isinstance(spec, Spec):
        _no_judge({"judge": spec.judge}, str(spec.source) if spec.source else None)
        folder = spec.source.resolve().parent if spec.source else Path.cwd()
        return (
            yaml.safe_load(spec.text),
            Path(base_dir) if base_dir else folder,
            str(spec.source) if spec.source else None,
        )
    if not isinstance(spec, (str, Path)):
        raise SpecError("spec", f"is a path to the spec's YAML file, a mapping or a Spec, got {type(spec).__name__}.")
    path = Path(spec)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SpecError("", f"cannot read the spec {shown_path(path)}: {exc}") from None
    if not isinstance(raw, dict):
        raise SpecError("", "a spec is a mapping of its sections.", str(path))
    _no_judge(raw, str(path))
    return raw, Path(base_dir) if base_dir else path.resolve().parent, str(path)


def _no_judge(raw: Any, source: str | None) -> None:
    """A judge section is refused: a trace's expectations are one source of judgments, and the scores of a GenAI
    run are compared under it."""
    if isinstance(raw, dict) and raw.get("judge") is not None:
        raise SpecError(
            "judge",
            "a GenAI run's scores come from one source of judgments (each trace's expectations); a judge's "
            "judgments are combined with human ones by ndcg_mlflow.evaluate (or ndcg-mlflow run) on the systems' "
            "rows: leave the judge section out of this spec.",
            source,
        )


def parse_raw(raw: dict[str, Any], folder: Path, source: str | None, systems: tuple[str, ...]):
    """A spec mapping validated as a spec whose judgments and systems are given as tables."""
    from ..spec import InMemory, parse_spec

    return parse_spec(raw, base_dir=folder, source=source, tables=InMemory(qrels=True, systems=systems))
