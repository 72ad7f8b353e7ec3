"""The pipeline from a spec to per-query and mean nDCG for every system: read -> join -> kernel -> means ->
statistics -> sensitivity.

:func:`evaluate` reads the spec's declared files, or takes the tables given in their place, into the same
tables; :func:`evaluate_tables` is a convenience for tables held in memory, on the same path. The per-query
join is :mod:`ndcg_mlflow.join`, the numbers :mod:`ndcg_mlflow.kernel`. No MLflow here: both return an
:class:`EvaluationResult` that the logging layer, the CLI or a notebook can use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ...companions import CompanionPlan, coverage_of_counts, fill_means, group_codes, shown_counts
from ...errors import SpecError
from ...join import Catalog, PreparedRun, judgments, map_gains  # noqa: F401 (re-exported)
from ...kernel import NonFiniteError
from ...queries import OVERFLOW, Problem, QueryRows, problem_error, query_rows
from ...readers import Table, read_qrels, read_run, sha256_file
from ...readers.hashing import check_same_file, read_unchanged
from ...readers.table import yield_cpu
from ...result import (  # noqa: F401 (re-exported)
    EvaluationResult,
    FileInfo,
    SystemResult,
    json_safe,
    relative,
)
from ...rules import needs_row_order
from ...spec import Metric, Spec
from ...statistics.sensitivity import alternatives as sensitivity_alternatives
from ...statistics.sensitivity import collect_alternatives
from ...timings import phase
from ..inputs import evaluated_query_set, query_segments, query_weights  # noqa: F401 (re-exported)
from ..outcome import (
    display_depth,
    finish,
    statistics,
    system_result,
)
from ..preparation import input_table, read_companions, resolve_spec, said_of_candidates
from ..settings import Inputs, LocalSettings

# --------------------------------------------------------------------------- evaluation


def evaluate(engine: LocalSettings, spec: Spec, inputs: Inputs) -> EvaluationResult:
    """Evaluate every system of a spec on this process with the settings of ``engine`` (a
    :class:`~ndcg_mlflow.engines.Local`) and its ``inputs``, ``spec`` resolved with them (loaded, its files
    checked: :func:`~ndcg_mlflow.engines.preparation.resolve_spec`, which :func:`ndcg_mlflow.evaluate` calls once);
    the local engine's runs: model systems are scored before, by :func:`ndcg_mlflow.engines.local.evaluate_on`,
    which ``inputs.tracking_uri`` and ``scored_dir`` are for."""
    qrels, systems, columns = inputs.qrels, inputs.systems, inputs.columns
    if columns is not None and qrels is None and systems is None:
        raise SpecError(
            "columns",
            "a column mapping given to evaluate() applies to tables given in memory "
            "(qrels=, systems=); for files, write it in the spec (data.<source>.columns).",
        )
    return _evaluate(engine, spec, inputs)


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
    files holding the same rows; a convenience for :func:`ndcg_mlflow.evaluate` with these arguments and
    ``engine=Local(keep_data=keep_data)``, on the same path, for runs (a model system is refused).

    ``qrels`` holds ``query_id, doc_id, grade`` and each table of ``systems`` (name -> table)
    ``query_id, doc_id`` and ``score`` and/or ``rank``; either may be None to take that part from the spec's
    data section (its files read into the same tables, runs one at a time, so that one run at most is held in
    memory). A table is anything with the Arrow C
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
    inputs = Inputs(qrels, systems, columns, base_dir, progress)
    return _evaluate(LocalSettings(keep_data=keep_data), resolve_spec(spec, qrels, systems, base_dir), inputs)


def _evaluate(engine: LocalSettings, spec: Spec, inputs: Inputs) -> EvaluationResult:
    """:func:`evaluate` and :func:`evaluate_tables`: the spec's runs, or the tables of ``inputs``, evaluated (the
    spec resolved with them)."""
    from ...spec import IN_MEMORY

    qrels, systems, columns, keep_data = inputs.qrels, inputs.systems, inputs.columns, engine.keep_data
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
        return _pipeline(spec, (qrels_table, qrels_info), runs, inputs.progress, keep_data)


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
        from ...spec import IN_MEMORY

        self.name, self.obj, self.shared, self.declared = name, obj, shared, IN_MEMORY

    def load(self) -> tuple[Table, FileInfo]:
        from ...spec import IN_MEMORY

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
    by_alternative, left_out = collect_alternatives(alts, systems, computed) if spec.sensitivity else (None, [])
    result = finish(spec, query_ids, weights, systems, files, notes, qrels, segments=segments)
    result.sensitivity_left_out = left_out
    if keep_data:
        result.prepared = prepared
        result.catalog = catalog
    return statistics(result, progress, by_alternative)


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
