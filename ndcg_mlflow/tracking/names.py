"""What is logged is named here: metric keys (never with ``@``: ``nDCG@10`` is ``ndcg_at_10``), params, tags,
run names and the files logged as artifacts. Pure: no mlflow.

One scheme for the three kinds of run (an evaluation, one run per system, a comparison): a tag key means the
same thing on every run that carries it, and a metric key is the same figure on every run that carries it,
so one key charts across runs. The layout is described in docs/mlflow.md."""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
from pathlib import Path
from typing import Any

from ..escapes import term_text
from ..rules import companion_key, headline_key, key_label, metric_name, randomizes, t_tests
from ..version import __version__

TAG_PREFIX = "ndcg_mlflow"
DEFAULT_SYSTEM = "model"  # the system of an ``ndcg_spec`` evaluation run whose evaluator_config names none
ATTACHED_TAG = f"{TAG_PREFIX}.attached"  # "true" on a run the caller owns that an evaluation was logged into
ARTIFACTS = (
    "spec.yaml",
    "summary.json",
    "per_query.csv",
    "explanation.txt",
    "comparisons.csv",
    "wins_losses.json",
    "wins_losses.md",
    "bootstrap.csv",
    "sensitivity.csv",
    "report.html",
    "report.md",
    "judge.csv",
)
INTERVAL = ("ci_low", "ci_high")
# the comparison figures charted as metrics; every other column of a comparison is in the comparisons table
COMPARISON_METRICS = ("delta", "ci_low", "ci_high", "p_randomization", "p_t_test", "p_judged", "p_corrected")


def system_metrics(means: dict[str, dict[str, Any]]) -> dict[str, float]:
    """The metrics of one system: ``ndcg_at_K`` with its interval ``ndcg_at_K.ci_low`` / ``ndcg_at_K.ci_high``,
    and the declared companion measures; keyed without ``@``. The counts, standard error, n_eff, weight sum and
    judged coverage are in the figures table (:func:`figure_rows`) and ``summary.json``."""
    out: dict[str, float] = {}
    for key, m in means.items():
        out[key] = m["mean"]
        for extra in INTERVAL:
            if extra in m:
                out[f"{key}.{extra}"] = m[extra]
        for companion in ("duplicate_rate", "catalog_coverage"):
            if companion in m:
                out[companion_key(key, companion)] = m[companion]
    return out


def comparison_metrics(comparisons: list[dict[str, Any]], test: str | None = None) -> dict[str, float]:
    """The metrics of one candidate's comparisons with the baseline: ``compare.ndcg_at_10.delta`` and so on.
    The key names no system (the run's tags do), so one key charts across runs; ``comparisons`` holds one
    candidate's rows. p-values of a test that was not asked for (``test``) are left out."""
    candidates = {row["candidate"] for row in comparisons}
    if len(candidates) > 1:
        raise ValueError(f"comparison metrics of one candidate at a time, not {sorted(candidates)}")
    computed = (("p_randomization", randomizes), ("p_t_test", t_tests))
    skip = set() if test is None else {field_name for field_name, asked in computed if not asked(test)}
    out: dict[str, float] = {}
    for row in comparisons:
        for field_name in COMPARISON_METRICS:
            value = row.get(field_name)
            if value is not None and field_name not in skip:
                out[f"compare.{row['key']}.{field_name}"] = value
    return out


# with a judge, a system's figures of each key beside its mean (the declared estimator's): the two other views'
# estimates (judge-only is not valid: the judge's bias is not corrected) and the estimator's figures
JUDGE_SYSTEM_METRICS = ("human_only", "judge_only", "lambda", "rho", "n_effective")
# and a candidate's beside its comparison's: the judge's bias on the difference (human minus judge, over the labelled
# queries) with its p-value, and the difference under each of the two other views
JUDGE_COMPARISON_METRICS = ("judge_bias", "judge_bias_p", "judge_only_delta", "human_only_delta")


