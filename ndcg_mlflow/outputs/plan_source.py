"""The ``plan`` command's source: an evaluation's output folder read back (``summary.json`` and ``per_query.csv``,
each field checked where it is read, a :class:`~ndcg_mlflow.errors.DataError` naming the file and line or field
otherwise), a comparison's paired differences from its per-query table, and the plan's numbers from them
(:func:`plan_evaluation`, the figures of :mod:`ndcg_mlflow.statistics.planning`; printed by
:func:`~ndcg_mlflow.render.command_text.format_plan`)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import JSON_ERRORS, DataError, NdcgError, did_you_mean
from ..readers.small import MIN_WEIGHT_RATIO
from ..render.format import exact
from ..rules import KEY_FORMS, cutoff_key, key_label, key_of_text
from ..statistics import inference as stats
from ..statistics.planning import RULES, decision_plan, mde, plan_bounds, queries_needed, query_sd


def read_evaluation(folder: Path) -> tuple[dict[str, Any], Any]:
    """An evaluation's ``summary.json`` and ``per_query.csv`` (a DataFrame: system, query_id, cutoff, ndcg, weight,
    ...), as ``ndcg-mlflow run`` writes them; a :class:`DataError` naming the file (and line) otherwise."""
    import pandas as pd

    path = folder / "summary.json"
    if not folder.is_dir():
        raise DataError(folder, "not a folder: give the output folder of an evaluation (ndcg-mlflow run writes it).")
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(
            path, "not found: give the output folder of an evaluation (ndcg-mlflow run writes it)."
        ) from None
    except JSON_ERRORS as exc:
        raise DataError(path, f"cannot be read as JSON: {exc}.") from None
    if not isinstance(summary, dict):
        raise DataError(path, "expected a JSON object (the summary of an evaluation).")
    if summary.get("judge") is not None:
        raise DataError(
            path,
            "is an evaluation with a judge: its per-query nDCG are the judge's and its intervals combine them with "
            "the human judgments of a subset of queries, which plan's queries do not model; the human labels its "
            "decision needs are in summary.json's judge comparisons (labelled_needed).",
        )
    table = folder / "per_query.csv"
    if not table.is_file():
        where = summary.get("per_query_path")
        stayed = f" (its per-query rows stayed in Spark, in {where})" if isinstance(where, str) else ""
        raise DataError(
            table,
            f"not found{stayed}: plan reads the per-query table of an evaluation; give an output folder of "
            f"'ndcg-mlflow run' that holds per_query.csv.",
        )
    try:
        frame = pd.read_csv(
            table, dtype={"query_id": str, "system": str, "cutoff": str}, keep_default_na=False, na_values=[""]
        )
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(table, f"cannot be read as CSV: {str(exc).splitlines()[0] if str(exc) else exc}.") from None
    missing = [c for c in ("system", "query_id", "cutoff", "ndcg", "weight") if c not in frame.columns]
    if missing:
        raise DataError(table, f"expected the columns system, query_id, cutoff, ndcg and weight; {missing} missing.")
    for column in ("ndcg", "weight"):
        values = pd.to_numeric(frame[column], errors="coerce")
        if column == "ndcg":
            bad = (values.isna() & frame[column].notna()) | ~((values >= 0) & (values <= 1)) & values.notna()
        else:
            bad = ~(np.isfinite(values) & (values > 0))
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            expected = "an nDCG in [0, 1] or an empty field" if column == "ndcg" else "a finite positive weight"
            value = frame[column].iloc[row]
            shown = repr(value) if isinstance(value, str) else str(value)
            raise DataError(table, f"column {column}: expected {expected}, found {shown}.", row + 2)
        frame[column] = values.astype(np.float64)
    first = frame.groupby("query_id", sort=False)["weight"].transform("first")
    other = (frame["weight"] != first).to_numpy()
    if other.any():  # a query has one weight, on every system's and cutoff's row
        row = int(np.flatnonzero(other)[0])
        query = frame["query_id"].iloc[row]
        raise DataError(
            table,
            f"column weight: query {query!r} has the weight {exact(frame['weight'].iloc[row])} here and "
            f"{exact(first.iloc[row])} on an earlier row; a query has one weight.",
            row + 2,
        )
    if len(frame):  # (the ratios the statistics take, as the weights file's reader requires them)
        weights = frame["weight"].to_numpy()
        top = int(np.argmax(weights))
        low = int(np.argmin(weights))
        if weights[low] / weights[top] < MIN_WEIGHT_RATIO:
            raise DataError(
                table,
                f"column weight: query {frame['query_id'].iloc[low]!r} has the weight {exact(weights[low])}, "
                f"{weights[low] / weights[top]:.3g} times the largest ({exact(weights[top])}, query "
                f"{frame['query_id'].iloc[top]!r} at line {top + 2}): ratios below {MIN_WEIGHT_RATIO:.3g} cannot be "
                f"represented in a weighted mean (an evaluation never writes them).",
                low + 2,
            )
    return summary, frame


_ABSENT = object()  # a field that summary.json does not have


def _shown(value: Any) -> str:
    """A value of ``summary.json`` as a message shows it: a string quoted, anything else as JSON writes it."""
    if value is _ABSENT:
        return "no such field"
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:57]) + "..."
    text = json.dumps(value, allow_nan=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _number(value: Any) -> bool:
    """A finite JSON number that is a double (not a boolean, which Python counts as an int, nor an integer beyond
    the largest double)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


