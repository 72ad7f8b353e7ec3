"""From a spec to per-query and mean nDCG for every system: reading, joining, policies, means.

No MLflow here: :func:`evaluate` returns an :class:`EvaluationResult` that the
logging layer, the CLI or a notebook can use.
"""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from . import __version__
from .errors import DataError, EvaluationError, SpecError, preview
from .kernel import EMPTY_IDEAL, MISSING, STATUS_NAMES, NonFiniteError, QueryResult, RunRows, evaluate_rows
from .readers import Table, read_qrels, read_query_set, read_run, read_weights, sha256_file
from .spec import Gain, Metric, Spec, check_files, cutoff_label, load_spec, outside_paths
from .uris import safe_uri

PER_QUERY_COLUMNS = ("system", "query_id", "cutoff", "ndcg", "dcg", "idcg", "idcg_candidates",
                     "judged_coverage", "n_returned", "weight", "status")


@dataclass
class FileInfo:
    role: str  # "qrels", "system:<name>", "queries.set", "queries.weights"
    path: str
    declared: str
    sha256: str
    rows: int


@dataclass
class TopLists:
    """The first ``depth`` documents each query showed, as the metric ranked them (for wins and losses)."""

    depth: int
    query: np.ndarray  # evaluated query code of each entry
    position: np.ndarray  # 0-based rank
    doc: list  # doc id of each entry
    grade: np.ndarray  # its grade, NaN where unjudged

    def of(self, query: int, k: int | None = None) -> list[dict[str, Any]]:
        sel = np.flatnonzero((self.query == query) & (self.position < (k if k is not None else self.depth)))
        sel = sel[np.argsort(self.position[sel], kind="stable")]
        return [{"rank": int(self.position[i]) + 1, "doc_id": self.doc[i],
                 "grade": None if np.isnan(self.grade[i]) else _num(self.grade[i])} for i in sel]


def _num(x: float) -> float | int:
    x = float(x)
    return int(x) if x.is_integer() else x


@dataclass
class SystemResult:
    name: str
    result: QueryResult
    means: dict[str, dict[str, Any]]
    top: TopLists | None = None
    duplicate_rate: np.ndarray | None = None  # (n_queries, n_cutoffs), with companions.duplicates


