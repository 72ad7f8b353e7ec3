"""The tables of an output folder as MLflow tables (what the MLflow UI shows as tables): read from the folder's
CSV files and written as ``log_table`` writes them, the JSON of equal files made once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from .names import figure_rows

# the columns of comparisons_table.json a reviewer reads first (the MLflow UI shows a table's first columns without
# scrolling); the others follow as comparisons.csv has them
COMPARISON_COLUMNS = (
    "candidate",
    "baseline",
    "key",
    "delta",
    "ci_low",
    "ci_high",
    "p_corrected",
    "wins",
    "ties",
    "losses",
)
_KEY = "ndcg_mlflow.table_key"  # a table's frame.attrs entry: (sha256 of its CSV's bytes, filter column, system)
_TEXTS: dict[Any, str] = {}  # the last few tables' JSON by the content of the CSV file they were read from
_TEXTS_LOCK = threading.Lock()  # (evaluations may be logged from several threads at once)


def table_text(frame: Any) -> str:
    """:func:`table_json` of a table, the JSON of a table read from the same bytes (:func:`folder_tables`: one
    system's rows are the evaluation's, logged to both runs) made once; ``frame`` may be that JSON already
    (:func:`folder_tables` found it made)."""
    if isinstance(frame, str):
        return frame
    key = frame.attrs.get(_KEY)
    if key is None:
        return table_json(frame)
    with _TEXTS_LOCK:
        text = _TEXTS.get(key)
    if text is None:
        text = table_json(frame)
        with _TEXTS_LOCK:
            while len(_TEXTS) >= 4:
                _TEXTS.pop(next(iter(_TEXTS)))
            _TEXTS[key] = text
    return text


def table_json(frame: Any) -> str:
    """A DataFrame as an MLflow table's JSON (pandas' ``orient="split"`` without the index: ``{"columns": [...],
    "data": [[...], ...]}``), written column by column: a missing value (NaN, None, NA) and an infinity are
    null, as pandas writes them; a number is written in full (pandas' writer rounds to 10 decimal places)."""
    import json
    import math

    import numpy as np
    import pandas as pd

    na, nat, isfinite = pd.NA, pd.NaT, math.isfinite
    columns = []
    for name in frame.columns:
        column = frame[name]
        kind = column.dtype.kind
        array = column.to_numpy(dtype=None if kind in "fiub" else object)
        values = array.tolist()
        if kind == "f":
            if not np.isfinite(array).all():  # (a column without NaN or infinity is written as it is)
                values = [v if isfinite(v) else None for v in values]
        elif kind not in "iub" and not (isinstance(column.dtype, pd.StringDtype) and not column.isna().any()):
            values = [
                None if v is None or v is na or v is nat or (isinstance(v, float) and not isfinite(v)) else v
                for v in values
            ]
        columns.append(values)
    return json.dumps(
        {"columns": [str(c) for c in frame.columns], "data": [list(row) for row in zip(*columns)]},
        allow_nan=False,
        default=str,
    )


def folder_tables(out_dir: Path, summary: dict | None, system: str | None = None) -> list[tuple[str, Any]]:
    """The tables as MLflow tables (shown by the MLflow UI), each as (name, DataFrame), or (name, its JSON) when
    the JSON of a table read from the same bytes with the same filter was made before: the per-query rows
    (``per_query_table.json``), every figure of ``summary.json`` (``figures_table.json``), the comparisons
    (``comparisons_table.json``, its columns in the order of :data:`COMPARISON_COLUMNS`, then the others), the
    sensitivity table and, with a judge, its three views (``judge_table.json``: a candidate's run keeps its mean's
    rows and its comparisons'); ``system`` keeps one system's rows (its own run)."""
    import hashlib
    import io

    import pandas as pd

    tables: list[tuple[str, str, str | None]] = []
    if system is None:
        tables.append(("per_query.csv", "per_query_table.json", None))
    else:
        from ..spec import system_file_stem

        tables.append((f"systems/{system_file_stem(system)}.per_query.csv", "per_query_table.json", None))
    tables += [
        ("comparisons.csv", "comparisons_table.json", "candidate"),
        ("segments.csv", "segments_table.json", "system"),
        ("segment_comparisons.csv", "segment_comparisons_table.json", "candidate"),
        ("sensitivity.csv", "sensitivity_table.json", "system"),
        ("judge.csv", "judge_table.json", "system"),
    ]
    out: list[tuple[str, Any]] = []
    for csv_name, table_name, column in tables:
        path = out_dir / csv_name
        if not path.is_file():
            continue
        data = path.read_bytes()
        key = (hashlib.sha256(data).hexdigest(), column, system if column else None)
        with _TEXTS_LOCK:
            text = _TEXTS.get(key)
        if text is not None:  # a table of these bytes (and this filter) made before: its JSON, not parsed again
            out.append((table_name, text))
            continue
        frame = pd.read_csv(
            io.BytesIO(data),
            dtype={"query_id": str, "cutoff": str, "system": str, "candidate": str, "baseline": str, "segment": str},
            keep_default_na=False,
            na_values=[""],
        )
        if system is not None and column is not None:
            if column not in frame.columns:
                continue
            frame = frame[frame[column] == system]
            if frame.empty:
                continue
        if table_name in ("comparisons_table.json", "segment_comparisons_table.json"):
            first = [c for c in ("segment", *COMPARISON_COLUMNS) if c in frame.columns]
            frame = frame[first + [c for c in frame.columns if c not in first]]
        frame.attrs[_KEY] = key
        out.append((table_name, frame))
    if summary is not None:
        systems = summary["systems"] if system is None else {system: summary["systems"][system]}
        out.append(("figures_table.json", pd.DataFrame(figure_rows(systems))))
    return out
