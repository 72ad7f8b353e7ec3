"""Beyond the driver: the grouped path. The per-query rows stay in Spark, written as Parquet into a new folder
(``per_query_path``), and the means, intervals and paired tests come from per-group sums computed in Spark
(:func:`group_sums_spark`; the statistics: :mod:`ndcg_mlflow.statistics.group_sums`). A spec asking for what these
statistics cannot give is refused before any Spark job (:func:`check_grouped`)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import SpecError
from ...kernel import STATUS_NAMES
from ...paths import shown_path
from ...result import EvaluationResult, summary_of
from ...rules import INTERVAL_METHOD, PERCENTILE, RANDOMIZATION, STRATIFY, TEST, percentile_interval, t_tests
from ...spec import Guardrails, Metric, Spec
from ...statistics.comparisons import correction_family
from ...statistics.group_sums import GROUPS, GroupSums, group_counts, group_interval, group_sign_flip, group_units
from ...timings import phase
from ..outcome import system_checks
from ..preparation import resolve_spec
from ..settings import Inputs, SparkSettings
from . import companion_measures as comps
from .assemble import check_buckets, files_unchanged, rows_seen, system_info, system_rows, unchecked_duplicates
from .judgments import Judged, judged_in_spark, judged_on_driver, judgments_beyond
from .kinds import RowKind, where_kind
from .session import active_session

GROUPED_NOT_COMPUTED = (
    "BCa and studentized intervals",
    "t-tests",
    "effect sizes",
    "relative differences",
    "wins, ties and losses",
    "the per-query figures",
)
"""What the grouped statistics do not give (they need every query's value on the driver)."""


def check_grouped(spec: Spec) -> None:
    """Refuse (SpecError naming the key) a spec asking for what the grouped statistics cannot give: a declared
    choice is never replaced by another. What needs every query's value on the driver (segments, a stratified
    bootstrap, guardrails) is named first."""
    u, c = spec.uncertainty, spec.comparison
    beyond = "the per-query rows stay in Spark (more evaluated queries than the driver limit), where"
    d = spec.decision
    for key, declared, what in (
        (STRATIFY.key, u is not None and u.stratify, "no interval is stratified by segment"),
        ("decision.guardrails", d is not None and d.guardrails != Guardrails(), "the guardrails are not checked"),
        ("queries.segments", spec.queries.segments is not None, "no segment's means and comparisons are computed"),
    ):
        if declared:
            raise SpecError(
                key,
                f"is declared, but {beyond} {what} (they need every query's value on the driver): remove it, or "
                f"evaluate within the driver limit.",
            )
    if u is not None and not percentile_interval(u.method):
        raise SpecError(
            INTERVAL_METHOD.key,
            f"is {u.method!r}, but {beyond} the intervals come from a bootstrap "
            f"over groups of queries: only {PERCENTILE!r} is computed there.",
        )
    if c is not None and t_tests(c.test):
        raise SpecError(
            TEST.key,
            f"is {c.test!r}, but {beyond} the paired test is a sign-flip test over "
            f"groups of queries: only {RANDOMIZATION!r} is computed there.",
        )
    if c is not None and c.wins_losses > 0:
        raise SpecError(
            "comparison.wins_losses",
            f"is {c.wins_losses}, but {beyond} the largest wins and losses are not listed: set it to 0.",
        )
    if spec.sensitivity:
        raise SpecError(
            "report.sensitivity",
            f"is true, but {beyond} the sensitivity table is not computed: set it "
            f"to false, or evaluate within the driver limit.",
        )


def evaluate_grouped(
    spec: str | Path | Mapping[str, Any] | Spec,
    *,
    per_query_path: str | Path,
    spark: Any = None,
    qrels: Any = None,
    systems: Mapping[str, Any] | None = None,
    columns: Mapping[str, str] | None = None,
    base_dir: str | Path | None = None,
    progress=None,
    buckets: int | None = None,
    prefilter: bool | None = None,
    groups: int = GROUPS,
    driver_judgments: int | None = None,
) -> EvaluationResult:
    """Evaluate on Spark without bringing the per-query rows to the driver: the per-query table (the columns of
    ``per_query.csv``) is written by Spark as Parquet into ``per_query_path`` (a new folder), and the means,
    intervals and paired tests are computed from per-group sums (:mod:`ndcg_mlflow.statistics.group_sums`: ``groups``
    random groups of queries; percentile intervals by resampling groups, sign-flip tests flipping groups).
    A convenience: the grouped path that :func:`ndcg_mlflow.evaluate` takes with
    ``engine=Spark(spark, buckets=..., prefilter=..., per_query_path=..., groups=..., driver_judgments=...)``
    beyond its ``driver_queries`` (:func:`grouped`), taken here whatever the number of evaluated queries, for
    runs (no model system). The settings are those of :class:`~ndcg_mlflow.engines.Spark` (``spark`` its
    session), checked as it checks them; the other arguments those of :func:`ndcg_mlflow.evaluate`, and the checks
    of the data those of :func:`.driver.evaluate`. Beyond ``driver_judgments`` judgments (default
    :data:`.judgments.DRIVER_JUDGMENTS`; 0: always) the judgments, the evaluated query set and the weights are
    read, checked and kept in Spark (:mod:`.judgments_in_spark`), with the local engine's checks and numbers."""
    engine = SparkSettings(
        spark,
        buckets=buckets,
        prefilter=prefilter,
        per_query_path=per_query_path,
        groups=groups,
        driver_judgments=driver_judgments,
    )
    inputs = Inputs(qrels, systems, columns, base_dir, progress)
    return grouped(engine, resolve_spec(spec, qrels, systems, base_dir), inputs)


def grouped(engine: SparkSettings, spec: Spec, inputs: Inputs) -> EvaluationResult:
    """The grouped path from the start (:func:`evaluate_grouped`), with the settings of ``engine`` (its
    ``per_query_path`` given) and the ``inputs``, ``spec`` resolved with them."""
    assert engine.per_query_path is not None
    qrels, columns = inputs.qrels, inputs.columns
    out_path = grouped_target(engine.per_query_path)
    spark = active_session(engine.session)
    check_grouped(spec)
    with phase("read"):
        judged = (
            judged_in_spark(spark, spec, qrels, columns, engine.prefilter)
            if judgments_beyond(spark, spec, qrels, columns, engine.driver_judgments)
            else judged_on_driver(spark, spec, qrels, columns, engine.prefilter)
        )
    with phase("scoring"):  # within it, each run's read, and the statistics, are their own phases
        return grouped_result(spark, spec, judged, inputs, engine, out_path)


def grouped_target(per_query_path: str | Path) -> Path:
    """The folder the grouped path writes the per-query table into: refused unless new or empty."""
    out_path = Path(per_query_path)
    if out_path.exists() and (not out_path.is_dir() or any(out_path.iterdir())):
        raise SpecError(
            "per_query_path",
            f"{shown_path(out_path)} exists and is not an empty folder; the per-query table is written into a "
            f"new folder.",
        )
    return out_path


def grouped_result(
    spark: Any, spec: Spec, judged: Judged, inputs: Inputs, engine: SparkSettings, out_path: Path
) -> EvaluationResult:
    """:func:`grouped` once the spec is resolved and checked and the judgments are prepared, with the settings of
    ``engine`` (a :class:`~ndcg_mlflow.engines.Spark`) and the ``inputs``. The folder ``out_path`` (new or empty:
    :func:`grouped_target`) is removed again when the evaluation fails: a per-query table of some systems, no
    result refers to, is not left behind."""
    groups = GROUPS if engine.groups is None else engine.groups
    existed = out_path.exists()
    try:
        result = _grouped_into(spark, spec, judged, inputs.systems, out_path, inputs.progress, engine.buckets, groups)
        judged.release()
        return result
    except BaseException:
        judged.release()
        if existed:  # an empty folder the caller made: emptied again
            for child in list(out_path.iterdir()) if out_path.is_dir() else []:
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        else:
            shutil.rmtree(out_path, ignore_errors=True)
        raise


def _grouped_into(
    spark: Any,
    spec: Spec,
    judged: Judged,
    systems: Mapping[str, Any] | None,
    out_path: Path,
    progress,
    buckets: int | None,
    groups: int,
) -> EvaluationResult:
    import pyarrow as pa
    from pyspark.sql import functions as F

    from ...result import relative
    from ...rules import cutoff_label

    metric, qrels_table, files = spec.metric, judged.qrels_table, judged.files
    query_ids, weights = judged.query_ids, judged.weights
    side = judged.spark_side
    if side is not None:  # the judgments, evaluated queries and weights are in Spark
        weights_df, nq, weight_sum, grades = side.weights_df, side.n_queries, side.weight_sum, side.grades
    else:
        assert query_ids is not None and weights is not None and qrels_table is not None
        weights_df = spark.createDataFrame(
            pa.table(
                {
                    "query_id": pa.array(list(query_ids), type=pa.string()),
                    "weight": pa.array(weights, type=pa.float64()),
                    "rw": pa.array(relative(weights), type=pa.float64()),
                }
            )
        )
        nq, weight_sum = len(query_ids), float(weights.sum())
        grades = sorted({float(g) for g in np.unique(qrels_table.value)})
    labels = F.array(*[F.lit(cutoff_label(k)) for k in metric.cutoffs])
    engine_info: dict[str, Any] = {
        "prefilter": judged.prefilter_info(),
        "judgments": judged.where,
        "systems": {},
        "statistics": {"method": "grouped", "groups": groups},
    }
    notes: list[str] = []
    sources = dict(systems) if systems is not None else dict(spec.systems)
    comp = judged.companions
    duplicate_rates = comp is not None and comp.plan.duplicates
    coverages: dict[str, list[float]] = {}
    for name, source in sources.items():
        with phase("read"):  # the run's footers, row count and digest; its rows are read by the scoring job
            job = system_rows(spark, spec, judged, name, source, buckets, progress)
        out_df, label, info = job.out_df, job.label, job.info
        files.append(info)
        out_df = out_df.persist()
        counts = None
        try:
            small = where_kind(out_df, RowKind.QUERY, RowKind.SHOWN, but=True).toArrow()
            meta = check_buckets(name, label, metric, small, unchecked_duplicates(spark, judged, job, small))
            zipped = F.arrays_zip(
                "ndcg",
                "dcg",
                "idcg",
                "idcg_candidates",
                "judged_coverage",
                "status",
                *(["duplicate_rate"] if duplicate_rates else []),
            )
            rows = (
                where_kind(out_df, RowKind.QUERY)
                .join(weights_df, "query_id")
                .select("query_id", "n_returned", "weight", F.posexplode(zipped).alias("_j", "_v"))
            )
            status = F.element_at(F.array(*[F.lit(x) for x in STATUS_NAMES]), F.col("_v.status").cast("int") + 1)
            table = rows.select(
                "query_id",
                F.element_at(labels, F.col("_j") + 1).alias("cutoff"),
                _nan_null("ndcg"),
                F.col("_v.dcg").alias("dcg"),
                F.col("_v.idcg").alias("idcg"),
                F.col("_v.idcg_candidates").alias("idcg_candidates"),
                _nan_null("judged_coverage"),
                "n_returned",
                "weight",
                status.alias("status"),
                *([_nan_null("duplicate_rate")] if duplicate_rates else []),
            )
            # Hive-style folders: readers of the whole folder get the system column from the folder names
            table.write.mode("append").parquet(str(out_path / f"system={_part(name)}"))
            if comp is not None and comp.plan.coverage:
                counts = comps.shown_counts(comp, out_df)
        finally:
            out_df.unpersist()
        run_queries = int(sum(m["value"] or 0 for m in meta))
        unknown = int(sum(m["count"] or 0 for m in meta))
        per = spark.read.parquet(str(out_path / f"system={_part(name)}"))
        _grouped_rules(name, label, metric, per, nq, run_queries, unknown, meta, notes)
        if counts is not None and comp is not None:  # refused as locally, after the system's other checks
            coverages[name] = comps.coverage(comp, counts, name, spec)
        engine_info["systems"][name] = system_info(job, rows_seen(small))

    with phase("statistics"):
        summary_systems, comparisons, decision = _grouped_statistics(
            spark, spec, sources, out_path, weights_df, groups, duplicate_rates, coverages
        )
    notes.append(
        f"statistics from {groups} random groups of queries (the per-query rows stay in Spark): "
        f"percentile intervals from a bootstrap over the groups, sign-flip tests flipping whole groups; "
        f"not computed: {', '.join(GROUPED_NOT_COMPUTED)}"
    )
    comparison = spec.comparison
    family: dict[str, Any] | None = None
    if comparison is not None and comparisons:  # the family of the per-query path, worded by the same words
        family = correction_family(
            comparison,
            len(sources) - 1,
            len(spec.metric.keys),
            0,
            [(c["candidate"], c["key"], None) for c in comparisons],
            [c["p_randomization"] for c in comparisons],
            RANDOMIZATION,
        )
    summary = summary_of(
        spec,
        n_queries=nq,
        weight_sum=weight_sum,
        files=files,
        systems=summary_systems,
        grades=grades,
        comparisons=comparisons,
        family_detail={"correction_family": family} if family is not None else None,
        decision=decision,
        notes=notes,
        engine="spark",
        tail={"engine_info": engine_info, "per_query_path": str(out_path)},
    )
    with phase("read"):
        files_unchanged(files)
    return EvaluationResult(
        spec,
        np.empty(0, dtype=object),
        np.empty(0),
        {},
        files,
        notes,
        engine="spark",
        decision=decision,
        engine_info=engine_info,
        per_query_path=out_path,
        grouped_summary=summary,
    )


def _grouped_statistics(
    spark: Any,
    spec: Spec,
    sources: Mapping[str, Any],
    out_path: Path,
    weights_df: Any,
    groups: int,
    duplicate_rates: bool,
    coverages: dict[str, list[float]],
) -> tuple[dict[str, Any], list[dict[str, Any]], Any]:
    """The grouped path's statistics from the per-query table in ``out_path``: each system's summary by cutoff
    (counts, means, intervals), the paired comparisons against the baseline and the decision."""
    from pyspark.sql import functions as F

    from ...rules import cutoff_key, cutoff_label, cutoff_of_key, cutoff_of_label
    from ...statistics.inference import correct

    metric = spec.metric

    def per_query(name: str) -> Any:
        return spark.read.parquet(str(out_path / f"system={_part(name)}")).join(
            weights_df.select("query_id", "rw"), "query_id"
        )

    summary_systems: dict[str, Any] = {}
    series = []
    for name in sources:
        p = per_query(name)
        counts = (
            p.groupBy("cutoff")
            .agg(
                F.count(F.col("ndcg")).alias("n_evaluated"),
                F.count(F.lit(1)).alias("n"),
                F.count(F.when(F.col("status") == "missing", 1)).alias("n_missing"),
                F.count(F.when(F.col("status") == "empty_ideal", 1)).alias("n_empty_ideal"),
                F.sum(F.when(F.col("ndcg").isNotNull(), F.col("weight"))).alias("weight_sum"),
                F.sum(F.when(F.col("ndcg").isNotNull(), F.col("rw"))).alias("r1"),
                F.sum(F.when(F.col("ndcg").isNotNull(), F.col("rw") * F.col("rw"))).alias("r2"),
                F.avg("judged_coverage").alias("judged_coverage"),
            )
            .collect()
        )
        summary_systems[name] = {}
        for c in counts:
            key = cutoff_key(cutoff_of_label(c["cutoff"]))
            summary_systems[name][key] = {
                "n_evaluated": int(c["n_evaluated"]),
                "n_excluded": int(c["n"] - c["n_evaluated"]),
                "n_missing": int(c["n_missing"]),
                "n_empty_ideal": int(c["n_empty_ideal"]),
                "weight_sum": float(c["weight_sum"] or 0.0),
                "n_eff": float(c["r1"] ** 2 / c["r2"]) if c["r2"] else 0.0,
                "judged_coverage": float("nan") if c["judged_coverage"] is None else float(c["judged_coverage"]),
            }
        series.append(_series(p, f"system\0{name}", F.col("ndcg")))
        if duplicate_rates:  # the weighted mean of the per-query duplicate rates, from the same per-group sums
            series.append(_series(p, f"duplicates\0{name}", F.col("duplicate_rate")))
    comparison = spec.comparison
    if comparison is not None:
        base = per_query(comparison.baseline).select("query_id", "cutoff", F.col("ndcg").alias("b"), "rw")
        for name in sources:
            if name == comparison.baseline:
                continue
            cand = per_query(name).select("query_id", "cutoff", F.col("ndcg").alias("c"))
            both = base.join(cand, ["query_id", "cutoff"])
            series.append(_series(both, f"compare\0{name}", F.col("c") - F.col("b")))
    u = spec.uncertainty
    union = series[0]
    for other in series[1:]:
        union = union.unionByName(other)
    sums = group_sums_spark(union, groups, u.seed if u is not None else 0)
    counts_matrix = group_counts(groups, u.resamples, np.random.default_rng(u.seed)) if u is not None else None
    for name in sources:
        for key, entry in summary_systems[name].items():
            s = sums.get(f"system\0{name}\0{cutoff_label(cutoff_of_key(key))}")
            entry["mean"] = s.mean if s is not None else float("nan")
            if duplicate_rates:
                d = sums.get(f"duplicates\0{name}\0{cutoff_label(cutoff_of_key(key))}")
                entry["duplicate_rate"] = d.mean if d is not None else float("nan")
            if name in coverages:
                entry["catalog_coverage"] = float(coverages[name][list(metric.keys).index(key)])
            if s is not None and u is not None and counts_matrix is not None:
                interval = group_interval(s, counts_matrix, u.confidence)
                entry.update({k: v for k, v in interval.items() if k != "mean"})
    comparisons: list[dict[str, Any]] = []
    paired: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    if u is not None and counts_matrix is not None and comparison is not None:
        flips = np.random.default_rng([u.seed, 1])
        for name in sources:
            if name == comparison.baseline:
                continue
            for k in metric.cutoffs:
                label = cutoff_label(k)
                s = sums.get(f"compare\0{name}\0{label}")
                if s is None:
                    continue
                ci = group_interval(s, counts_matrix, u.confidence)
                paired[(name, cutoff_key(k))] = group_units(s)
                comparisons.append(
                    {
                        "baseline": comparison.baseline,
                        "candidate": name,
                        "key": cutoff_key(k),
                        "cutoff": label,
                        "delta": ci["mean"],
                        "ci_low": ci["ci_low"],
                        "ci_high": ci["ci_high"],
                        "n_paired": int(s.count.sum()),
                        "p_randomization": group_sign_flip(s, u.resamples, flips),
                    }
                )
        if comparisons:
            corrected = correct([c["p_randomization"] for c in comparisons], comparison.correction)
            for c, p in zip(comparisons, corrected):
                c.update(
                    {
                        "p_corrected": float(p),
                        "corrected_test": RANDOMIZATION,
                        "correction": comparison.correction,
                    }
                )
    decision = None
    if spec.decision is not None and u is not None:
        from ...statistics.decision import decide

        decision = decide(
            spec.decision, comparisons, u.confidence, paired, unit=("group of queries", "groups of queries")
        )
    return summary_systems, comparisons, decision


def _nan_null(field: str) -> Any:
    """A per-query number of the buckets' ``_v`` rows as written to the table: NaN (undefined) as null."""
    from pyspark.sql import functions as F

    return F.when(F.isnan(f"_v.{field}"), None).otherwise(F.col(f"_v.{field}")).alias(field)


def _series(rows: Any, key: str, x: Any) -> Any:
    """One series of per-group sums (:func:`group_sums_spark`): its key and cutoff, the queries, their relative
    weights and values ``x``."""
    from pyspark.sql import functions as F

    return rows.select(
        F.concat(F.lit(f"{key}\0"), F.col("cutoff")).alias("key"), "query_id", F.col("rw").alias("weight"), x.alias("x")
    )


def _part(name: str) -> str:
    """A system name as a folder name (``/`` written as ``~``, as the per-system files are)."""
    return name.replace("/", "~")


def _grouped_rules(
    name: str,
    label: str,
    metric: Metric,
    per: Any,
    nq: int,
    run_queries: int,
    unknown: int,
    meta: list[dict[str, Any]],
    notes: list[str],
) -> None:
    """:func:`~ndcg_mlflow.engines.outcome.system_checks` on the per-query table written by Spark."""
    from pyspark.sql import functions as F

    returned = per.where(F.col("n_returned") > 0).select("query_id").distinct().limit(1).count()

    def statuses(status: int) -> tuple[int, Any]:
        bad = per.where(F.col("status") == STATUS_NAMES[status]).select("query_id").distinct()
        n = bad.count()
        return n, [r["query_id"] for r in bad.orderBy("query_id").limit(5).collect()] if n else []

    examples = sorted(x for m in meta for x in (m["examples"] or []))[:3]
    system_checks(name, label, metric, nq, bool(returned), run_queries, unknown, examples, notes, statuses)


def group_sums_spark(rows: Any, groups: int, seed: int) -> dict[str, GroupSums]:
    """Spark: per-group sums of each series of ``rows`` (columns ``key``: the series, ``query_id``, ``weight``
    and ``x``: the value, null where the query is not in the series' mean), as
    :class:`~ndcg_mlflow.statistics.group_sums.GroupSums` by key."""
    from pyspark.sql import functions as F

    g = F.pmod(F.xxhash64(F.col("query_id"), F.lit(seed)), F.lit(groups)).alias("_group")
    valid = F.col("x").isNotNull()
    table = (
        rows.groupBy(F.col("key"), g)
        .agg(
            F.sum(F.when(valid, F.col("weight") * F.col("x"))).alias("v"),
            F.sum(F.when(valid, F.col("weight"))).alias("w"),
            F.count(F.when(valid, F.lit(1))).alias("n"),
        )
        .toArrow()
    )
    keys = np.asarray(table.column("key").to_pylist(), dtype=object)
    at = np.asarray(table.column("_group").to_numpy(zero_copy_only=False), dtype=np.int64)
    cols = {
        c: np.nan_to_num(np.asarray(table.column(c).to_numpy(zero_copy_only=False), dtype=np.float64))
        for c in ("v", "w", "n")
    }
    out: dict[str, GroupSums] = {}
    for key in sorted(set(keys.tolist())):
        sel = keys == key
        arrays = []
        for c in ("v", "w", "n"):
            full = np.zeros(groups)
            np.add.at(full, at[sel], cols[c][sel])
            arrays.append(full)
        out[key] = GroupSums(*arrays)
    return out
