"""The pipeline from a spec to per-query and mean nDCG for every system: read -> join -> kernel -> means ->
statistics -> sensitivity.

:func:`evaluate_tables` is the file-free core (the judgments and runs as tables in memory);
:func:`evaluate` reads the spec's declared files into the same tables. The per-query join is
:mod:`ndcg_mlflow.join`, the numbers :mod:`ndcg_mlflow.kernel`. No MLflow here: both return an
:class:`EvaluationResult` that the logging layer, the CLI or a notebook can use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from .companions import CompanionPlan, coverage_of_counts, fill_means, group_codes, shown_counts
from .errors import DataError, EvaluationError, SpecError, preview
from .join import Catalog, PreparedRun, judgments, map_gains  # noqa: F401 (re-exported)
from .kernel import STATUS_EMPTY_IDEAL, STATUS_MISSING, NonFiniteError, QueryResult
from .paths import shown_path
from .queries import OVERFLOW, Problem, QueryRows, problem_error, query_rows
from .query_inputs import evaluated_query_set, query_segments, query_weights  # noqa: F401 (re-exported)
from .readers import Table, read_qrels, read_run, sha256_file
from .readers.hashing import check_same_file, read_unchanged, read_with_digest
from .readers.table import yield_cpu
from .result import (  # noqa: F401 (re-exported)
    EvaluationResult,
    FileInfo,
    SystemResult,
    json_safe,
    relative,
)
from .rules import needs_row_order, stops
from .sensitivity import alternatives as sensitivity_alternatives
from .sensitivity import collect_alternatives
from .spec import Metric, Spec, check_files, load_spec, outside_paths
from .stats import nan_weighted_mean
from .timings import phase

# --------------------------------------------------------------------------- evaluation


def evaluate(
    spec: str | Path | Mapping[str, Any] | Spec,
    *,
    qrels: Any = None,
    systems: Mapping[str, Any] | None = None,
    columns: Mapping[str, str] | None = None,
    base_dir: str | Path | None = None,
    progress=None,
    keep_data: bool = False,
) -> EvaluationResult:
    """Evaluate every system of a spec on this process (the local engine); :func:`ndcg_mlflow.evaluate`
    (:mod:`ndcg_mlflow.api`) is the entry point that also offers the Spark engine, with the same arguments."""
    if columns is not None and qrels is None and systems is None:
        raise SpecError(
            "columns",
            "a column mapping given to evaluate() applies to tables given in memory "
            "(qrels=, systems=); for files, write it in the spec (data.<source>.columns).",
        )
    return evaluate_tables(
        spec, qrels, systems, columns=columns, base_dir=base_dir, progress=progress, keep_data=keep_data
    )


def evaluate_tables(
    spec: str | Path | Mapping[str, Any] | Spec,
    qrels: Any,
    systems: Mapping[str, Any] | None,
    *,
    columns: Mapping[str, str] | None = None,
    base_dir: str | Path | None = None,
    progress=None,
    keep_data: bool = False,
) -> EvaluationResult:
    """Evaluate tables held in memory: the file-free core, which gives the same :class:`EvaluationResult` as
    files holding the same rows.

    ``qrels`` holds ``query_id, doc_id, grade`` and each table of ``systems`` (name -> table)
    ``query_id, doc_id`` and ``score`` and/or ``rank``; either may be None to take that part from the spec's
    data section: :func:`evaluate` is this function with both None, its files read into the same tables
    (runs one at a time, so that one run at most is held in memory). A table is anything with the Arrow C
    stream interface (a pyarrow Table or RecordBatchReader, a pandas, polars or DuckDB frame), a
    :class:`~ndcg_mlflow.readers.Table`, or a nested mapping ``{query_id: {doc_id: grade}}`` /
    ``{query_id: {doc_id: score}}`` (its order is the rows' order).
    Integer ids are read as their decimal text. ``columns`` maps the tool's column names to the tables'
    (``{"query_id": "userID", "doc_id": "itemID", "grade": "rating", "score": "prediction"}``), for every
    table given; a ``(table, mapping)`` pair maps that table's columns alone. The rows are checked as a
    file's are (types, nulls, non-finite numbers, empty ids, a document twice for one query), each error
    naming the table (``qrels``, ``systems['v3']``) and the row. Each table's content digest
    (:func:`~ndcg_mlflow.readers.table_digest`) is recorded where a file's sha256 is.
    """
    from .spec import IN_MEMORY

    spec = resolve_spec(spec, qrels, systems, base_dir)
    unscored = [name for name, src in spec.systems if src.unscored]
    if unscored:
        raise SpecError(
            f"data.systems.{unscored[0]}",
            "is a model: ndcg_mlflow.evaluate (or 'ndcg-mlflow run') scores its candidates first (ndcg_mlflow.models).",
        )
    shared = dict(columns or {})
    files = [("qrels", spec.qrels)] if qrels is None else []
    files += [(name, src) for name, src in spec.systems] if systems is None else []
    with _Digests(files) as digests:
        rank = keep_data or needs_row_order(spec.metric.ties, spec.sensitivity)
        if systems is not None:
            runs: dict[str, Any] = {name: _RunObject(name, obj, shared) for name, obj in systems.items()}
        else:
            runs = {name: _RunFile(name, src, rank, digests) for name, src in spec.systems}
            if runs:  # the first run is read while the judgments are (its errors wait for theirs)
                next(iter(runs.values())).prefetch()
        if qrels is not None:
            qrels_table = input_table(qrels, "qrels", "qrels", shared)
            qrels_info = FileInfo("qrels", "", IN_MEMORY, qrels_table.digest or "", len(qrels_table))
        else:
            q = spec.qrels
            with phase("read"):
                qrels_table, identity = read_unchanged(
                    q.file, q.version, lambda: read_qrels(q.file, q.format, q.columns, q.version)
                )
            qrels_info = FileInfo(
                "qrels",
                str(q.path),
                q.declared,
                check_same_file(digests.sha256("qrels"), identity, q.file),
                len(qrels_table),
            )
        return _pipeline(spec, (qrels_table, qrels_info), runs, progress, keep_data)


class _Digests:
    """The sha256 of the judgments' and runs' files, computed one file after another by one background thread
    from the start of an evaluation: the digests of the runs are ready or under way while the judgments are read
    (one core would otherwise idle there) and while earlier runs are computed. On leaving (an error included),
    digests not yet begun are dropped and the one being read stops at its next block."""

    def __init__(self, files: list[tuple[str, Any]]):
        import threading

        self.stop = threading.Event()
        self.pool = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="ndcg-mlflow-sha256", initializer=yield_cpu)
            if files
            else None
        )
        self.futures = (
            {key: self.pool.submit(sha256_file, src.file, src.version, self.stop) for key, src in files}
            if self.pool is not None
            else {}
        )

    def sha256(self, key: str) -> str:
        """The digest of one file (a :class:`~ndcg_mlflow.readers.hashing.FileDigest`, which names the files it is
        of)."""
        return self.futures[key].result()

    def __enter__(self) -> _Digests:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.pool is not None:
            self.stop.set()
            self.pool.shutdown(wait=True, cancel_futures=True)


def resolve_spec(
    spec: str | Path | Mapping[str, Any] | Spec,
    qrels: Any,
    systems: Mapping[str, Any] | None,
    base_dir: str | Path | None = None,
) -> Spec:
    """The spec, its data entries replaced by the tables given (``qrels``, ``systems``), its files checked."""
    from .spec import IN_MEMORY, InMemory, Source, system_name_problem

    if systems is not None and not isinstance(systems, Mapping):
        raise SpecError("systems", f"must map each system name to its table, got {type(systems).__name__}.")
    names = tuple(systems) if systems is not None else None
    given = InMemory(qrels is not None, names) if qrels is not None or names is not None else None
    if isinstance(spec, Spec):  # a spec built earlier: its data entries are replaced by the tables given
        import dataclasses

        memory = Source(None, IN_MEMORY, "table")
        for name in names or ():
            problem = system_name_problem(name)
            if problem:
                raise SpecError(f"systems[{name!r}]", problem)
        if names is not None and spec.comparison is not None and spec.comparison.baseline not in names:
            raise SpecError(
                "comparison.baseline",
                f"names {spec.comparison.baseline!r}, which is not among the "
                f"systems given ({', '.join(map(str, names))}).",
            )
        spec = dataclasses.replace(
            spec,
            qrels=memory if qrels is not None else spec.qrels,
            systems=tuple((n, memory) for n in names) if names is not None else spec.systems,
        )
    else:
        spec = load_spec(spec, base_dir=base_dir, tables=given)
    problems = check_files(spec)
    if problems:
        raise SpecError("", "; ".join(problems), str(spec.source) if spec.source else None)
    return spec


def input_table(obj: Any, kind: str, label: str, shared: dict[str, str]) -> Table:
    from .readers import table_from_object
    from .readers.accept import kind_mapping

    mapping = shared
    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[1], Mapping):
        obj, mapping = obj[0], {**shared, **obj[1]}
    if obj is None:
        raise DataError(label, "no table was given.")
    if isinstance(obj, Table):
        if obj.digest is None:
            from .readers import table_digest

            obj.digest = table_digest(obj)
        return obj
    usable = kind_mapping(kind, mapping)
    unknown = [k for k in mapping if k not in ("query_id", "doc_id", "grade", "score", "rank")]
    if unknown:
        raise SpecError(
            "columns", f"unknown column {unknown[0]!r}; a column mapping names query_id, doc_id, grade, score or rank."
        )
    return table_from_object(obj, kind, label, usable)


class _RunFile:
    """A system's run file, read when the pipeline reaches it (one run in memory at a time); its sha256 comes from
    the evaluation's background digests."""

    def __init__(self, name: str, src, rank: bool, digests: _Digests):
        self.name, self.src, self.rank, self.declared, self.digests = name, src, rank, src.declared, digests
        self.pending: Any = None
        self.identity: Any = None

    def prefetch(self) -> None:
        """Start reading the file in a thread (:meth:`load` then takes what it read, or raises its error): the
        first run is read while the judgments are."""
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ndcg-mlflow-read")
        self.pending = pool.submit(self._read)
        pool.shutdown(wait=False)

    def _read(self) -> Table:
        src = self.src
        run, self.identity = read_unchanged(
            src.path,
            src.version,
            lambda: read_run(
                src.path,
                src.format,
                rank=self.rank,
                columns=src.columns,
                version=src.version,
                pair_keys=True,
                background=True,
            ),
        )
        return run

    def load(self) -> tuple[Table, FileInfo]:
        """The run's rows and its file's record, whose sha256 is filled in from :meth:`digest` once the run is
        joined and ranked (a digest slower than the read then delays nothing)."""
        pending, self.pending = self.pending, None
        run = pending.result() if pending is not None else self._read()
        return run, FileInfo(f"system:{self.name}", str(self.src.path), self.src.declared, "", len(run))

    def digest(self) -> str:
        return check_same_file(self.digests.sha256(self.name), self.identity, self.src.path)


class _RunObject:
    """A system's rows given in memory, converted when the pipeline reaches them."""

    def __init__(self, name: str, obj: Any, shared: dict[str, str]):
        from .spec import IN_MEMORY

        self.name, self.obj, self.shared, self.declared = name, obj, shared, IN_MEMORY

    def load(self) -> tuple[Table, FileInfo]:
        from .spec import IN_MEMORY

        run = input_table(self.obj, "run", f"systems[{self.name!r}]", self.shared)
        return run, FileInfo(f"system:{self.name}", "", IN_MEMORY, run.digest or "", len(run))

    def digest(self) -> str | None:
        return None  # (recorded by load)


def _pipeline(
    spec: Spec, qrels_in: tuple[Table, FileInfo], runs: Mapping[str, Any], progress, keep_data: bool
) -> EvaluationResult:
    """read -> join -> kernel -> means, per system; then statistics and sensitivity on the per-query rows."""
    metric = spec.metric
    qrels, qrels_info = qrels_in
    files: list[FileInfo] = [qrels_info]
    with phase("read"):
        map_gains(metric.gain, qrels.value, qrels)  # a grade missing from a gain table stops here, before any run
        query_ids = evaluated_query_set(spec, qrels, files)
        weights = query_weights(spec, query_ids, files)
        judged = judgments(qrels, query_ids, metric)
        catalog = judged.catalog
        companions = read_companions(spec, files)
        segments = query_segments(spec, query_ids, files)
    alts = sensitivity_alternatives(metric)[1:] if spec.sensitivity else []  # the declared numbers are the systems'
    computed: dict[str, tuple[dict[tuple[str, str], np.ndarray], set[tuple[str, str]]]] = {}
    systems: dict[str, SystemResult] = {}
    prepared: dict[str, PreparedRun] = {}
    notes: list[str] = []
    for name, source in runs.items():
        if progress:
            progress(f"reading system '{name}' from {source.declared}")
        with said_of_candidates([getattr(source, "src", None)]):
            with phase("read"):
                run, info = source.load()
            files.append(info)
            try:
                with phase("scoring"):
                    sr, prep, rows = _system(
                        spec, name, run, judged, query_ids, weights, companions, notes, qrels, progress, alts
                    )
            except BaseException:
                run.checked()  # a duplicate found by the check still under way is the error, before the join's
                raise
            run.checked()  # (the run's duplicate check ran in a thread beside the join and the kernel)
        sha = source.digest()
        if sha is not None:
            files[-1] = dataclasses.replace(info, sha256=sha)
        systems[name] = sr
        if rows.alternatives is not None:
            computed[name] = (
                {(r, a): rows.alternatives[:, i, :] for i, (r, a, _) in enumerate(alts)},
                {(r, a) for i, (r, a, _) in enumerate(alts) if i in rows.overflowed},
            )
        if keep_data:
            prepared[name] = prep
        del run, prep, rows  # one run in memory at a time: the next one is read without this one's rows
    by_alternative = collect_alternatives(alts, systems, computed, notes) if spec.sensitivity else None
    result = finish(spec, query_ids, weights, systems, files, notes, qrels, segments=segments)
    if keep_data:
        result.prepared = prepared
        result.catalog = catalog
    return statistics(result, progress, by_alternative)


@contextmanager
def said_of_candidates(sources: Any) -> Iterator[None]:
    """A model system's rows are the scored rows it wrote (into the output folder being made, or a folder of the
    caller's: a file the user never declared): a problem found in them, by any engine, is said of the candidates
    file they were scored from, naming the model. ``sources``: the systems' sources (others pass through)."""
    scored = {
        key: src
        for src in sources
        if getattr(src, "candidates", None) is not None and src.path is not None
        for key in (str(src.path), shown_path(src.path))
    }
    try:
        yield
    except DataError as exc:
        src = scored.get(exc.file)
        if src is None:
            raise
        candidates = src.candidates
        raise DataError(
            candidates.path if candidates.path is not None else candidates.declared,
            f"{exc.message} (found in the rows {src.model} scored from these candidates: a model "
            f"that scores each row keeps their order, so a row number is the candidates' own)",
            exc.line,
        ) from None


def _system(
    spec: Spec,
    name: str,
    run: Table,
    judged: Any,
    query_ids: np.ndarray,
    weights: np.ndarray,
    companions: Any,
    notes: list[str],
    qrels: Table,
    progress,
    alternatives: Sequence[tuple[str, str, Metric]] = (),
) -> tuple[SystemResult, PreparedRun, QueryRows]:
    """One system's run joined to the judgments: its per-query numbers, means, top lists and companion measures,
    its prepared rows and its per-query rows (with sensitivity's ``alternatives``)."""
    metric = spec.metric

    def joined() -> None:
        if progress:
            progress(f"computing nDCG of '{name}'")

    try:
        plan = CompanionPlan.of(spec, companions)
        groups = group_codes(companions["duplicates"], run.doc.array) if plan and plan.duplicates else None
        seamed = query_rows(
            metric, judged, name, run, display_depth(metric), [m for _, _, m in alternatives], plan, groups, joined
        )
    except NonFiniteError as exc:  # sums are checked above; a ratio of finite sums can still overflow
        if exc.what != "ndcg":
            raise
        overflow = Problem(OVERFLOW, str(query_ids[exc.queries[0]]), None, int(exc.queries.size))
        raise problem_error(overflow, name, str(run.path), metric, qrels.path) from None
    rows, prep = seamed.rows, seamed.prep
    assert rows is not None and prep is not None
    qr = rows.result
    values = run.query.values
    sr = system_result(
        name, run.path, metric, qr, query_ids, weights, notes, len(values), seamed.unknown, values[:3], rows.top
    )
    if companions is not None:
        coverage = None
        if rows.shown is not None:
            counts = shown_counts(rows.shown, metric.cutoffs, companions.get("catalog"))
            coverage = coverage_of_counts(counts, metric.cutoffs, companions, name, str(spec.source or "") or None)
        fill_means(sr, metric, rows.duplicate_rate, coverage, relative(weights))
    return sr, prep, rows


def finish(
    spec: Spec,
    query_ids: np.ndarray,
    weights: np.ndarray,
    systems: dict[str, SystemResult],
    files: list[FileInfo],
    notes: list[str],
    qrels: Table,
    engine: str = "local",
    segments: np.ndarray | None = None,
) -> EvaluationResult:
    """The result of every system's per-query numbers (before the statistics), whatever engine computed them;
    ``segments``: the evaluated queries' segments (:func:`~ndcg_mlflow.query_inputs.query_segments`)."""
    for path in outside_paths(spec):
        notes.append(f"data path outside the spec's folder: {path}")
    result = EvaluationResult(spec, query_ids, weights, systems, files, notes, engine=engine, segments=segments)
    result.grades = sorted(set(qrels.value.tolist()))
    return result


def statistics(result: EvaluationResult, progress=None, alternative_ndcg: Any = None) -> EvaluationResult:
    """Intervals and comparisons (the spec's uncertainty section), then sensitivity, on the per-query rows;
    ``alternative_ndcg``: the per-query numbers of sensitivity's alternatives as the engine computed them
    (:data:`~ndcg_mlflow.sensitivity.AlternativeNdcg`; default: recomputed from the kept rows)."""
    with phase("statistics"):
        return _statistics(result, progress, alternative_ndcg)


def _statistics(result: EvaluationResult, progress, alternative_ndcg: Any) -> EvaluationResult:
    spec = result.spec
    if spec.uncertainty is not None:
        from .analysis import analyze

        if progress:
            progress(f"resampling queries ({spec.uncertainty.resamples} resamples)")
        result.analysis = analyze(result, spec.uncertainty, spec.comparison, spec.decision)
        result.notes.extend(result.analysis.notes)
        result.notes.extend(c["note"] for c in result.analysis.consistency if "note" in c)
        if spec.decision is not None:
            from .decision import decide, undetectable_notes

            result.decision = decide(
                spec.decision,
                result.analysis.comparisons,
                spec.uncertainty.confidence,
                result.analysis.paired,
                segment_paired=result.analysis.segment_paired,
            )
            result.notes.extend(undetectable_notes(result.analysis.comparisons, spec.decision))
    if spec.sensitivity:
        from .sensitivity import sensitivity

        if progress:
            progress("recomputing under each rule's alternatives (sensitivity)")
        result.sensitivity = sensitivity(result, alternative_ndcg)
    return result


def read_companions(spec: Spec, files: list[FileInfo]) -> dict[str, Any] | None:
    c = spec.companions
    if c is None:
        return None
    from .companions import read_catalog, read_duplicate_groups

    out: dict[str, Any] = {}
    if c.duplicates is not None:
        out["duplicates"], sha = read_with_digest(
            c.duplicates.file, None, lambda: read_duplicate_groups(c.duplicates.file)
        )
        files.append(
            FileInfo(
                "companions.duplicates",
                str(c.duplicates.path),
                c.duplicates.declared,
                sha,
                len(out["duplicates"].group),
            )
        )
    if c.catalog is not None:
        out["catalog"], sha = read_with_digest(c.catalog.file, None, lambda: read_catalog(c.catalog.file))
        files.append(FileInfo("companions.catalog", str(c.catalog.path), c.catalog.declared, sha, len(out["catalog"])))
    elif c.catalog_size is not None:
        out["catalog_size"] = c.catalog_size
    return out


def display_depth(metric: Metric) -> int:
    """How many documents per query are kept for showing wins and losses."""
    finite = [k for k in metric.cutoffs if k is not None]
    return min(max(finite + [10]), 100)


def system_result(
    name: str,
    path: str | Path,
    metric: Metric,
    qr: QueryResult,
    query_ids: np.ndarray,
    weights: np.ndarray,
    notes: list[str],
    run_queries: int,
    unknown: int,
    examples: Any,
    top: Any,
) -> SystemResult:
    """One system's result from its per-query rows (``qr``, of ``query_ids``; ``top``: its top lists), whatever
    engine computed them: :func:`system_checks` (``run_queries``: the run's queries, ``unknown`` of them outside
    the evaluated set, ``examples`` some of them), then the means."""

    def statuses(status: int) -> tuple[int, Any]:
        hit = query_ids[(qr.status == status).any(axis=1)]
        return hit.size, hit[:5]

    returned = bool(qr.n_returned.any())
    system_checks(name, path, metric, len(query_ids), returned, run_queries, unknown, examples, notes, statuses)
    return SystemResult(name, qr, system_means(metric, qr, weights), top)


def system_checks(
    name: str,
    path: str | Path,
    metric: Metric,
    n_queries: int,
    returned: bool,
    run_queries: int,
    unknown: int,
    examples: Any,
    notes: list[str],
    statuses: Callable[[int], tuple[int, Any]],
) -> None:
    """What follows a system's per-query rows on every engine, in this order: a run that returns none of the
    ``n_queries`` evaluated queries (``returned``: whether it returns some) is refused; its ``unknown`` queries
    outside the set get their note; the ``error`` choices of ``missing_queries`` and ``empty_ideal`` are applied
    (``statuses(status)``: how many evaluated queries have that status, and the first five of them, asked only
    under a rule that stops)."""
    if not returned:
        none_returned(name, path, n_queries, run_queries, examples)
    note_unknown_queries(notes, name, unknown)
    for status, rule in ((STATUS_MISSING, metric.missing_queries), (STATUS_EMPTY_IDEAL, metric.empty_ideal)):
        if stops(rule):
            n, first = statuses(status)
            if n:
                stopped_by(metric, status, name, path, n, first)


def none_returned(name: str, path: str | Path, nq: int, run_queries: int, examples: Any) -> None:
    """Raise the error of a run that returns none of the evaluated queries (``examples``: some of its queries)."""
    raise EvaluationError(
        f"system '{name}' ({path}) returns none of the {nq} evaluated queries (its {run_queries} queries, e.g. "
        f"{preview(examples)}, are all outside the set): is it the run of another collection?"
    )


def note_unknown_queries(notes: list[str], name: str, unknown: int) -> None:
    """The note of a run's queries outside the evaluated set (none when there are none)."""
    if unknown:
        notes.append(f"{name}: {unknown} queries of the run are not in the evaluated set and were ignored")


def stopped_by(metric: Metric, status: int, name: str, path: str | Path, n: int, first: Any) -> None:
    """Raise the error of a query status (missing, empty ideal) whose rule is ``error``, when it is: ``n`` queries
    of system ``name`` have it, ``first`` the first of them (every engine words it so)."""
    if status == STATUS_MISSING and stops(metric.missing_queries):
        raise EvaluationError(
            f"system '{name}' ({path}) returns nothing for {n} evaluated "
            f"queries: {preview(first, total=n)}; metric.missing_queries is 'error'."
        )
    if status == STATUS_EMPTY_IDEAL and stops(metric.empty_ideal):
        raise EvaluationError(
            f"system '{name}': {n} queries have an ideal DCG of 0 under "
            f"ideal '{metric.ideal}': {preview(first, total=n)}; metric.empty_ideal is 'error'."
        )


def system_means(metric: Metric, qr: QueryResult, weights: np.ndarray) -> dict[str, dict[str, Any]]:
    out = {}
    rel = relative(weights)  # weights over the largest: no overflow or underflow in the sums
    for j, key in enumerate(metric.keys):
        x = qr.ndcg[:, j]
        ok = ~np.isnan(x)
        w = weights[ok]
        r = rel[ok]
        out[key] = {
            "mean": nan_weighted_mean(x, rel),
            "n_evaluated": int(ok.sum()),
            "n_excluded": int((~ok).sum()),
            "n_missing": int((qr.status[:, j] == STATUS_MISSING).sum()),
            "n_empty_ideal": int((qr.status[:, j] == STATUS_EMPTY_IDEAL).sum()),
            "weight_sum": float(w.sum()),
            "n_eff": float(r.sum() ** 2 / (r**2).sum()) if ok.any() else 0.0,
            "judged_coverage": float(np.nanmean(qr.judged_coverage[:, j]))
            if np.isfinite(qr.judged_coverage[:, j]).any()
            else float("nan"),
        }
    return out