class _Summary:
    """The fields of an evaluation's ``summary.json`` that ``plan`` reads, each checked where it is read: a
    :class:`DataError` naming the file and the field's path (``decision.margin``, ``comparisons[2].key``), what was
    expected and what was found. Fields ``plan`` does not read are not looked at."""

    def __init__(self, summary: dict[str, Any], path: Path, frame: Any) -> None:
        self.summary = summary
        self.path = path
        self.systems = set(frame["system"].dropna().astype(str))
        self.cutoffs = set(frame["cutoff"].dropna().astype(str))

    def error(self, field: str, expected: str, value: Any) -> DataError:
        return DataError(self.path, f"field {field}: expected {expected}, found {_shown(value)}.")

    def name(self) -> str:
        value = self.summary.get("name", "")
        if not isinstance(value, str):
            raise self.error("name", "the evaluation's name (a string)", value)
        return value

    def models(self) -> dict[str, Any]:
        value = self.summary.get("models")
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error("models", "an object of model systems", value)
        for system, record in value.items():
            if record is not None and not isinstance(record, dict):
                raise self.error(f"models.{system}", "an object (the model the system evaluated)", record)
        return value

    def comparisons(self) -> list[dict[str, Any]]:
        value = self.summary.get("comparisons")
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error("comparisons", "a list of comparisons", value)
        for i, c in enumerate(value):
            where = f"comparisons[{i}]"
            if not isinstance(c, dict):
                raise self.error(where, "an object (a candidate against the baseline at one key)", c)
            for field in ("baseline", "candidate"):
                name = c.get(field, _ABSENT)
                if not (isinstance(name, str) and name in self.systems):
                    raise self.error(f"{where}.{field}", "a system of per_query.csv", name)
            key = c.get("key", _ABSENT)
            if not isinstance(key, str) or not _is_key(key):
                raise self.error(f"{where}.key", f"an nDCG key such as {cutoff_key(10)}", key)
            if key_label(key) not in self.cutoffs:
                raise self.error(f"{where}.key", "the key of a cutoff of per_query.csv", key)
        return value

    def confidence(self) -> float | None:
        """The evaluation's confidence; None when it records none (``spec`` without ``uncertainty.confidence``)."""
        spec = self.summary.get("spec")
        if spec is None:
            return None
        if not isinstance(spec, dict):
            raise self.error("spec", "an object (the evaluation's resolved spec)", spec)
        if "uncertainty.confidence" not in spec:
            return None
        value = spec["uncertainty.confidence"]
        if not (_number(value) and 0 < value < 1):
            raise self.error("spec.uncertainty.confidence", "a level strictly between 0 and 1", value)
        return float(value)

    def decision(self, keys: list[str]) -> dict[str, Any] | None:
        value = self.summary.get("decision")
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.error("decision", "an object (the declared decision) or null", value)
        key = value.get("key", _ABSENT)
        if not isinstance(key, str) or key not in keys:
            raise self.error("decision.key", f"one of the compared keys ({', '.join(keys)})", key)
        rule = value.get("rule", _ABSENT)
        if not isinstance(rule, str) or rule not in RULES:
            raise self.error("decision.rule", " or ".join(RULES), rule)
        margin = value.get("margin", _ABSENT)
        if not (_number(margin) and margin >= 0):
            raise self.error("decision.margin", "a finite number at or above 0", margin)
        return value


def _is_key(text: str) -> bool:
    try:
        key_label(text)
    except ValueError:
        return False
    return True