def judge_metrics(judge: dict[str, Any] | None, system: str) -> dict[str, float]:
    """With a judge (``summary.json``'s ``judge``), a system run's metrics beyond its means and comparisons:
    ``judge.<key>.<figure>`` for the figures of :data:`JUDGE_SYSTEM_METRICS`, and for a candidate
    ``compare.<key>.<figure>`` for those of :data:`JUDGE_COMPARISON_METRICS`; none without a judge. An undefined
    figure (the estimator's weight of a stratified estimate) is left out."""
    if not judge:
        return {}
    out: dict[str, Any] = {}
    for key, e in (judge["systems"].get(system) or {}).items():
        figures = {
            "human_only": e["human_only"]["estimate"],
            "judge_only": e["judge_only"]["estimate"],
            "lambda": e.get("lambda"),
            "rho": e.get("rho"),
            "n_effective": e.get("n_effective"),
        }
        out.update({f"judge.{key}.{name}": figures[name] for name in JUDGE_SYSTEM_METRICS})
    for c in judge["comparisons"]:
        if c["candidate"] != system:
            continue
        figures = {
            "judge_bias": c["judge_bias"]["estimate"],
            "judge_bias_p": c["judge_bias"]["p_value"],
            "judge_only_delta": c["judge_only"]["estimate"],
            "human_only_delta": c["human_only"]["estimate"],
        }
        out.update({f"compare.{c['key']}.{name}": figures[name] for name in JUDGE_COMPARISON_METRICS})
    return {k: v for k, v in out.items() if v is not None}


# the comparison figures the evaluation run carries, per candidate at the headline key (the decision's key when the
# spec declares one): what a reviewer landing on it reads first; every figure is on the candidate's run and in
# the comparisons table
PARENT_COMPARISON = ("delta", "ci_low", "ci_high", "p_corrected")


def parent_key(comparisons: list[dict[str, Any]], decision: dict[str, Any] | None, keys: list[str]) -> str | None:
    """The key whose comparisons the evaluation run shows: the decision's, else nDCG@10 if declared, else the
    first cutoff's; None without comparisons."""
    if not comparisons:
        return None
    return decision["key"] if decision else headline_key(keys)


def parent_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """The evaluation run's metrics: each system's mean at each cutoff (``<system>.ndcg_at_<K>``), and each
    candidate's comparison with the baseline at one key (:func:`parent_key`) as
    ``<candidate>.compare.ndcg_at_<K>.<figure>`` for the figures of :data:`PARENT_COMPARISON`. Intervals, companion
    measures and the other comparisons are on the system runs and in the tables."""
    out = {f"{system}.{key}": m["mean"] for system, means in summary["systems"].items() for key, m in means.items()}
    comparisons = summary.get("comparisons") or []
    keys = list(next(iter(summary["systems"].values()), {}))
    key = parent_key(comparisons, summary.get("decision"), keys)
    for row in comparisons:
        if row["key"] == key:
            for figure in PARENT_COMPARISON:
                if row.get(figure) is not None:
                    out[f"{row['candidate']}.compare.{key}.{figure}"] = row[figure]
    return out


def parent_note(summary: dict[str, Any]) -> str:
    """The evaluation run's description (``mlflow.note.content``, shown first on its page, as Markdown): the
    verdict (the decision, else each candidate against the baseline at :func:`parent_key`), then what is where."""
    from ..render.format import md_text, number, p_value, system_label, wins_ties_losses

    def label(name: str) -> str:  # every string from the data or the spec escaped for markdown, as in report.md
        return md_text(system_label(name, summary.get("models")))

    systems = list(summary["systems"])
    comparisons = summary.get("comparisons") or []
    decision = summary.get("decision")
    keys = list(next(iter(summary["systems"].values()), {}))
    key = parent_key(comparisons, decision, keys)
    lines = []
    if decision:
        lines.append(f"**Decision: {decision['outcome'].upper()}** — {md_text(decision['statement'])}")
        lines += [f"- {label(r['candidate'])}: {r['outcome']} ({md_text(r['reason'])})" for r in decision["candidates"]]
        lines.append("")
    if key is not None:
        rows = [r for r in comparisons if r["key"] == key]
        lines.append(f"Against baseline {label(rows[0]['baseline'])} at {metric_name(key)}:" if rows else "")
        for r in rows:
            interval = f"[{number(r['ci_low'], signed=True)}, {number(r['ci_high'], signed=True)}]"
            lines.append(
                f"- {label(r['candidate'])}: {number(r['delta'], signed=True)} {interval}, p corrected "
                f"{p_value(r.get('p_corrected'))}; wins/ties/losses {wins_ties_losses(r, '/')}"
            )
        lines.append("")
    if summary.get("judge"):  # which labels the verdict rests on, and how far the judge moved it
        from ..render.judge_report import summary_lead

        lines += [line for text in summary_lead(summary) for line in (md_text(text), "")]
    lines.append(
        f"nDCG evaluation '{md_text(summary['name'])}' of {len(systems)} system(s) "
        f"({', '.join(map(md_text, systems))}) on "
        f"{summary['n_queries']} queries; cutoffs {summary['spec'].get('metric.cutoffs')}. The report is the artifact "
        f"report.html, the spec spec.yaml, every figure summary.json and the table figures_table.json"
        + (", every comparison comparisons_table.json and each candidate's run." if comparisons else ".")
    )
    return "\n".join(lines)


