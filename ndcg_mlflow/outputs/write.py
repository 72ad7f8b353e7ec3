"""An evaluation's output folder, written from its result (:func:`write_outputs`) and published whole
(:mod:`ndcg_mlflow.outputs.folder`).

The folder holds ``spec.yaml`` (the spec text as given, less credentials in URIs), ``summary.json``,
``per_query.csv`` (all systems) and ``systems/<system>.per_query.csv``; with a
comparison, also ``comparisons.csv``, ``wins_losses.json`` and ``wins_losses.md``; with
``report.sensitivity``, ``sensitivity.csv``; with a judge, ``judge.csv`` (:func:`judge_table`).
``report.html`` and ``report.md`` are rendered from these files (:mod:`ndcg_mlflow.render.report`), as are the
figures logged to MLflow.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import secrets
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import NdcgError
from ..paths import shown_path
from ..result import EvaluationResult
from ..spec import PARTIAL_SUFFIX, system_file_stem
from .csvtext import FLOAT_FORMAT, csv_join, csv_lines, number_text
from .folder import atomic_bytes, os_reason, staged_folder

DEFAULT_ROOT = "ndcg_reports"


def new_output_dir(name: str, root: str | Path = DEFAULT_ROOT) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80] or "evaluation"
    return Path(root) / f"{safe}-{stamp}-{secrets.token_hex(3)}"


def write_outputs(result: EvaluationResult, out_dir: str | Path, *, reports: bool = True) -> Path:
    """Write every local output into a new folder that then replaces ``out_dir`` whole (see
    :mod:`ndcg_mlflow.outputs.folder`); ``out_dir`` keeps its previous contents when anything fails.

    ``reports`` also renders ``report.html`` and ``report.md`` from the written files.

    For an evaluation whose per-query rows stayed in Spark (``result.per_query_path``): ``spec.yaml``,
    ``run_key.txt``, ``summary.json`` (its ``per_query_path`` says where the per-query Parquet table is),
    ``explanation.txt``, ``comparisons.csv``, the models' scored rows (``systems/<name>.scored.parquet``) and the
    reports; no ``per_query.csv`` nor per-system tables.
    """
    if result.per_query_path is not None:
        return _write_folder(out_dir, lambda tmp, run_key: _write_grouped(result, tmp, run_key))
    return _write_folder(out_dir, lambda tmp, run_key: _write_all(result, tmp, run_key, reports))


def _write_folder(out_dir: str | Path, fill: Callable[[Path, str], None]) -> Path:
    """``fill(folder, run_key)`` writes a new folder that then replaces ``out_dir`` whole; an operating-system
    failure is an :class:`NdcgError` saying ``out_dir`` is unchanged."""
    out = Path(out_dir)
    run_key = uuid.uuid4().hex  # a new result, a new key: identifies it in MLflow, so uploads are idempotent
    try:
        with staged_folder(out, kind="evaluation", run_key=run_key) as tmp:
            fill(tmp, run_key)
    except OSError as exc:
        shown = shown_path(out)
        raise NdcgError(f"cannot write the local results to {shown}: {os_reason(exc)}; {shown} is unchanged.") from None
    return out


def _write_grouped(result: Any, out: Path, run_key: str) -> None:
    import pandas as pd

    from ..render.explain import explain
    from ..render.report import write_reports
    from ..result import json_safe

    summary = result.summary
    atomic_bytes(out / "spec.yaml", result.spec.recorded_text.encode("utf-8"))
    atomic_bytes(out / "run_key.txt", (run_key + "\n").encode())
    text = json.dumps(json_safe(summary), indent=2, allow_nan=False) + "\n"
    atomic_bytes(out / "summary.json", text.encode("utf-8"))
    atomic_bytes(out / "explanation.txt", (explain(result.spec, summary["grades"]) + "\n").encode("utf-8"))
    if summary["comparisons"]:
        _atomic_csv(out / "comparisons.csv", pd.DataFrame(summary["comparisons"]))
    _copy_scored(getattr(result, "scored", {}), out)
    write_reports(out)


def per_query_home(out_dir: str | Path) -> Path:
    """Where ``ndcg-mlflow run`` puts per-query tables that stay in Spark: ``OUT.per_query/``, one new folder
    per evaluation inside it."""
    return Path(f"{os.path.abspath(out_dir)}.per_query")


def previous_per_query(out_dir: str | Path) -> Path | None:
    """The per-query table the result now in ``out_dir`` refers to (``summary.json``'s ``per_query_path``), when
    it is one ``ndcg-mlflow run`` put in :func:`per_query_home`; None otherwise (no result, a result with its
    per-query rows in the folder, or a table the user placed elsewhere, which is never removed)."""
    try:
        summary = json.loads((Path(out_dir) / "summary.json").read_text(encoding="utf-8"))
        path = Path(os.path.abspath(summary["per_query_path"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return path if path.parent == per_query_home(out_dir) else None


def remove_per_query(out_dir: str | Path, path: str | Path | None) -> None:
    """Remove a per-query table of :func:`per_query_home` that no result refers to any more (the result that
    referred to it was replaced, or the new result was not written), and the home when it is left empty.
    Tables another result in ``out_dir`` refers to are kept (the caller holds the folder lock)."""
    if path is None:
        return
    path = Path(os.path.abspath(path))
    home = per_query_home(out_dir)
    if path.parent != home or path == previous_per_query(out_dir):
        return
    shutil.rmtree(path, ignore_errors=True)
    try:
        home.rmdir()  # only when empty: another evaluation may be writing its table there
    except OSError:
        pass


def _copy_scored(scored: dict, out: Path) -> None:
    """Models' scored rows into ``systems/<name>.scored.parquet``: each system's run from now on (a file from the
    local engine, a folder of part files from Spark)."""
    for name, path in scored.items():
        source, target = Path(path), out / "systems" / f"{system_file_stem(name)}.scored.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns(".*.crc"))
        else:
            shutil.copyfile(source, target)


def _write_all(result: EvaluationResult, out: Path, run_key: str, reports: bool) -> None:
    (out / "systems").mkdir(parents=True, exist_ok=True)
    spec = result.spec
    # the spec text without URI credentials (Spec.recorded_text); its sha256 is summary.spec_sha256
    atomic_bytes(out / "spec.yaml", spec.recorded_text.encode("utf-8"))
    atomic_bytes(out / "run_key.txt", (run_key + "\n").encode())
    atomic_bytes(out / "summary.json", result.summary_json.encode("utf-8"))
    table = result.per_query
    lines = csv_lines(table)  # formatted once: the systems' files take their rows' lines
    whole = b""  # the file's bytes, when its lines were formatted here
    if lines is None:
        _atomic_csv(out / "per_query.csv", table)
    else:
        whole = "".join(lines).encode("utf-8")
        atomic_bytes(out / "per_query.csv", whole)
    system_column = table["system"].to_numpy(dtype=object)
    for name, sr in result.systems.items():
        stem = system_file_stem(name)
        if lines is None:
            _atomic_csv(out / "systems" / f"{stem}.per_query.csv", table[table["system"] == name])
        else:
            rows = np.flatnonzero(system_column == name) + 1
            atomic_bytes(
                out / "systems" / f"{stem}.per_query.csv",
                whole
                if len(rows) == len(lines) - 1
                # (one system's rows: the whole file's bytes)
                else "".join([lines[0], *(lines[i] for i in rows)]).encode("utf-8"),
            )
        if sr.top is not None:
            atomic_bytes(out / "systems" / f"{stem}.top.csv", "".join(top_lines(result, name)).encode("utf-8"))
    _copy_scored(result.scored, out)
    from ..render.explain import explain

    atomic_bytes(out / "explanation.txt", (explain(spec, result.grades) + "\n").encode("utf-8"))
    if result.analysis is not None and result.analysis.comparisons:
        from ..render.wins_losses import wins_losses_markdown

        _atomic_csv(out / "comparisons.csv", result.comparisons)
        if result.analysis.segment_comparisons:
            _atomic_csv(out / "segments.csv", result.segment_means)
            _atomic_csv(out / "segment_comparisons.csv", result.segment_comparisons)
        atomic_bytes(out / "wins_losses.json", result.wins_losses_json.encode("utf-8"))
        atomic_bytes(out / "wins_losses.md", wins_losses_markdown(result, result.analysis).encode("utf-8"))
        if result.analysis.distributions:
            _atomic_csv(out / "bootstrap.csv", bootstrap_table(result.analysis))
    if result.sensitivity is not None:
        _atomic_csv(out / "sensitivity.csv", result.sensitivity)
    if result.judged is not None:
        _atomic_csv(out / "judge.csv", judge_table(result.judged))
    if reports:
        from ..render.report import write_reports

        write_reports(out)


def top_table(result: EvaluationResult, name: str):
    """The documents each query showed first (``systems/<name>.top.csv``): query_id, rank, doc_id, grade."""
    import pandas as pd

    top = result.systems[name].top
    assert top is not None  # called for the systems whose top lists were kept
    frame = pd.DataFrame(
        {
            "query_id": result.query_ids[top.query],
            "rank": top.position + 1,
            "doc_id": np.asarray(top.doc, dtype=object),
            "grade": top.grade,
        }
    )
    return frame.sort_values(["query_id", "rank"], kind="stable")


def top_lines(result: EvaluationResult, name: str) -> list[str]:
    """The lines of ``csv_lines(top_table(result, name))``, the same text, without the frame: the rows in
    (query_id, rank) order (the query ids are distinct, and so are a query's ranks), formatted as
    :func:`csv_lines` formats them."""
    top = result.systems[name].top
    assert top is not None  # called for the systems whose top lists were kept
    ids = np.asarray(result.query_ids, dtype=object)
    place = np.empty(len(ids), dtype=np.int64)
    place[np.argsort(ids, kind="stable")] = np.arange(len(ids))  # each query's place in query_id order
    key = place[top.query] * (int(top.position.max(initial=0)) + 1) + top.position
    order = None if bool(np.all(key[1:] > key[:-1])) else np.argsort(key, kind="stable")
    query, position, grade = top.query, top.position, np.asarray(top.grade)
    doc = np.asarray(top.doc, dtype=object)
    if order is not None:
        query, position, grade, doc = query[order], position[order], grade[order], doc[order]
    docs = doc.tolist()
    return csv_join(
        ["query_id", "rank", "doc_id", "grade"],
        [
            ids[query].tolist(),
            number_text(position + 1),
            ["" if v is None else str(v) for v in docs],
            number_text(grade),
        ],
    )


#: the columns of ``judge.csv``: a row's kind (``system``: a system's mean, ``comparison``: a candidate's
#: difference from the baseline), then the declared estimate with its interval and the estimator's figures, then the
#: human-only and judge-only views (judge-only is not valid: the judge's bias is not corrected) and, for a
#: comparison, the judge's bias (human difference minus judge difference over the labelled queries)
JUDGE_COLUMNS = (
    "kind",
    "system",
    "baseline",
    "key",
    "cutoff",
    "estimator",
    "estimate",
    "ci_low",
    "ci_high",
    "std_error",
    "p_value",
    "lambda",
    "rho",
    "n_effective",
    "n_labelled",
    "n_unlabelled",
    "human_only",
    "human_only_ci_low",
    "human_only_ci_high",
    "judge_only",
    "judge_only_ci_low",
    "judge_only_ci_high",
    "judge_bias",
    "judge_bias_ci_low",
    "judge_bias_ci_high",
    "judge_bias_p",
)


def judge_rows(judged: dict[str, Any]) -> list[dict[str, Any]]:
    """``judge.csv``'s rows (:data:`JUDGE_COLUMNS`) from ``summary.json``'s ``judge``: one per system and key, then
    one per comparison and key (``system`` the candidate)."""
    from ..rules import key_label

    def row(kind: str, system: str, baseline: str | None, key: str, e: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": kind,
            "system": system,
            "baseline": baseline,
            "key": key,
            "cutoff": key_label(key),
            "estimator": judged["estimator"],
        }
        out.update({c: e.get(c) for c in ("estimate", "ci_low", "ci_high", "std_error", "p_value", "lambda", "rho")})
        out.update({c: e.get(c) for c in ("n_effective", "n_labelled", "n_unlabelled")})
        for view in ("human_only", "judge_only"):
            v = e.get(view) or {}
            out.update(
                {view: v.get("estimate"), f"{view}_ci_low": v.get("ci_low"), f"{view}_ci_high": v.get("ci_high")}
            )
        bias = e.get("judge_bias") or {}
        out.update({"judge_bias": bias.get("estimate"), "judge_bias_ci_low": bias.get("ci_low")})
        out.update({"judge_bias_ci_high": bias.get("ci_high"), "judge_bias_p": bias.get("p_value")})
        return out

    rows = [row("system", name, None, key, e) for name, keys in judged["systems"].items() for key, e in keys.items()]
    rows += [row("comparison", c["candidate"], c["baseline"], c["key"], c) for c in judged["comparisons"]]
    return rows


def judge_table(judged: dict[str, Any]):
    """``judge.csv``: :func:`judge_rows` as a table of :data:`JUDGE_COLUMNS`."""
    import pandas as pd

    return pd.DataFrame(judge_rows(judged), columns=list(JUDGE_COLUMNS))


def bootstrap_table(analysis):
    """Bootstrap distributions of every compared difference, one column ``<candidate>:<key>`` each."""
    import pandas as pd

    return pd.DataFrame({f"{c}:{k}": d for (c, k), d in analysis.distributions.items()})


def _atomic_csv(path: Path, frame) -> None:
    lines = csv_lines(frame)
    if lines is None:
        tmp = path.with_name(path.name + PARTIAL_SUFFIX)
        frame.to_csv(tmp, index=False, float_format=FLOAT_FORMAT, na_rep="")
        os.replace(tmp, path)
    else:
        atomic_bytes(path, "".join(lines).encode("utf-8"))
