"""What an evaluation produced: each system's per-query rows and means, the files read, the statistics; no MLflow.

:class:`EvaluationResult` is what every engine returns and what the output folder, the report, the terminal and
MLflow read. Its read-only views are attributes (``summary``, ``per_query``, ``means``, ``comparisons``,
``summary_json`` ...); what takes an argument is a method (``mean(system, cutoff)``, ``per_query_wide(cutoff)``).
In its tables, the ``cutoff`` column holds the cutoffs as the spec writes them, ``5``, ``10`` and ``"all"``: an
ordered categorical (:func:`cutoff_dtype`) that compares equal to those values and sorts in cutoff order, ``all``
last; it is written to CSV as before (``5``, ``10``, ``all``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import EvaluationError, did_you_mean, preview
from .kernel import STATUS_NAMES, QueryResult
from .queries import TopLists
from .render import notebook
from .rules import cutoff_key, cutoff_of_label, headline_key, key_label
from .spec import Spec, outside_paths
from .uris import redact, safe_uri
from .version import __version__

PER_QUERY_COLUMNS = (  # (then segment after weight, with queries.segments; duplicate_rate last, with duplicates)
    "system",
    "query_id",
    "cutoff",
    "ndcg",
    "dcg",
    "idcg",
    "idcg_candidates",
    "judged_coverage",
    "n_returned",
    "weight",
    "status",
)


@dataclass
class FileInfo:
    role: str  # "qrels", "system:<name>", "queries.set", "queries.weights", "queries.segments", "companions.*"
    path: str
    declared: str
    sha256: str
    rows: int


def _num(x: float) -> float | int:
    x = float(x)
    return int(x) if x.is_integer() else x


def cutoff_dtype(cutoffs: Sequence[int | None]):
    """The type of a table's ``cutoff`` column: an ordered categorical of the evaluated cutoffs (``None`` standing
    for ``"all"``), ints in increasing order and ``"all"`` last, so that ``table.cutoff == 10`` selects nDCG@10's
    rows and sorting follows the cutoffs."""
    import pandas as pd

    finite = sorted(k for k in cutoffs if k is not None)
    return pd.CategoricalDtype([*finite, *(["all"] if None in cutoffs else [])], ordered=True)


def cutoff_column(labels: Iterable[str], cutoffs: Sequence[int | None]):
    """Cutoff labels (``"10"``, ``"all"``, as ``summary.json`` writes them) as a ``cutoff`` column
    (:func:`cutoff_dtype`)."""
    import pandas as pd

    values = [label if label == "all" else cutoff_of_label(label) for label in labels]
    return pd.Categorical(values, dtype=cutoff_dtype(cutoffs))


@dataclass(repr=False)
class SystemResult:
    name: str
    result: QueryResult
    means: dict[str, dict[str, Any]]
    top: TopLists | None = None
    duplicate_rate: np.ndarray | None = None  # (n_queries, n_cutoffs), with companions.duplicates

    def __repr__(self) -> str:
        return notebook.system_repr(self)


@dataclass(repr=False)
class EvaluationResult:
    """Everything one evaluation produced; no MLflow involved.

    ``per_query`` is the long table (one row per system, query and cutoff);
    ``summary`` the JSON-ready summary (means and counts per system and key).

    Beyond the Spark engine's driver limit the per-query rows stay in Spark: ``per_query_path`` is then the Parquet
    table Spark wrote them to (partitioned by system), ``summary`` holds the means, intervals and comparisons
    computed from per-group sums, and ``systems`` is empty (no per-query arrays on the driver).
    """

    spec: Spec
    query_ids: np.ndarray
    weights: np.ndarray
    systems: dict[str, SystemResult]
    files: list[FileInfo]
    notes: list[str] = field(default_factory=list)  # the engine's notes; with the statistics': all_notes
    segments: np.ndarray | None = None  # each query's segment label (str), aligned with query_ids; queries.segments
    analysis: Any = None  # analysis.Analysis: intervals, comparisons, wins and losses
    sensitivity: Any = None  # pandas DataFrame, when the spec asks for it (report.sensitivity)
    prepared: dict = field(default_factory=dict)  # system -> PreparedRun, with keep_data
    catalog: Any = None
    grades: list = field(default_factory=list)  # the distinct grades of the qrels
    engine: str = "local"  # what computed the per-query numbers: "local" or "spark" (the same numbers)
    models: dict = field(default_factory=dict)  # system -> what its model URI resolved to (models.ResolvedModel)
    scored: dict = field(default_factory=dict)  # system -> the Parquet file of its model's scored rows
    decision: dict[str, Any] | None = None  # decision.decide: its numbers, worded in summary
    engine_info: dict = field(default_factory=dict)  # how the engine computed them (Spark: pre-filter, buckets)
    # the sensitivity alternatives the engine could not compute: rule, alternative, the systems lacking it
    sensitivity_left_out: list = field(default_factory=list)
    per_query_path: Path | None = None  # the per-query rows' Parquet table, when they stayed in Spark
    # with a judge (the spec's judge section, ndcg_mlflow.engines.with_judge): summary.json's "judge", and each
    # system's per-query values under the human judgments (NaN outside the labelled queries); the per-query
    # values of ``systems`` are then the judge's
    judged: dict[str, Any] | None = None
    human_ndcg: dict[str, np.ndarray] = field(default_factory=dict)
    grouped_summary: dict[str, Any] | None = None  # then: the summary, computed from per-group sums
    _per_query: Any = None

    @property
    def all_notes(self) -> list[str]:
        """The notes in words, as ``summary.json`` and the terminal show them: the engine's (:attr:`notes`), then
        what the statistics found (:func:`ndcg_mlflow.render.words.statistics_notes`)."""
        from .render.words import statistics_notes

        return [*self.notes, *statistics_notes(self)]

    @property
    def relative_weights(self) -> np.ndarray:
        """The weights over the largest one (same ratios, so the same means): what every computation uses,
        so that weights of any magnitude neither overflow nor underflow. ``weights`` are as given."""
        return relative(self.weights)

    def __repr__(self) -> str:
        return notebook.result_repr(self)

    def _repr_html_(self) -> str:
        return notebook.result_html(self)

    @property
    def system_names(self) -> list[str]:
        """The evaluated systems, in the spec's order."""
        return list(self.grouped_summary["systems"] if self.grouped_summary is not None else self.systems)

    @property
    def per_query(self):
        """The per-query table (the columns of ``per_query.csv``): one row per system, query and cutoff; with
        ``queries.segments``, a ``segment`` column after ``weight``."""
        self._check_per_query_here()
        if self._per_query is None:
            self._per_query = self._build_per_query()
        return self._per_query

    def _check_per_query_here(self) -> None:
        if self.per_query_path is not None:
            raise EvaluationError(
                f"the per-query rows of this evaluation stayed in Spark (more evaluated queries than the driver's "
                f"limit): they are the Parquet table {self.per_query_path}, partitioned by system (read it with "
                f"spark.read.parquet, or a part of it with pandas.read_parquet)."
            )

    def _key_of(self, system: str | None, cutoff: int | str | None, *, system_needed: bool = False) -> str:
        """The metric key (``ndcg_at_10``) of an evaluated cutoff (``10``, ``"10"``, ``"all"`` or None for all),
        checking that ``system`` and the cutoff were evaluated: else an
        :class:`~ndcg_mlflow.errors.EvaluationError` naming what was. ``system`` None is no system to check, unless
        ``system_needed`` (the accessor reads one system's figures: None is then an evaluated system's name
        missing)."""
        keys = self.spec.metric.keys
        try:
            if isinstance(cutoff, str):
                key = cutoff_key(cutoff_of_label(cutoff))
            elif cutoff is None:
                key = cutoff_key(None)
            elif isinstance(cutoff, bool):  # (True == 1, but no cutoff)
                key = ""
            else:
                k = int(cutoff)
                key = cutoff_key(k) if k == cutoff else ""
        except (TypeError, ValueError, OverflowError):
            key = ""  # (no cutoff)
        names = self.system_names
        wrong = []
        if system is None and system_needed:
            wrong.append("no system was given (the first argument names one)")
        elif system is not None and (not isinstance(system, str) or system not in names):
            wrong.append(f"system {system!r} was not evaluated{did_you_mean(str(system), names)}")
        if key not in keys:
            wrong.append(f"cutoff {cutoff!r} was not evaluated")
        if wrong:
            raise EvaluationError(
                f"{' and '.join(wrong)}: this evaluation has the systems {preview(names, limit=20)} and the "
                f"cutoffs {', '.join(key_label(k) for k in keys)}."
            )
        return key

    def mean(self, system: str, cutoff: int | str | None) -> float:
        """The weighted mean nDCG of ``system`` at ``cutoff`` (``10``, ``"10"``, ``"all"`` or None for all)."""
        key = self._key_of(system, cutoff, system_needed=True)
        if self.grouped_summary is not None:
            return self.grouped_summary["systems"][system][key]["mean"]
        return self.systems[system].means[key]["mean"]

    @property
    def means(self):
        """The means with their intervals as a DataFrame: one row per system and cutoff, with ``summary.json``'s
        names (``system, key, cutoff, mean, ci_low, ci_high``, then the rest of ``summary["systems"]``'s entries:
        ``n_evaluated``, ``n_eff``, ``std_error`` ...; the intervals are missing without an ``uncertainty``
        section)."""
        import pandas as pd

        systems = self.grouped_summary["systems"] if self.grouped_summary is not None else self._system_summary()
        rows = [
            {"system": name, "key": key, "cutoff": key_label(key), **entry}
            for name, entries in systems.items()
            for key, entry in entries.items()
        ]
        lead = ["system", "key", "cutoff", "mean", "ci_low", "ci_high"]
        frame = pd.DataFrame(rows)
        frame = frame.reindex(columns=lead + [c for c in frame.columns if c not in lead])
        frame["cutoff"] = cutoff_column(frame["cutoff"], self.spec.metric.cutoffs)
        return frame

    def per_query_wide(self, cutoff: int | str | None = "headline"):
        """The per-query nDCG at one cutoff as a DataFrame: one row per query (index ``query_id``, the
        evaluation's order), one column per system (the spec's order); ``cutoff`` as in :meth:`mean`, by default
        the headline cutoff (10 when evaluated, else the first). The same numbers as ``per_query``'s rows."""
        import pandas as pd

        self._check_per_query_here()
        key = headline_key(self.spec.metric.keys) if cutoff == "headline" else self._key_of(None, cutoff)
        j = self.spec.metric.keys.index(key)
        frame = pd.DataFrame(
            {name: sr.result.ndcg[:, j] for name, sr in self.systems.items()},
            index=pd.Index(self.query_ids, name="query_id"),
        )
        frame.columns.name = "system"
        return frame

    @property
    def summary(self) -> dict[str, Any]:
        if self.grouped_summary is not None:
            return self.grouped_summary
        spec = self.spec
        return summary_of(
            spec,
            n_queries=int(len(self.query_ids)),
            weight_sum=float(self.weights.sum()),
            files=self.files,
            systems=self._system_summary(),
            grades=list(self.grades),
            comparisons=list(self.analysis.comparisons) if self.analysis else [],
            family_detail=self._family_detail(),
            decision=self.decision,
            notes=self.all_notes,
            engine=self.engine,
            tail={
                **({"models": {name: m.record() for name, m in self.models.items()}} if self.models else {}),
                "engine_info": self.engine_info,
                **({"judge": self.judged} if self.judged is not None else {}),
            },
        )

    def _family_detail(self) -> dict[str, Any]:
        a = self.analysis
        if a is None or a.correction_family is None:
            return {}
        out: dict[str, Any] = {"correction_family": a.correction_family}
        if self.segments is not None:
            out["segments"] = a.segments
            out["segment_comparisons"] = a.segment_comparisons
            out["segment_consistency"] = a.consistency
        return out

    def _system_summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
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
        """The comparisons against the baseline as a DataFrame, one row per candidate and cutoff, with
        ``summary.json``'s names (``baseline, candidate, key, cutoff, n_paired, ... delta, ci_low, ci_high ...
        wins, ties, losses, p_corrected``: the columns of ``comparisons.csv``); empty without a comparison
        section."""
        import pandas as pd

        if self.grouped_summary is not None:
            frame = pd.DataFrame(flat_rows(self.grouped_summary["comparisons"]))
        else:
            from .render.words import comparisons_record

            frame = pd.DataFrame(flat_rows(comparisons_record(self.analysis.comparisons if self.analysis else [])))
        if "cutoff" in frame.columns:
            frame["cutoff"] = cutoff_column(frame["cutoff"], self.spec.metric.cutoffs)
        return frame

    @property
    def segment_means(self):
        """The per-segment means with their intervals as a DataFrame (``segments.csv``): one row per segment,
        system and cutoff (``segment, system, key, cutoff, mean, ci_low, ci_high, std_error, n, n_eff``); empty
        without declared segments."""
        import pandas as pd

        rows = [
            {"segment": seg, "system": name, "key": key, "cutoff": key_label(key), **entry}
            for seg, systems in (self.analysis.segments if self.analysis else {}).items()
            for name, entries in systems.items()
            for key, entry in entries.items()
        ]
        frame = pd.DataFrame(rows)
        if "cutoff" in frame.columns:
            frame["cutoff"] = cutoff_column(frame["cutoff"], self.spec.metric.cutoffs)
        return frame

    @property
    def segment_comparisons(self):
        """Each candidate's comparison with the baseline per segment as a DataFrame (``segment_comparisons.csv``:
        ``comparisons``' columns after ``segment``); empty without declared segments."""
        import pandas as pd

        from .render.words import comparisons_record

        frame = pd.DataFrame(flat_rows(comparisons_record(self.analysis.segment_comparisons if self.analysis else [])))
        if "cutoff" in frame.columns:
            frame["cutoff"] = cutoff_column(frame["cutoff"], self.spec.metric.cutoffs)
        return frame

    @property
    def wins_losses_json(self) -> str:
        """``wins_losses.json``'s text."""
        data = {
            "baseline": self.spec.comparison.baseline if self.spec.comparison else None,
            "comparisons": self.analysis.wins_losses if self.analysis else [],
        }
        return json.dumps(_json_safe(data), indent=2, ensure_ascii=False, allow_nan=False) + "\n"

    @property
    def summary_json(self) -> str:
        """``summary.json``'s text."""
        return json.dumps(_json_safe(self.summary), indent=2, allow_nan=False) + "\n"

    def _build_per_query(self):
        import pandas as pd

        frames = []
        cutoffs = self.spec.metric.cutoffs
        dtype = cutoff_dtype(cutoffs)
        codes = np.asarray([dtype.categories.get_loc("all" if k is None else k) for k in cutoffs], dtype=np.int64)
        nq, nc = len(self.query_ids), len(cutoffs)
        for name, sr in self.systems.items():
            r = sr.result
            frames.append(
                pd.DataFrame(
                    {
                        "system": np.repeat(np.asarray([name], dtype=object), nq * nc),
                        "query_id": np.repeat(self.query_ids, nc),
                        "cutoff": pd.Categorical.from_codes(np.tile(codes, nq), dtype=dtype),
                        "ndcg": r.ndcg.ravel(),
                        **({} if self.judged is None else {"ndcg_human": self.human_ndcg[name].ravel()}),
                        "dcg": r.dcg.ravel(),
                        "idcg": r.idcg.ravel(),
                        "idcg_candidates": r.idcg_candidates.ravel(),
                        "judged_coverage": r.judged_coverage.ravel(),
                        "n_returned": np.repeat(r.n_returned, nc),
                        "weight": np.repeat(self.weights, nc),
                        **({} if self.segments is None else {"segment": np.repeat(self.segments, nc)}),
                        "status": np.asarray(STATUS_NAMES, dtype=object)[r.status.ravel()],
                    }
                )
            )
            if sr.duplicate_rate is not None:
                frames[-1]["duplicate_rate"] = sr.duplicate_rate.ravel()
        return pd.concat(frames, ignore_index=True)


