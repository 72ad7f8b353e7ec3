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
  value is computed by the engine itself (:func:`~ndcg_mlflow.evaluation.evaluate_tables` on the one query), so
  it equals the per-query value ``ndcg-mlflow run`` gives for the same ranking. A retrieval is an order without
  scores, so ties cannot occur: the spec must say ``ties: displayed_order`` (other tie rules are refused when
  the scorer is made), and ``queries.weights: uniform`` without ``queries.set`` (one trace is one query).
* **Undefined values are not 0.** A query whose ideal DCG is 0 under ``empty_ideal: exclude`` or ``error``, a
  query without judgments, a retrieval of nothing under ``missing_queries: exclude`` or ``error``, and any bad
  input (no retriever span, a document without an id, a document returned twice) give a Feedback carrying an
  error, which MLflow's mean leaves out (as the engine leaves excluded queries out of its mean).

Each Feedback's metadata holds the query's row of the per-query table (``query_id``, ``cutoff``, ``dcg``,
``idcg``, ``idcg_candidates``, ``judged_coverage``, ``n_returned``, ``status``) and the definition's digest;
:func:`compare_genai_runs` reads them back from two evaluation runs' traces to give ``compare``'s intervals, paired
tests, wins and losses.

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

from ..errors import DataError, NdcgError, SpecError
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
    if loaded.queries.weights is not None or loaded.queries.set is not None:
        raise SpecError(
            "queries",
            "the scorer evaluates one trace (one query) at a time: queries.weights must be "
            "uniform and queries.set absent.",
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

    from ..evaluation import evaluate_tables

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


def genai_per_query(run_id: str, *, name: str = DEFAULT_NAME, tracking_uri: str | None = None):
    """The per-query table (the columns of ``per_query.csv``) of a GenAI evaluation run: one row per trace of the
    run that carries the scorer's assessment ``name``, read from its metadata. A trace without that assessment,
    two traces of one query, or assessments of two cutoffs or definitions are refused (DataError)."""
    import pandas as pd
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
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
    if not traces:
        raise DataError(f"run {run_id}", "has no traces: give the run of an mlflow.genai.evaluate call.")
    rows: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for trace in traces:
        found = [
            a
            for a in trace.info.assessments or []
            if a.name == name and a.feedback is not None and (a.metadata or {}).get(f"{META}query_id") is not None
        ]
        if not found:
            raise DataError(
                f"run {run_id}",
                f"trace {trace.info.trace_id} has no assessment {name!r} of "
                f"ndcg_scorer: give the name the scorer logged (its name=).",
            )
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
    table = pd.DataFrame(rows)
    for column in ("cutoff", "definition_sha256"):
        values = sorted(set(table[column]))
        if len(values) > 1:
            raise DataError(f"run {run_id}", f"its {name!r} assessments differ in {column}: {values}.")
    return table


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
    """Compare GenAI evaluation run B (candidate) with run A (baseline) as ``ndcg-mlflow compare`` compares two
    systems: intervals, the paired tests, wins and losses, on the queries both runs scored, under ``spec``'s
    ``uncertainty`` and ``comparison`` sections (its ``comparison.baseline`` is replaced by run A). The spec's
    metric and query rules must be those the scorer applied (the digest each Feedback records), else a SpecError.
    Returns the :class:`~ndcg_mlflow.evaluation.EvaluationResult`; ``out`` also writes its output folder (report
    included)."""
    from ..analysis import analyze
    from ..tracking.compare import SystemRun, result_from_tables

    if run_a == run_b:
        raise DataError(f"run {run_a}", "is given twice: compare two different evaluation runs.")
    tables = [genai_per_query(r, name=name, tracking_uri=tracking_uri) for r in (run_a, run_b)]
    cutoffs = {t["cutoff"].iloc[0] for t in tables}
    if len(cutoffs) > 1:
        raise DataError("runs", f"the two runs' {name!r} assessments are at different cutoffs: {sorted(cutoffs)}.")
    names = _system_names(run_a, run_b, tracking_uri)
    raw, folder, source = _raw_spec(spec, base_dir)
    raw.pop("data", None)
    raw["metric"] = {**raw.get("metric", {}), "cutoffs": [_cutoff_value(cutoffs.pop())]}
    if isinstance(raw.get("comparison"), dict):
        raw["comparison"] = {**raw["comparison"], "baseline": names[0]}
    loaded = parse_raw(raw, folder, source, names)
    if loaded.uncertainty is None or loaded.comparison is None:
        raise SpecError(
            "comparison",
            "comparing two runs needs the spec's uncertainty and comparison sections "
            "(resamples, confidence, method, seed; test, correction, wins_losses, "
            "tie_tolerance).",
        )
    digest = load_scorer_spec(loaded, _cutoff_value(loaded.metric.cutoffs[0] or "all")).definition_digest()
    for run_id, table in zip((run_a, run_b), tables):
        if table["definition_sha256"].iloc[0] != digest:
            raise SpecError(
                "metric",
                f"run {run_id} was scored under other metric or query rules than this spec's "
                f"(definition digest {table['definition_sha256'].iloc[0][:12]}… vs "
                f"{digest[:12]}…): compare under the spec the scorer used.",
            )
    systems = [(n, SystemRun(None, n, t.drop(columns="definition_sha256"), None)) for n, t in zip(names, tables)]
    result = result_from_tables(loaded, systems)
    only = sorted(set(tables[0]["query_id"]) ^ set(tables[1]["query_id"]))
    if only:
        result.notes.append(f"{len(only)} queries were scored in one run only and are not paired")
    result.notes.append(
        f"compared GenAI evaluation runs: baseline {names[0]} = run {run_a}, candidate {names[1]} = run {run_b}"
    )
    result.analysis = analyze(result, loaded.uncertainty, loaded.comparison)
    if out is not None:
        from ..outputs.write import write_outputs

        write_outputs(result, out)
    return result


def _cutoff_value(label: Any) -> int | str:
    return "all" if label in ("all", None) else int(label)


def _raw_spec(spec: Any, base_dir: str | Path | None) -> tuple[dict[str, Any], Path, str | None]:
    """The spec as a mapping to adjust (its data section, cutoff and baseline), the folder its paths are relative
    to, and its file (named in errors)."""
    import copy

    import yaml

    from ..spec import Spec

    if isinstance(spec, Mapping):
        return copy.deepcopy(dict(spec)), Path(base_dir) if base_dir else Path.cwd(), None
    if isinstance(spec, Spec):
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
        raise SpecError("", f"cannot read the spec {path}: {exc}") from None
    if not isinstance(raw, dict):
        raise SpecError("", "a spec is a mapping of its sections.", str(path))
    return raw, Path(base_dir) if base_dir else path.resolve().parent, str(path)


def parse_raw(raw: dict[str, Any], folder: Path, source: str | None, systems: tuple[str, ...]):
    """A spec mapping validated as a spec whose judgments and systems are given as tables."""
    from ..spec import InMemory, parse_spec

    return parse_spec(raw, base_dir=folder, source=source, tables=InMemory(qrels=True, systems=systems))


def _system_names(run_a: str, run_b: str, tracking_uri: str | None) -> tuple[str, str]:
    """The two runs' names (``mlflow.runName``), made distinct with their ids when equal."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    names = [client.get_run(r).data.tags.get("mlflow.runName") or r[:8] for r in (run_a, run_b)]
    if names[0] == names[1]:
        names = [f"{n}-{r[:8]}" for n, r in zip(names, (run_a, run_b))]
    return names[0], names[1]
