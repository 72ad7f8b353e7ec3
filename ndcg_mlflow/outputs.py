"""Local outputs of an evaluation, written before anything is sent to a tracking server.

The folder holds ``spec.yaml`` (the spec text exactly as given), ``summary.json``,
``per_query.csv`` (all systems) and ``systems/<system>.per_query.csv``; with a
comparison, also ``comparisons.csv``, ``wins_losses.json`` and ``wins_losses.md``; with
``report.sensitivity``, ``sensitivity.csv``. ``report.html`` and ``report.md`` are rendered
from these files (:mod:`ndcg_mlflow.report`), as are the figures logged to MLflow.
"""

from __future__ import annotations

import datetime as _dt
import os
import secrets
import uuid
from pathlib import Path

from .evaluation import EvaluationResult

DEFAULT_ROOT = "ndcg_reports"


def new_output_dir(name: str, root: str | Path = DEFAULT_ROOT) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80] or "evaluation"
    return Path(root) / f"{safe}-{stamp}-{secrets.token_hex(3)}"


def write_outputs(result: EvaluationResult, out_dir: str | Path, *, reports: bool = True) -> Path:
    """Write every local output; files appear complete or not at all (written then renamed).

    ``reports`` also renders ``report.html`` and ``report.md`` from the written files.
    """
    out = Path(out_dir)
    (out / "systems").mkdir(parents=True, exist_ok=True)
    spec = result.spec
    _atomic_bytes(out / "spec.yaml", spec.text.encode("utf-8"))  # its sha256 is summary.spec_sha256
    if not (out / "run_key.txt").is_file():  # identifies this result in MLflow, so uploads are idempotent
        _atomic_bytes(out / "run_key.txt", (uuid.uuid4().hex + "\n").encode())
    _atomic_bytes(out / "summary.json", result.summary_json().encode("utf-8"))
    _atomic_csv(out / "per_query.csv", result.per_query)
    table = result.per_query
    for name, sr in result.systems.items():
        _atomic_csv(out / "systems" / f"{name}.per_query.csv", table[table["system"] == name])
        if sr.top is not None:
            _atomic_csv(out / "systems" / f"{name}.top.csv", top_table(result, name))
    from .explain import explain

    _atomic_bytes(out / "explanation.txt", (explain(spec, result.grades) + "\n").encode("utf-8"))
    if result.analysis is not None and result.analysis.comparisons:
        from .analysis import wins_losses_markdown

        _atomic_csv(out / "comparisons.csv", result.comparisons)
        _atomic_bytes(out / "wins_losses.json", result.wins_losses_json().encode("utf-8"))
        _atomic_bytes(out / "wins_losses.md", wins_losses_markdown(result, result.analysis).encode("utf-8"))
        if result.analysis.distributions:
            _atomic_csv(out / "bootstrap.csv", bootstrap_table(result.analysis))
    if result.sensitivity is not None:
        _atomic_csv(out / "sensitivity.csv", result.sensitivity)
    if reports:
        from .report import write_reports

        write_reports(out)
    return out


def top_table(result: EvaluationResult, name: str):
    """The documents each query showed first (``systems/<name>.top.csv``): query_id, rank, doc_id, grade."""
    import numpy as np
    import pandas as pd

    top = result.systems[name].top
    frame = pd.DataFrame({"query_id": result.query_ids[top.query], "rank": top.position + 1,
                          "doc_id": np.asarray(top.doc, dtype=object), "grade": top.grade})
    return frame.sort_values(["query_id", "rank"], kind="stable")


def bootstrap_table(analysis):
    """Bootstrap distributions of every compared difference, one column ``<candidate>:<key>`` each."""
    import pandas as pd

    return pd.DataFrame({f"{c}:{k}": d for (c, k), d in analysis.distributions.items()})


def _atomic_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".partial")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _atomic_csv(path: Path, frame) -> None:
    tmp = path.with_name(path.name + ".partial")
    frame.to_csv(tmp, index=False, float_format="%.17g", na_rep="")
    os.replace(tmp, path)