def figure_rows(systems: dict[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every figure of ``summary.json``'s systems, one row per system and cutoff (the MLflow table
    ``figures_table.json``): mean, interval, standard error, n_eff, weight sum, counts, coverage."""
    rows = []
    for name, means in systems.items():
        for key, m in means.items():
            row: dict[str, Any] = {"system": name, "key": key, "cutoff": key_label(key)}
            row.update({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in m.items()})
            rows.append(row)
    return rows


def data_digest(summary: dict) -> str:
    """sha256 over the sha256 of every data file of an evaluation (tag ``ndcg_mlflow.data_sha256``; its first 8
    digits are in the run names)."""
    files = summary.get("files", {})
    blob = "\n".join(f"{role}\t{f['sha256']}" for role, f in sorted(files.items()))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def stamp(when: _dt.datetime) -> str:
    return when.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _systems_text(systems: list[str], limit: int = 60) -> str:
    text = ", ".join(systems)
    if len(text) <= limit or len(systems) <= 1:
        return text
    shown = systems[:2]
    return f"{', '.join(shown)} +{len(systems) - len(shown)} more"


def run_name_text(text: str) -> str:
    """A run's name as it is given to MLflow, which shows it in lists, pages and terminals: one line, its control
    characters (escape sequences, line breaks, NUL, lone surrogates, ...) and backslashes written as the terminal
    writes them (:func:`~ndcg_mlflow.escapes.term_text`: ``\\x1b``, ``\\n``), so that it shows them rather than
    acting on them and reads back as the same string; every other character as given."""
    return term_text(text)


def evaluation_run_name(summary: dict, when: _dt.datetime) -> str:
    """``<spec name> · <systems> · data <8 digits of data_sha256> · <UTC time>``: re-runs of a spec differ by
    their time, and by their data digest when the data changed (a :func:`run_name_text`)."""
    return run_name_text(
        f"{summary['name']} · {_systems_text(list(summary['systems']))} · data {data_digest(summary)[:8]} · "
        f"{stamp(when)}"
    )


def system_run_name(system: str, summary: dict, when: _dt.datetime, given: str | None = None) -> str:
    """``<system> · <spec name> · <UTC time>``, or ``<system> · <mlflow.run_name>`` when the spec names its runs
    (a :func:`run_name_text`)."""
    return run_name_text(f"{system} · {given}" if given else f"{system} · {summary['name']} · {stamp(when)}")


def comparison_run_name(candidate: str, baseline: str, when: _dt.datetime) -> str:
    return run_name_text(f"compare {candidate} vs {baseline} · {stamp(when)}")


def common_tags(summary: dict, run_key: str) -> dict[str, str]:
    """The tags every run of an evaluation carries, with one meaning on every kind of run."""
    tags = {
        f"{TAG_PREFIX}.evaluation": summary["name"],
        f"{TAG_PREFIX}.run_key": run_key,
        f"{TAG_PREFIX}.spec_sha256": summary["spec_sha256"],
        f"{TAG_PREFIX}.definition_sha256": summary["definition_sha256"],
        f"{TAG_PREFIX}.data_sha256": data_digest(summary),
        f"{TAG_PREFIX}.version": summary.get("ndcg_mlflow_version", __version__),
        f"{TAG_PREFIX}.engine": summary.get("engine", "local"),  # how the numbers were computed (not the spec)
    }
    baseline = summary.get("spec", {}).get("comparison.baseline")
    if baseline:
        tags[f"{TAG_PREFIX}.baseline"] = baseline
    return tags


def data_tags(files: dict[str, dict], systems: list[str] | None = None) -> dict[str, str]:
    """``ndcg_mlflow.data.<role>.sha256`` of the data files (``qrels``, ``system.<name>``, ``queries.weights``
    ...); ``systems``, when given, keeps only those systems' files."""
    tags = {}
    for role, f in files.items():
        if role.startswith("system:") and systems is not None and role.split(":", 1)[1] not in systems:
            continue
        tags[f"{TAG_PREFIX}.data.{role.replace('system:', 'system.')}.sha256"] = f["sha256"]
    return tags


def parent_tags(summary: dict, out_dir: Path, run_key: str) -> dict[str, str]:
    systems = list(summary["systems"])
    tags = {
        f"{TAG_PREFIX}.role": "evaluation",
        **common_tags(summary, run_key),
        f"{TAG_PREFIX}.systems": param_value(",".join(systems)),
        f"{TAG_PREFIX}.local_output": str(out_dir.resolve()),  # the one machine-local value logged
        f"{TAG_PREFIX}.logging": "started",
        "mlflow.note.content": parent_note(summary),
        **data_tags(summary.get("files", {})),
    }
    outside = summary.get("paths_outside_spec_folder") or []
    if outside:
        tags[f"{TAG_PREFIX}.paths_outside_spec_folder"] = param_value(", ".join(outside))
    for system, record in (summary.get("models") or {}).items():
        tags.update(model_tags(record, f"{TAG_PREFIX}.model.{system}"))
    decision = summary.get("decision")
    if decision:  # pass | fail: the spec's decision rule over every candidate (summary.json "decision")
        tags[f"{TAG_PREFIX}.decision"] = decision["outcome"]
        tags[f"{TAG_PREFIX}.decision.rule"] = param_value(decision["statement"])
    return tags


def system_note(summary: dict, name: str, parent_id: str) -> str:
    """A system run's description (Markdown): the names escaped as in :func:`parent_note`."""
    from ..render.format import md_text

    return f"nDCG of system '{md_text(name)}' in evaluation '{md_text(summary['name'])}' (parent run {parent_id})."


def system_tags(summary: dict, name: str, parent_id: str, run_key: str) -> dict[str, str]:
    tags = {
        "mlflow.parentRunId": parent_id,
        f"{TAG_PREFIX}.role": "system",
        f"{TAG_PREFIX}.system": name,
        **common_tags(summary, run_key),
        **data_tags(summary.get("files", {}), [name]),
        f"{TAG_PREFIX}.logging": "started",
        "mlflow.note.content": system_note(summary, name, parent_id),
    }
    record = (summary.get("models") or {}).get(name)
    if record:
        tags.update(model_tags(record, f"{TAG_PREFIX}.model"))
    for row in (summary.get("decision") or {}).get("candidates", []):
        if row["candidate"] == name:  # this candidate's own verdict under the decision rule
            tags[f"{TAG_PREFIX}.decision"] = row["outcome"]
            tags.update(guardrail_tags(row))
    return tags


def guardrail_tags(row: dict[str, Any]) -> dict[str, str]:
    """A candidate's guardrails (``summary.json`` decision's candidate row): ``ndcg_mlflow.guardrail.<name>`` the
    outcome, ``….reason`` why; the main rule's own outcome as ``ndcg_mlflow.decision.rule_outcome``."""
    if "guardrails" not in row:
        return {}
    tags = {f"{TAG_PREFIX}.decision.rule_outcome": row["rule_outcome"]}
    for g in row["guardrails"]:
        tags[f"{TAG_PREFIX}.guardrail.{g['guardrail']}"] = g["outcome"]
        tags[f"{TAG_PREFIX}.guardrail.{g['guardrail']}.reason"] = param_value(g["reason"])
    return tags


def param_value(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 6000 else text[:5990] + "...[cut]"


# what a model URI resolved to (summary.json "models"), as tags: ndcg_mlflow.model.<field> on a model's system run,
# ndcg_mlflow.model.<system>.<field> on the evaluation run
MODEL_FIELDS = (
    "uri",
    "loaded_uri",
    "registered_model",
    "version",
    "alias",
    "source",
    "run_id",
    "model_id",
    "candidates",
    "candidates_sha256",
)


def model_tags(record: dict[str, Any], prefix: str) -> dict[str, str]:
    return {f"{prefix}.{f}": param_value(record[f]) for f in MODEL_FIELDS if record.get(f) is not None}
