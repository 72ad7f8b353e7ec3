"""What is logged is named here: metric keys (never with ``@``: ``nDCG@10`` is ``ndcg_at_10``), params and
tags, and the files logged as artifacts. Pure: no mlflow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..rules import companion_key
from ..version import __version__

TAG_PREFIX = "ndcg_mlflow"
ARTIFACTS = ("spec.yaml", "summary.json", "per_query.csv", "explanation.txt", "comparisons.csv",
             "wins_losses.json", "wins_losses.md", "bootstrap.csv", "sensitivity.csv", "report.html", "report.md")


def system_metrics(means: dict[str, dict[str, Any]]) -> dict[str, float]:
    """The metrics of one system: ``ndcg_at_K`` with its counts and interval, keyed without ``@``."""
    out: dict[str, float] = {}
    for key, m in means.items():
        out[key] = m["mean"]
        for extra in ("n_evaluated", "n_excluded", "n_missing", "n_empty_ideal", "weight_sum", "n_eff",
                      "ci_low", "ci_high", "std_error"):
            if extra in m:
                out[f"{key}_{extra}"] = m[extra]
        for companion in ("duplicate_rate", "catalog_coverage"):
            if companion in m:
                out[companion_key(key, companion)] = m[companion]
        out[companion_key(key, "judged_coverage")] = m["judged_coverage"]
    return out


COMPARISON_METRICS = ("delta", "ci_low", "ci_high", "std_error", "p_randomization", "p_t_test", "p_corrected",
                      "relative_delta", "effect_size_dz", "wins", "ties", "losses", "n_paired")


def comparison_metrics(comparisons: list[dict[str, Any]]) -> dict[str, float]:
    """Parent-run metrics of each comparison: ``compare.<candidate>.ndcg_at_10.delta`` and so on."""
    out: dict[str, float] = {}
    for row in comparisons:
        for field_name in COMPARISON_METRICS:
            value = row.get(field_name)
            if value is not None:
                out[f"compare.{row['candidate']}.{row['key']}.{field_name}"] = value
    return out


def parent_tags(summary: dict, out_dir: Path, run_key: str) -> dict[str, str]:
    systems = list(summary["systems"])
    tags = {
        f"{TAG_PREFIX}.role": "evaluation",
        f"{TAG_PREFIX}.evaluation": summary["name"],
        f"{TAG_PREFIX}.run_key": run_key,
        f"{TAG_PREFIX}.spec_sha256": summary["spec_sha256"],
        f"{TAG_PREFIX}.definition_sha256": summary["definition_sha256"],
        f"{TAG_PREFIX}.version": summary.get("ndcg_mlflow_version", __version__),
        f"{TAG_PREFIX}.engine": summary.get("engine", "local"),
        f"{TAG_PREFIX}.systems": ",".join(systems),
        f"{TAG_PREFIX}.local_output": str(out_dir.resolve()),
        f"{TAG_PREFIX}.logging": "started",
        "mlflow.note.content": (f"nDCG evaluation '{summary['name']}' of {len(systems)} system(s) "
                                f"({', '.join(systems)}) on {summary['n_queries']} queries; cutoffs "
                                f"{summary['spec'].get('metric.cutoffs')}. The spec is the artifact spec.yaml, "
                                f"the report report.html."),
    }
    for role, f in summary.get("files", {}).items():
        tags[f"{TAG_PREFIX}.data.{role.replace('system:', 'system.')}.sha256"] = f["sha256"]
    outside = summary.get("paths_outside_spec_folder") or []
    if outside:
        tags[f"{TAG_PREFIX}.paths_outside_spec_folder"] = param_value(", ".join(outside))
    return tags


def param_value(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 6000 else text[:5990] + "...[cut]"