@dataclass
class EvaluationResult:
    """Everything one evaluation produced; no MLflow involved.

    ``per_query`` is the long table (one row per system, query and cutoff);
    ``summary`` the JSON-ready summary (means and counts per system and key).
    """

    spec: Spec
    query_ids: np.ndarray
    weights: np.ndarray
    systems: dict[str, SystemResult]
    files: list[FileInfo]
    notes: list[str] = field(default_factory=list)
    analysis: Any = None  # analysis.Analysis: intervals, comparisons, wins and losses
    sensitivity: Any = None  # pandas DataFrame, when the spec asks for it (report.sensitivity)
    prepared: dict = field(default_factory=dict)  # system -> PreparedRun, with keep_data
    catalog: Any = None
    grades: list = field(default_factory=list)  # the distinct grades of the qrels
    _per_query: Any = None

    @property
    def relative_weights(self) -> np.ndarray:
        """The weights over the largest one (same ratios, so the same means): what every computation uses,
        so that weights of any magnitude neither overflow nor underflow. ``weights`` are as given."""
        return relative(self.weights)

    @property
    def per_query(self):
        if self._per_query is None:
            self._per_query = self._build_per_query()
        return self._per_query

    def mean(self, system: str, cutoff: int | str | None) -> float:
        key = f"ndcg_at_{'all' if cutoff in (None, 'all') else int(cutoff)}"
        return self.systems[system].means[key]["mean"]

    @property
    def summary(self) -> dict[str, Any]:
        spec = self.spec
        return {
            "name": spec.name,
            "spec_sha256": spec.sha256,
            "definition_sha256": spec.definition_digest(),
            "ndcg_mlflow_version": __version__,
            "spec": spec.resolved(),
            "n_queries": int(len(self.query_ids)),
            "weight_sum": float(self.weights.sum()),
            "files": {f.role: {"path": f.declared, "sha256": f.sha256, "rows": f.rows} for f in self.files},
            "systems": self._system_summary(),
            "grades": list(self.grades),
            # the tracking URI without credentials (ndcg_mlflow.uris.redact): never recorded
            "mlflow": {"experiment": spec.mlflow.experiment, "tracking_uri": safe_uri(spec.mlflow.tracking_uri),
                       "run_name": spec.mlflow.run_name, "timeout": spec.mlflow.timeout,
                       "max_retries": spec.mlflow.max_retries, "total_timeout": spec.mlflow.total_timeout},
            "paths_outside_spec_folder": outside_paths(spec),
            "comparisons": list(self.analysis.comparisons) if self.analysis else [],
            "comparison_family": self.analysis.family if self.analysis else "",
            "notes": list(self.notes),
        }

    def _system_summary(self) -> dict[str, Any]:
        out = {}
        for name, sr in self.systems.items():
            out[name] = {}
            for key, m in sr.means.items():
                entry = dict(m)
                if self.analysis and name in self.analysis.intervals:
                    entry.update(self.analysis.intervals[name][key])
                out[name][key] = entry
        return out

    @property
    def comparisons(self):
        """The comparisons table as a DataFrame (empty without a comparison section)."""
        import pandas as pd

        return pd.DataFrame(self.analysis.comparisons if self.analysis else [])

    def wins_losses_json(self) -> str:
        data = {"baseline": self.spec.comparison.baseline if self.spec.comparison else None,
                "comparisons": self.analysis.wins_losses if self.analysis else []}
        return json.dumps(_json_safe(data), indent=2, ensure_ascii=False, allow_nan=False) + "\n"

    def summary_json(self) -> str:
        return json.dumps(_json_safe(self.summary), indent=2, allow_nan=False) + "\n"

    def _build_per_query(self):
        import pandas as pd

        frames = []
        labels = [cutoff_label(k) for k in self.spec.metric.cutoffs]
        nq, nc = len(self.query_ids), len(labels)
        for name, sr in self.systems.items():
            r = sr.result
            frames.append(pd.DataFrame({
                "system": np.repeat(np.asarray([name], dtype=object), nq * nc),
                "query_id": np.repeat(self.query_ids, nc),
                "cutoff": np.tile(np.asarray(labels, dtype=object), nq),
                "ndcg": r.ndcg.ravel(),
                "dcg": r.dcg.ravel(),
                "idcg": r.idcg.ravel(),
                "idcg_candidates": r.idcg_candidates.ravel(),
                "judged_coverage": r.judged_coverage.ravel(),
                "n_returned": np.repeat(r.n_returned, nc),
                "weight": np.repeat(self.weights, nc),
                "status": np.asarray(STATUS_NAMES, dtype=object)[r.status.ravel()],
            }))
            if sr.duplicate_rate is not None:
                frames[-1]["duplicate_rate"] = sr.duplicate_rate.ravel()
        return pd.concat(frames, ignore_index=True)


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return None if not math.isfinite(obj) else float(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


# --------------------------------------------------------------------------- gains


def map_gains(gain: Gain, grades: np.ndarray, qrels: Table | None = None) -> np.ndarray:
    """Grades to gains. Negative grades earn 0 under exponential and linear; a table must know every grade.

    An exponential gain 2^g - 1 beyond the largest float (g >= 1024) is refused: a DataError at the
    first such line of ``qrels`` when given, else :class:`~ndcg_mlflow.kernel.NonFiniteError`.
    """
    if gain.kind == "exponential":
        with np.errstate(over="ignore"):
            gains = np.where(grades > 0, np.exp2(np.maximum(grades, 0)) - 1.0, 0.0)
        over = ~np.isfinite(gains)
        if over.any():
            row = int(np.flatnonzero(over)[0])
            if qrels is None:
                raise NonFiniteError("exponential gain", np.flatnonzero(over))
            raise qrels.error(row, f"grade {grades[row]:g}: its exponential gain 2^{grades[row]:g} - 1 overflows a "
                                   f"float (metric.gain exponential takes grades below 1024; "
                                   f"{int(over.sum())} judgments in all). Use gain: linear or a gain table.")
        return gains
    if gain.kind == "linear":
        return np.where(grades > 0, grades, 0.0)
    keys = np.array([k for k, _ in gain.table])
    vals = np.array([v for _, v in gain.table])
    idx = np.searchsorted(keys, grades)
    idx_c = np.minimum(idx, keys.size - 1)
    known = keys[idx_c] == grades
    if not known.all():
        row = int(np.flatnonzero(~known)[0])
        missing = sorted({float(g) for g in grades[~known]})
        message = (f"grade {grades[row]:g} is not in the gain table (metric.gain); grades missing from it: "
                   f"{', '.join(f'{g:g}' for g in missing)}.")
        raise qrels.error(row, message) if qrels is not None else DataError("qrels", message)
    return vals[idx_c]


def _check_gain_sums(metric: Metric, catalog: "Catalog", query_ids: np.ndarray, qrels: Table,
                     keep: np.ndarray) -> None:
    """Refuse gains whose DCG could overflow a float, naming the query and its first judgment's line.

    Every DCG, ideal DCG and tie-averaged gain of a query is bounded by the sum of the query's
    absolute gains (each discount is at most 1, and a run's judged documents are among the query's
    judgments), so when that sum is finite for every query, no sum the kernel forms overflows.
    """
    gains = np.abs(map_gains(metric.gain, catalog.grade, None))
    with np.errstate(over="ignore", invalid="ignore"):
        sums = np.bincount(catalog.query, weights=gains, minlength=catalog.n_queries)
    over = np.flatnonzero(~np.isfinite(sums))
    if over.size:
        q = int(over[0])
        row = int(np.flatnonzero(keep)[np.flatnonzero(catalog.query == q)[0]])
        raise qrels.error(row, f"the gains of query {str(query_ids[q])!r} (metric.gain {metric.gain.describe()}) sum "
                               f"to more than the largest float (1.8e308), so its ideal DCG would overflow "
                               f"({over.size} queries in all, e.g. {preview(query_ids[over])}). Use smaller gains "
                               f"(gain: linear, or a gain table with smaller values).")


# --------------------------------------------------------------------------- evaluation


@dataclass
class Catalog:
    """The evaluated judgments: query code and grade of each judged document."""

    query: np.ndarray
    grade: np.ndarray
    n_queries: int


@dataclass
class PreparedRun:
    """One system's rows joined to the judgments, independent of every metric rule.

    From it, :func:`compute` gives the per-query numbers under any :class:`Metric`
    (``explain --sensitivity`` recomputes each rule's alternatives from it without
    reading a file again).
    """

    name: str
    run: Table
    kept: np.ndarray | None  # run rows of evaluated queries (None: all)
    query: np.ndarray
    score: np.ndarray
    grade: np.ndarray  # NaN where unjudged
    judged: np.ndarray

    def original(self, rows: np.ndarray) -> np.ndarray:
        return rows if self.kept is None else self.kept[rows]


def compute(metric: Metric, prep: PreparedRun, catalog: Catalog) -> QueryResult:
    """Per-query results of one prepared run under ``metric`` (the ``error`` forms act as ``exclude``)."""
    gain = np.zeros(prep.query.size)
    gain[prep.judged] = map_gains(metric.gain, prep.grade[prep.judged])
    rows = RunRows(query=prep.query, score=prep.score, gain=gain, judged=prep.judged,
                   tiebreak=_tiebreak(metric.ties, prep))
    cat_gain = map_gains(metric.gain, catalog.grade)
    return evaluate_rows(rows, catalog.query, cat_gain, catalog.n_queries, cutoffs=metric.cutoffs,
                         ties=metric.ties, unjudged=metric.unjudged, ideal=metric.ideal,
                         empty_ideal=metric.empty_ideal, missing_queries=metric.missing_queries)


def evaluate(spec: str | Path | Mapping[str, Any] | Spec, *, base_dir: str | Path | None = None,
             progress=None, keep_data: bool = False) -> EvaluationResult:
    """Evaluate every system of a spec (a path, a mapping or a :class:`Spec`); touches no tracking server.

    ``keep_data`` keeps each system's joined rows on the result (``result.prepared``),
    for recomputing under other rules without reading the files again.
    """
    spec = load_spec(spec, base_dir=base_dir)
    problems = check_files(spec)
    if problems:
        raise SpecError("", "; ".join(problems), str(spec.source) if spec.source else None)
    metric = spec.metric
    keep_data = keep_data or spec.sensitivity
    files: list[FileInfo] = []

    qrels = read_qrels(spec.qrels.path, spec.qrels.format)
    files.append(FileInfo("qrels", str(spec.qrels.path), spec.qrels.declared, sha256_file(spec.qrels.path),
                          len(qrels)))
    map_gains(metric.gain, qrels.value, qrels)  # a grade missing from a gain table stops here, before any run

    query_ids = _query_set(spec, qrels, files)
    weights = _weights(spec, query_ids, files)
    nq = len(query_ids)

    # query codes of the qrels rows, in the evaluated order (-1: not evaluated)
    q_of_value = _index_in(qrels.query.values, query_ids)
    cat_q_all = q_of_value[qrels.query.codes]
    keep = cat_q_all >= 0
    catalog = Catalog(cat_q_all[keep], qrels.value[keep], nq)
    _check_gain_sums(metric, catalog, query_ids, qrels, keep)
    judged_keys = _pair_index(qrels, keep, catalog.query)

    companions = _read_companions(spec, files)
    systems: dict[str, SystemResult] = {}
    prepared: dict[str, PreparedRun] = {}
    notes: list[str] = []
    for name, src in spec.systems:
        if progress:
            progress(f"reading system '{name}' from {src.declared}")
        with ThreadPoolExecutor(max_workers=1) as pool:  # the digest reads the file while it is parsed
            digest = pool.submit(sha256_file, src.path)
            run = read_run(src.path, src.format, rank=keep_data or metric.ties == "displayed_order")
            files.append(FileInfo(f"system:{name}", str(src.path), src.declared, digest.result(), len(run)))
        prep, unknown_queries = _prepare_run(name, run, query_ids, judged_keys, catalog)
        if prep.query.size == 0:
            raise EvaluationError(
                f"system '{name}' ({src.path}) returns none of the {nq} evaluated queries (its "
                f"{len(run.query.values)} queries, e.g. {preview(run.query.values[:3])}, are all outside the set): "
                f"is it the run of another collection?")
        if unknown_queries:
            notes.append(f"{name}: {unknown_queries} queries of the run are not in the evaluated set and were "
                         f"ignored")
        _check_unjudged(metric, prep)
        if progress:
            progress(f"computing nDCG of '{name}'")
        try:
            qr = compute(metric, prep, catalog)
        except NonFiniteError as exc:  # sums are checked above; a ratio of finite sums can still overflow
            if exc.what != "ndcg":
                raise
            raise DataError(spec.qrels.path, f"system '{name}': the nDCG of query "
                                             f"{str(query_ids[exc.queries[0]])!r} (its DCG over its ideal DCG) "
                                             f"overflows a float: the gains of metric.gain "
                                             f"{metric.gain.describe()} differ too much in size.") from None
        _apply_error_rules(name, src.path, metric, qr, query_ids)
        top = _top_lists(qr, prep, display_depth(metric))
        sr = SystemResult(name, qr, _means(metric, qr, weights), top)
        if companions is not None:
            _companion_measures(spec, companions, prep, qr, sr, relative(weights))
        systems[name] = sr
        if keep_data:
            prepared[name] = prep
    for path in outside_paths(spec):
        notes.append(f"data path outside the spec's folder: {path}")
    result = EvaluationResult(spec, query_ids, weights, systems, files, notes)
    result.grades = sorted({float(g) for g in np.unique(qrels.value)})
    if keep_data:
        result.prepared = prepared
        result.catalog = catalog
    if spec.uncertainty is not None:
        from .analysis import analyze

        if progress:
            progress(f"resampling queries ({spec.uncertainty.resamples} resamples)")
        result.analysis = analyze(result, spec.uncertainty, spec.comparison)
    if spec.sensitivity:
        from .sensitivity import sensitivity

        if progress:
            progress("recomputing under each rule's alternatives (sensitivity)")
        result.sensitivity = sensitivity(result)
    return result


def _read_companions(spec: Spec, files: list[FileInfo]) -> dict[str, Any] | None:
    c = spec.companions
    if c is None:
        return None
    from .companions import read_catalog, read_duplicate_groups

    out: dict[str, Any] = {}
    if c.duplicates is not None:
        out["duplicates"] = read_duplicate_groups(c.duplicates.path)
        files.append(FileInfo("companions.duplicates", str(c.duplicates.path), c.duplicates.declared,
                              sha256_file(c.duplicates.path), len(out["duplicates"].group)))
    if c.catalog is not None:
        out["catalog"] = read_catalog(c.catalog.path)
        files.append(FileInfo("companions.catalog", str(c.catalog.path), c.catalog.declared,
                              sha256_file(c.catalog.path), len(out["catalog"])))
    elif c.catalog_size is not None:
        out["catalog_size"] = c.catalog_size
    return out


def _companion_measures(spec: Spec, companions: dict[str, Any], prep: PreparedRun, qr: QueryResult,
                        sr: SystemResult, weights: np.ndarray) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    from .companions import catalog_coverage, duplicate_rate

    metric = spec.metric
    ranked = qr.ranked
    docs = prep.run.doc.array.take(pa.array(prep.original(ranked), type=pa.int64()))
    query = prep.query[ranked]
    if "duplicates" in companions:
        dup = companions["duplicates"]
        idx = pc.fill_null(pc.index_in(docs, value_set=dup.docs), -1).to_numpy(zero_copy_only=False)
        group = np.where(idx >= 0, dup.group[np.maximum(idx, 0)], -1)
        rate = duplicate_rate(query, qr.position, group, len(weights), metric.cutoffs, qr.n_returned)
        sr.duplicate_rate = rate
        for j, key in enumerate(metric.keys):
            ok = ~np.isnan(rate[:, j])
            sr.means[key]["duplicate_rate"] = (float(weights[ok] @ rate[ok, j] / weights[ok].sum())
                                               if ok.any() else float("nan"))
    if "catalog" in companions or "catalog_size" in companions:
        cov = catalog_coverage(qr.position, docs, metric.cutoffs, size=companions.get("catalog_size"),
                               catalog=companions.get("catalog"), system=sr.name,
                               source=str(spec.source) if spec.source else None)
        for key, value in zip(metric.keys, cov):
            sr.means[key]["catalog_coverage"] = float(value)


def _query_set(spec: Spec, qrels: Table, files: list[FileInfo]) -> np.ndarray:
    """The evaluated query ids in plain string order, as an object array (never a fixed-width ``<U`` copy,
    whose size would be the longest id times the number of queries)."""
    judged_values = qrels.query.values[np.unique(qrels.query.codes)]
    judged = sorted(str(q) for q in judged_values)
    if spec.queries.set is None:
        return _object_array(judged)
    src = spec.queries.set
    ids = read_query_set(src.path)
    files.append(FileInfo("queries.set", str(src.path), src.declared, sha256_file(src.path), len(ids)))
    unknown = sorted(set(ids) - set(judged))
    if unknown:
        raise DataError(src.path, f"{len(unknown)} queries of the declared set have no judgments in "
                                  f"{spec.qrels.declared}: {preview(unknown)}. Judge them or remove them from "
                                  f"the set.")
    return _object_array(sorted(ids))


def _object_array(items: list[str]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _weights(spec: Spec, query_ids: np.ndarray, files: list[FileInfo]) -> np.ndarray:
    """The evaluated queries' weights as given (the per-query table shows them); computations use
    :attr:`EvaluationResult.relative_weights`, the weights over the largest one."""
    if spec.queries.weights is None:
        return np.ones(len(query_ids))
    src = spec.queries.weights
    table = read_weights(src.path)
    files.append(FileInfo("queries.weights", str(src.path), src.declared, sha256_file(src.path), len(table)))
    missing = [q for q in query_ids if q not in table]
    if missing:
        raise DataError(src.path, f"{len(missing)} evaluated queries have no weight: {preview(missing)}.")
    weights = np.array([table[q] for q in query_ids], dtype=np.float64)
    try:
        total = math.fsum(weights)
    except OverflowError:
        total = math.inf
    if not math.isfinite(total):
        raise DataError(src.path, f"the weights of the {weights.size} evaluated queries add up to more than the "
                                  f"largest double ({np.finfo(np.float64).max:.4g}), so their sum cannot be "
                                  f"reported; only their ratios matter: divide them all by a common factor.")
    return weights


def relative(weights: np.ndarray) -> np.ndarray:
    """Weights over the largest one: the ratios (all a weighted mean depends on) without overflow or underflow
    (:func:`~ndcg_mlflow.readers.read_weights` refuses ratios that are not normal doubles)."""
    return weights / weights.max() if weights.size else weights


def _index_in(values: np.ndarray, universe: np.ndarray) -> np.ndarray:
    """Position of each of ``values`` in ``universe`` (distinct ids), -1 where absent; a hash lookup, with no
    fixed-width string copy of either array."""
    position = {str(u): i for i, u in enumerate(universe)}
    return np.fromiter((position.get(str(v), -1) for v in values), dtype=np.int64, count=len(values))


@dataclass
class _JudgedIndex:
    """Sorted (query, doc) keys of the evaluated judgments, for joining run rows to their gains."""

    doc_values: Any  # pyarrow array of the distinct judged doc ids
    keys: np.ndarray  # sorted int64 keys: query * n_docs + doc
    gain_rows: np.ndarray  # position in the catalog arrays, aligned with keys
    n_docs: int
    grades: np.ndarray  # grade of each catalog row


def _doc_codes(strings, value_set) -> np.ndarray:
    """Position of each id in ``value_set`` (a pyarrow array), -1 where absent (Arrow's hash lookup)."""
    import pyarrow.compute as pc

    idx = pc.index_in(strings, value_set=value_set)
    return np.asarray(pc.fill_null(idx, -1).to_numpy(zero_copy_only=False), dtype=np.int64)


def _pair_index(qrels: Table, keep: np.ndarray, cat_q: np.ndarray) -> _JudgedIndex:
    """Index of the evaluated judgments (catalog rows are the qrels rows where ``keep``)."""
    import pyarrow.compute as pc

    doc_values = pc.unique(qrels.doc.array)
    if hasattr(doc_values, "combine_chunks"):
        doc_values = doc_values.combine_chunks()
    d = _doc_codes(qrels.doc.array, doc_values)[keep]
    n_docs = max(len(doc_values), 1)
    keys = cat_q.astype(np.int64) * n_docs + d
    order = np.argsort(keys, kind="stable")
    return _JudgedIndex(doc_values, keys[order], order, n_docs, qrels.value[keep])


def _prepare_run(name: str, run: Table, query_ids: np.ndarray, judged: _JudgedIndex,
                 catalog: Catalog) -> tuple[PreparedRun, int]:
    """Join one run to the judgments: evaluated rows only, each with its grade and judged flag.

    Returns the prepared rows and the number of the run's queries outside the evaluated set.
    """
    q_map = _index_in(run.query.values, query_ids)
    unknown_queries = int(np.count_nonzero(q_map < 0))
    q = q_map[run.query.codes]
    kept = None if unknown_queries == 0 else np.flatnonzero(q >= 0)
    if kept is not None:
        q = q[kept]

    d = _doc_codes(run.doc.array, judged.doc_values)
    if kept is not None:
        d = d[kept]
    cand = np.flatnonzero(d >= 0)
    keys = q[cand].astype(np.int64) * judged.n_docs + d[cand]
    at = np.minimum(np.searchsorted(judged.keys, keys), max(judged.keys.size - 1, 0))
    hit = judged.keys[at] == keys if judged.keys.size else np.zeros(cand.size, dtype=bool)
    is_judged = np.zeros(q.size, dtype=bool)
    is_judged[cand[hit]] = True
    grade = np.full(q.size, np.nan)
    grade[cand[hit]] = catalog.grade[judged.gain_rows[at[hit]]]
    score = run.value if kept is None else run.value[kept]
    return PreparedRun(name, run, kept, q, score, grade, is_judged), unknown_queries


def _check_unjudged(metric: Metric, prep: PreparedRun) -> None:
    if metric.unjudged == "error" and not prep.judged.all():
        bad = np.flatnonzero(~prep.judged)
        first = int(prep.original(bad[:1])[0])
        run = prep.run
        raise EvaluationError(
            f"{run.at(first)}: document {run.doc.row(first)!r} returned for query "
            f"{run.query.row(first)!r} has no judgment, and metric.unjudged is 'error' "
            f"({bad.size} unjudged returned documents in all).")


def _tiebreak(ties: str, prep: PreparedRun):
    """Keys ordering tied rows: the displayed rank, or the doc id (only tied rows are ever looked up)."""
    if ties == "displayed_order":
        if prep.run.rank is None:
            return None
        rank = prep.run.rank if prep.kept is None else prep.run.rank[prep.kept]
        return lambda rows: rank[rows]
    if ties in ("id_ascending", "id_descending"):
        sign = 1 if ties == "id_ascending" else -1
        return lambda rows: sign * _string_ranks(prep.run.doc.take(prep.original(rows)))
    return None


def display_depth(metric: Metric) -> int:
    """How many documents per query are kept for showing wins and losses."""
    finite = [k for k in metric.cutoffs if k is not None]
    return min(max(finite + [10]), 100)


def _top_lists(qr: QueryResult, prep: PreparedRun, depth: int) -> TopLists:
    r, pos = qr.top(depth)
    return TopLists(depth, prep.query[r], pos, prep.run.doc.take(prep.original(r)), prep.grade[r])


def _string_ranks(values: list[str]) -> np.ndarray:
    """Rank of each string in plain (code point) string order (Python's comparison; no fixed-width copy)."""
    order = np.fromiter(sorted(range(len(values)), key=values.__getitem__), dtype=np.int64, count=len(values))
    ranks = np.empty(len(values), dtype=np.int64)
    ranks[order] = np.arange(len(values))
    return ranks


def _apply_error_rules(name: str, path: Path, metric: Metric, qr: QueryResult, query_ids: np.ndarray) -> None:
    if metric.missing_queries == "error":
        missing = query_ids[(qr.status == MISSING).any(axis=1)]
        if missing.size:
            raise EvaluationError(f"system '{name}' ({path}) returns nothing for {missing.size} evaluated "
                                  f"queries: {preview(missing)}; metric.missing_queries is 'error'.")
    if metric.empty_ideal == "error":
        empty = query_ids[(qr.status == EMPTY_IDEAL).any(axis=1)]
        if empty.size:
            raise EvaluationError(f"system '{name}': {empty.size} queries have an ideal DCG of 0 under "
                                  f"ideal '{metric.ideal}': {preview(empty)}; metric.empty_ideal is 'error'.")


def _means(metric: Metric, qr: QueryResult, weights: np.ndarray) -> dict[str, dict[str, Any]]:
    out = {}
    for j, key in enumerate(metric.keys):
        x = qr.ndcg[:, j]
        ok = ~np.isnan(x)
        w = weights[ok]
        r = relative(weights)[ok]  # weights over the largest: no overflow or underflow in the sums
        mean = float(np.dot(r, x[ok]) / r.sum()) if ok.any() else float("nan")
        out[key] = {
            "mean": mean,
            "n_evaluated": int(ok.sum()),
            "n_excluded": int((~ok).sum()),
            "n_missing": int((qr.status[:, j] == MISSING).sum()),
            "n_empty_ideal": int((qr.status[:, j] == EMPTY_IDEAL).sum()),
            "weight_sum": float(w.sum()),
            "n_eff": float(r.sum() ** 2 / (r ** 2).sum()) if ok.any() else 0.0,
            "judged_coverage": float(np.nanmean(qr.judged_coverage[:, j]))
            if np.isfinite(qr.judged_coverage[:, j]).any() else float("nan"),
        }
    return out