def summary_of(
    spec: Spec,
    *,
    n_queries: int,
    weight_sum: float,
    files: list[FileInfo],
    systems: dict[str, Any],
    grades: list,
    comparisons: list,
    decision: dict[str, Any] | None,
    notes: list[str],
    engine: str,
    tail: dict[str, Any],
    family_detail: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``summary.json``'s content, whatever computed its numbers (``tail``: the entries that follow ``engine``;
    ``family_detail``: the correction's family and, with segments, the per-segment tables, after
    ``comparison_family``, the family's statement), the statistics' reasons and the family in words
    (:mod:`ndcg_mlflow.render.words`)."""
    from .render.words import comparisons_record, consistency_record, decision_record, family_record

    family_detail = dict(family_detail or {})
    family = ""
    if family_detail.get("correction_family") is not None:
        family_detail["correction_family"] = family_record(family_detail["correction_family"])
        family = family_detail["correction_family"]["statement"]
    if "segment_comparisons" in family_detail:
        family_detail["segment_comparisons"] = comparisons_record(family_detail["segment_comparisons"])
    if "segment_consistency" in family_detail:
        family_detail["segment_consistency"] = consistency_record(family_detail["segment_consistency"])
    return {
        "name": spec.name,
        "spec_sha256": spec.sha256,
        "definition_sha256": spec.definition_digest(),
        "ndcg_mlflow_version": __version__,
        "spec": spec.resolved(),
        "n_queries": n_queries,
        "weight_sum": weight_sum,
        "files": {f.role: {"path": f.declared, "sha256": f.sha256, "rows": f.rows} for f in files},
        "systems": systems,
        "grades": grades,
        # the tracking URI without credentials (ndcg_mlflow.uris.redact): never recorded
        "mlflow": {
            "experiment": spec.mlflow.experiment,
            "tracking_uri": safe_uri(spec.mlflow.tracking_uri),
            "run_name": spec.mlflow.run_name,
            "tags": dict(spec.mlflow.tags),
            "timeout": spec.mlflow.timeout,
            "max_retries": spec.mlflow.max_retries,
            "total_timeout": spec.mlflow.total_timeout,
        },
        "paths_outside_spec_folder": outside_paths(spec),
        "comparisons": comparisons_record(comparisons),
        "comparison_family": family,
        **family_detail,
        "decision": decision_record(decision, spec.decision),
        "notes": notes,
        "engine": engine,
        **tail,
    }


def flat_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Comparison rows with their nested entries as columns, for CSV and DataFrames: ``urisk`` -> ``urisk_<alpha>``,
    ``trisk`` -> ``trisk_<alpha>`` and ``trisk_p_<alpha>``, ``regressed_share`` -> ``regressed_share`` (the share),
    ``regressed_share_ci_low``, ``regressed_share_ci_high`` and ``regressed_delta``."""
    out = []
    for row in rows:
        flat: dict[str, Any] = {}
        for k, v in row.items():
            if k == "urisk":
                flat.update({f"urisk_{a}": x for a, x in v.items()})
            elif k == "trisk":
                for a, t in v.items():
                    flat[f"trisk_{a}"], flat[f"trisk_p_{a}"] = t["value"], t["p"]
            elif k == "regressed_share":
                flat.update(
                    {
                        "regressed_share": v["share"],
                        "regressed_share_ci_low": v["ci_low"],
                        "regressed_share_ci_high": v["ci_high"],
                        "regressed_delta": v["delta"],
                    }
                )
            else:
                flat[k] = v
        out.append(flat)
    return out


def json_safe(obj: Any) -> Any:
    """``obj`` with non-finite floats as None, numpy scalars as Python numbers and every string without
    credentials (:func:`ndcg_mlflow.uris.redact`: a tag value, a data path, a model source ...), for
    ``summary.json``."""
    return _json_safe(obj)


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return None if not math.isfinite(obj) else float(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def relative(weights: np.ndarray) -> np.ndarray:
    """Weights over the largest one: the ratios (all a weighted mean depends on) without overflow or underflow
    (:func:`~ndcg_mlflow.readers.read_weights` refuses ratios that are not normal doubles)."""
    return weights / weights.max() if weights.size else weights