def paired(frame: Any, baseline: str, candidate: str, key: str, source: Path | None = None) -> tuple[np.ndarray, ...]:
    """The paired differences candidate - baseline at ``key`` on the queries valid for both (an nDCG in each), in
    the baseline's order, and their weights over the largest weight of the table (as the analysis takes them); a
    table without a ``weight`` column (the per-query rows a figure is drawn from may have none) weighs every query
    1. ``plan`` and the report's figure of the per-query differences read them here."""
    label = key_label(key)
    weighted = "weight" in frame.columns
    rows = []
    for system in (baseline, candidate):
        part = frame[(frame["system"] == system) & (frame["cutoff"] == label)]
        if part.empty:
            raise DataError(source or "per_query.csv", f"no row of system '{system}' at cutoff {label}.")
        if part["query_id"].duplicated().any():
            query = part["query_id"][part["query_id"].duplicated()].iloc[0]
            raise DataError(source or "per_query.csv", f"query '{query}' of system '{system}' twice at cutoff {label}.")
        rows.append(part[["query_id", "ndcg", *(["weight"] if weighted else [])]])
    both = rows[0].merge(rows[1], on="query_id", suffixes=("_b", "_c"))  # (the baseline's order)
    both = both[both["ndcg_b"].notna() & both["ndcg_c"].notna()]
    d = both["ndcg_c"].to_numpy(np.float64) - both["ndcg_b"].to_numpy(np.float64)
    if not weighted:
        return d, np.ones(d.size)
    w = both["weight_b"].to_numpy(np.float64) / float(frame["weight"].max())
    return d, w


def _key_of(text: str, keys: list[str]) -> str:
    """A key as given to ``--key``: ``ndcg_at_10``, ``10``, ``all`` or ``nDCG@10``."""
    key = key_of_text(text, keys)
    if key is not None:
        return key
    raise NdcgError(
        f"--key {text!r}: the evaluation compared {', '.join(keys)} ({KEY_FORMS})" + did_you_mean(text, keys) + "."
    )


def plan_evaluation(
    folder: Path,
    *,
    margin: float,
    power: float = 0.8,
    confidence: float | None = None,
    key: str | None = None,
    shown: str | None = None,
) -> dict[str, Any]:
    """The ``plan`` command's numbers for an evaluation's output folder: for each candidate against the baseline
    and each compared key (or ``key``), on the queries valid for both: n, n_eff, the weighted mean difference,
    sigma (:func:`query_sd`), :func:`mde` at ``power`` and :func:`queries_needed` at ``distance = margin``.
    ``confidence``: the evaluation's (``summary.json``) unless given. ``shown``: how to name the source."""
    summary, frame = read_evaluation(folder)
    fields = _Summary(summary, folder / "summary.json", frame)
    comparisons = fields.comparisons()
    if not comparisons:
        raise NdcgError(
            f"{shown or folder}: the evaluation compared no candidate with a baseline (its spec declares no "
            f"'comparison' section, or one system only): plan needs a baseline and a candidate."
        )
    if confidence is None:
        confidence = fields.confidence()
        if confidence is None:
            raise NdcgError(f"{shown or folder}: the evaluation records no confidence; give --confidence.")
    keys = list(dict.fromkeys(c["key"] for c in comparisons))
    chosen = [_key_of(key, keys)] if key is not None else keys
    rows = []
    for c in comparisons:
        if c["key"] not in chosen:
            continue
        d, w = paired(frame, c["baseline"], c["candidate"], c["key"], folder / "per_query.csv")
        fit = stats.weighted_t(d, w) if d.size else (float("nan"),) * 3
        sd = query_sd(d, w, fit=fit)
        rows.append(
            {
                "candidate": c["candidate"],
                "baseline": c["baseline"],
                "key": c["key"],
                "n_paired": int(d.size),
                "n_eff": stats.effective_n(w),
                "delta": float(stats.weighted_mean(d, w)) if d.size else float("nan"),
                "sd": sd,
                "mde": mde(d, w, confidence, power, fit=fit),
                "queries_needed": queries_needed(d, w, confidence, power, distance=margin, fit=fit),
                **plan_bounds(w, sd, fit[2] if d.size >= 2 else float("nan")),
            }
        )
    decision = fields.decision(keys)
    declared = []
    if decision is not None:
        for c in comparisons:
            if c["key"] == decision["key"]:
                d, w = paired(frame, c["baseline"], c["candidate"], c["key"], folder / "per_query.csv")
                entry = decision_plan(d, w, confidence, power, decision["rule"], float(decision["margin"]))
                declared.append({"candidate": c["candidate"], **entry})
    return {
        "name": fields.name(),
        "source": shown or str(folder),
        "baseline": comparisons[0]["baseline"],
        "confidence": float(confidence),
        "power": power,
        "margin": margin,
        "rows": rows,
        "decision": {**decision, "candidates": declared} if declared and decision is not None else None,
        "models": fields.models(),
    }
