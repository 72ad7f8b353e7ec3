"""The spec reference page, generated from what the package declares, so that it cannot drift from it.

- The metric and query rules: each rule of ``ndcg_mlflow.rules.RULES`` with its choices and their words (the
  words ``explain`` prints), its default, and the alternatives ``report.sensitivity`` recomputes under.
- The presets: each field's value in each preset of ``ndcg_mlflow.spec.presets.PRESETS``.
- The other sections: the fields of the frozen dataclasses of ``ndcg_mlflow/spec/types.py`` and the choices its
  constants declare (formats, interval methods, tests, corrections, decision rules).

Whether a key is required is asked of the validator itself (``parse_spec`` on a complete spec with that key left
out), never written here. Each key of ``types.py`` needs a line of ``FIELDS`` below: a field added there without
one stops the docs build (and ``tests/test_docs.py``).

``docs/hooks.py`` adds the page to the site on every ``mkdocs build``; ``python docs/gen_spec_reference.py``
prints it.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from ndcg_mlflow.errors import SpecError
from ndcg_mlflow.rules import METRIC_RULES, QUERY_RULES, RULES, STATISTICS_CHOICES, Rule
from ndcg_mlflow.spec import parse_spec
from ndcg_mlflow.spec import types as T
from ndcg_mlflow.spec.presets import PRESETS
from ndcg_mlflow.spec.validate import TOP_OPTIONAL, TOP_REQUIRED

PAGE = "spec-reference.md"

# A spec with every key that parse_spec accepts: leaving one out tells whether it is required.
COMPLETE: dict[str, Any] = {
    "spec_version": T.SPEC_VERSION,
    "name": "reference",
    "metric": {
        "gain": "exponential",
        "cutoffs": [10, "all"],
        "discount": "log2",
        "ties": "displayed_order",
        "ideal": "judged_catalog",
        "empty_ideal": "exclude",
        "unjudged": "zero",
        "missing_queries": "zero",
    },
    "queries": {"weights": "weights.tsv", "set": "queries.txt", "segments": "segments.tsv"},
    "data": {"qrels": "qrels.tsv", "systems": {"a": "a.run", "b": "b.run"}, "judge_qrels": "judge.tsv"},
    "uncertainty": {"resamples": 1000, "confidence": 0.95, "method": "bca", "seed": 1, "stratify": "segments"},
    "comparison": {
        "baseline": "a",
        "test": "randomization",
        "correction": "holm",
        "wins_losses": 10,
        "tie_tolerance": 1e-9,
        "risk_alpha": [1, 5],
    },
    "decision": {
        "key": "ndcg_at_10",
        "rule": "superiority",
        "margin": 0.0,
        "max_p": 0.05,
        "guardrails": {
            "segments": {"rule": "non_inferiority", "margin": 0.02},
            "regressions": {"delta": 0.1, "max_share": 0.1},
        },
    },
    "judge": {"estimator": "ppi++", "labelled_queries": "segments", "name": "umbrela-v1"},
    "report": {"sensitivity": True},
    "companions": {"duplicates": "groups.tsv", "catalog": 1000},
    "mlflow": {
        "experiment": "reference",
        "tracking_uri": "http://127.0.0.1:5000",
        "run_name": "nightly",
        "tags": {"team": "search"},
        "timeout": 8,
        "max_retries": 2,
        "total_timeout": 600,
    },
}

# What each key of the other sections means: one line per key path. The choices come from rules.py and types.py
# (CHOICES).
FIELDS: dict[str, str] = {
    "spec_version": f"the version of the spec's schema: `{T.SPEC_VERSION}`.",
    "name": "the evaluation's name: the first part of the run names, the tag `ndcg_mlflow.evaluation`, and the "
    "experiment when `mlflow` is left out.",
    "metric": "the metric rules (below); with `preset`, a tool's definition fills the fields not written.",
    "queries": "which queries are evaluated and how each weighs in the mean (below).",
    "data": "the judgments and the systems; may be left out in Python when both are given as tables.",
    "uncertainty": "bootstrap intervals; once present, every field is required.",
    "comparison": "paired comparisons of each system with a baseline; needs `uncertainty`.",
    "decision": "the rule that passes or fails the evaluation (exit code 4 when it fails); needs `comparison`.",
    "judge": "judgments from a model (an LLM judge) beside the human ones: `data.qrels` then holds the human "
    "judgments of the labelled queries (the evaluated queries with at least one), `data.judge_qrels` the model's "
    "of every evaluated query, and the means, intervals and comparisons combine the two (prediction-powered "
    "inference, [Judgments from a model](judge.md)); needs `uncertainty` (its confidence).",
    "data.judge_qrels": "the model's judgments of every evaluated query, in any form `data.qrels` takes (needs "
    "`judge`).",
    "judge.estimator": "`ppi++`: the judge's labels weighted to minimise the variance (power-tuned prediction-powered "
    "inference); `ppi`: weighted 1 (classic prediction-powered inference); `human_only`: weighted 0 (the labelled "
    "queries alone). The comparisons, the decision and `--promote` read its interval.",
    "judge.labelled_queries": "how the human-labelled queries were chosen: `random`, a simple random sample of the "
    "evaluated queries; `segments`, a random sample within each segment of `queries.segments` (one weight of the "
    "judge's labels per segment, the segments combined by their weight).",
    "judge.name": "the judge's name (its model and prompt), free text recorded with the results.",
    "report": "what the report adds.",
    "companions": "measures reported beside nDCG; declare `duplicates`, `catalog` or both.",
    "mlflow": "where and how the results are logged.",
    "queries.segments": "a file that puts each evaluated query in exactly one segment (a query missing from it is "
    "an error; queries it lists that are not evaluated are ignored): each segment's means and comparisons are "
    "reported beside the overall ones. A path (TSV or whitespace-separated `query_id segment` lines, a header "
    "line allowed), or a source mapping `{path, format, columns}` with format "
    f"{', '.join(f'`{f}`' for f in T.SEGMENT_FORMATS)} and columns "
    f"{', '.join(T.SEGMENT_COLUMNS)}.",
    "metric.preset": "a tool's definition: it fills every metric field; a field written beside it overrides it.",
    "data.qrels": "the judgments: a path (a file, a Parquet folder or glob), or a source mapping (below).",
    "data.systems": "a mapping of system names to their run (a path or a source mapping) or to a model system "
    "`{model, candidates}`.",
    "data.*.path": "the file, Parquet folder or glob; relative to the spec file.",
    "data.*.format": "how the file is read (`auto`: from its name and first line); `delta` is for the judgments "
    "and runs, not for candidates.",
    "data.*.columns": "the source's names for the tool's columns (csv, tsv, jsonl, parquet): for the judgments "
    f"{', '.join(T.QRELS_COLUMNS)}; for a run {', '.join(T.RUN_COLUMNS)}; for candidates "
    f"{', '.join(T.CANDIDATE_COLUMNS)} (the model's inputs keep their names).",
    "data.*.version": "the version of a Delta table to read (`format: delta`; required there).",
    "data.systems.*.model": "what makes the system a model system: a model URI, `models:/<name>/<version>`, "
    "`models:/<name>@<alias>`, "
    "`models:/m-<id>` or `runs:/<run id>/<path>` (registry stages are refused).",
    "data.systems.*.candidates": "the rows the model scores: a path or a source mapping (not TREC text).",
    "uncertainty.resamples": f"bootstrap resamples of queries, from 100 to {T.MAX_RESAMPLES:,}.",
    "uncertainty.confidence": "the intervals' confidence, strictly between 0 and 1 (`0.95`).",
    "uncertainty.method": "the bootstrap interval: BCa, percentile or studentized (bootstrap-t).",
    "uncertainty.seed": "the resampling seed, from 0 to 2^63 - 1.",
    "uncertainty.stratify": "`none` (the default): each resample draws from all the queries; `segments`: the "
    "bootstrap of each overall interval resamples queries within each segment, each keeping its size (needs "
    "`queries.segments`).",
    "comparison.baseline": "the system every other system is compared with (a name of `data.systems`).",
    "comparison.test": "the paired sign-flip randomization test, the paired t-test, or both.",
    "comparison.correction": "the multiple-comparison correction over all (candidate, cutoff) comparisons.",
    "comparison.wins_losses": "how many of the largest per-query wins and of the losses to list (0 to 10,000).",
    "comparison.tie_tolerance": "a per-query difference whose absolute value is at or below it is a tie (a finite "
    "number >= 0).",
    "comparison.risk_alpha": "the alphas of the tail-risk measures URisk and TRisk, where each loss against the "
    f"baseline counts 1 + alpha times: a non-empty list of distinct numbers from 0 to {T.MAX_RISK_ALPHA:,.0f} "
    f"(default `[{', '.join(f'{a:g}' for a in T.RISK_ALPHA)}]`).",
    "decision.key": "the compared key the rule reads: `ndcg_at_<K>` for a cutoff K of `metric.cutoffs`.",
    "decision.rule": "`superiority`: passes when the interval's lower end is above +margin; `non_inferiority`: "
    "above -margin.",
    "decision.margin": "a difference of nDCG, in [0, 1).",
    "decision.max_p": "also require each candidate's corrected p-value at or below it, in (0, 1].",
    "decision.guardrails": "checks the decision adds beyond the overall comparison: `segments`, `regressions` "
    "or both; a candidate that fails one fails.",
    "decision.guardrails.segments": "every segment's comparison must pass too (needs `queries.segments`).",
    "decision.guardrails.segments.rule": "the rule each segment's comparison must pass, as `decision.rule` words it.",
    "decision.guardrails.segments.margin": "the segments' margin, a difference of nDCG, in [0, 1).",
    "decision.guardrails.regressions": "a bound on the queries that lose much against the baseline.",
    "decision.guardrails.regressions.delta": "a query regresses when it loses more than this much nDCG, in (0, 1) "
    "(no query loses 1 or more).",
    "decision.guardrails.regressions.max_share": "the largest share of the evaluated queries (weighted as in the "
    "mean) that may regress, in (0, 1): the upper end of the share's interval must be at most this.",
    "report.sensitivity": "recompute every mean and comparison under each alternative of each rule "
    "(`sensitivity.csv`).",
    "companions.duplicates": "a file mapping doc_id to a near-duplicate group: the duplicate rate in the top K.",
    "companions.catalog": f"the catalog's size (an integer, 1 to 10^{len(str(T.MAX_CUTOFF)) - 1}) or a file of "
    "its doc ids: catalog coverage at K.",
    "mlflow.experiment": "the experiment; when the `mlflow` section is left out, the spec's `name`.",
    "mlflow.tracking_uri": "the tracking URI; `--tracking-uri` and `MLFLOW_TRACKING_URI` come first.",
    "mlflow.run_name": "the evaluation run's name (each system run is then `<system> · <run_name>`).",
    "mlflow.tags": "custom tags set on every run the evaluation logs (string values).",
    "mlflow.timeout": "seconds per attempt of a request to a tracking server, in (0, 3600] (default 8).",
    "mlflow.max_retries": "retries per request, 0 to 20 (default 2).",
    "mlflow.total_timeout": "seconds for the whole logging phase, in (0, 86400] (default 600).",
}

CHOICES: dict[str, tuple[str, ...]] = {
    "data.*.format": T.FORMATS,
    **{key: c.choices for key, c in STATISTICS_CHOICES.items()},
    "metric.preset": tuple(PRESETS),
}

# The dataclass behind each section, and the fields of each that are not a key of the spec (or are another one).
SECTIONS: dict[str, Any] = {
    "": T.Spec,
    "metric": T.Metric,
    "queries": T.Queries,
    "data.*": T.Source,
    "uncertainty": T.Uncertainty,
    "comparison": T.Comparison,
    "decision": T.Decision,
    "decision.guardrails": T.Guardrails,
    "decision.guardrails.segments": T.SegmentGuardrail,
    "decision.guardrails.regressions": T.RegressionGuardrail,
    "judge": T.Judge,
    "report": T.Report,
    "companions": T.Companions,
    "mlflow": T.MlflowSection,
}
NOT_KEYS = {
    "source": "the spec file",
    "text": "the spec's text",
    "recorded": "the recorded text",
    "origin": "where each metric field came from",
    "declared": "the path as written",
}
RENAMED = {
    "qrels": "data.qrels",
    "systems": "data.systems",
    "catalog_size": "companions.catalog",
    "model": "data.systems.*.model",
    "candidates": "data.systems.*.candidates",
    "judgments": "data.judge_qrels",
}


def declared_keys() -> list[str]:
    """Every key path of the spec that types.py declares (rules apart: they are RULES)."""
    keys = []
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            if f.name in NOT_KEYS:
                continue
            key = RENAMED.get(f.name, f"{section}.{f.name}" if section else f.name)
            if key not in RULES and key not in keys:
                keys.append(key)
    return keys


def undocumented() -> list[str]:
    """The key paths of types.py and the validator's sections that FIELDS does not describe (a new field needs a
    line there)."""
    return [key for key in declared_keys() + list(TOP_REQUIRED + TOP_OPTIONAL) if key not in FIELDS]


def required(key: str) -> bool:
    """Whether parse_spec refuses a complete spec without ``key`` (a dotted path; ``data.*`` keys: of a source)."""
    if key == "data.systems.*.model":
        return True  # without it the mapping is a source, not a model system
    raw = copy.deepcopy(COMPLETE)
    if "*" in key:  # a key of a source, or of a model system
        systems = raw["data"]["systems"]
        systems["b"] = {"path": "b.parquet", "format": "parquet", "columns": {"score": "s"}}
        systems["c"] = {"model": "models:/ranker/1", "candidates": "c.parquet"}
        last = key.split(".")[-1]
        node = systems["c"] if last in systems["c"] else systems["b"]
    else:
        *parents, last = key.split(".")
        node = raw
        for part in parents:
            node = node[part]
    if last not in node:
        return False  # not in the complete form (a Delta table's version: required with format delta only)
    del node[last]
    try:
        parse_spec(raw)
    except SpecError as exc:
        return "missing required key" in exc.message
    return False


# --------------------------------------------------------------------------- rendering


def _code(value: Any) -> str:
    return f"`{value}`"


def _rule_rows(rule: Rule) -> list[tuple[str, str]]:
    """(value as written, its words) for each entry of the rule's words (without the value they may start with)."""
    rows = []
    for entry, words in rule.words_of.items():
        words = words.removeprefix(f"{entry}: ").removeprefix("{0}: ")
        if rule.name == "gain" and entry == "table":
            rows.append(("a table `{grade: gain, ...}`", words))
        elif rule.name == "cutoffs" and entry == "k":
            rows.append((f"a positive integer K (at most 10^{len(str(T.MAX_CUTOFF)) - 1})", words.format("K")))
        elif rule.section == "queries" and entry == "path":
            rows.append(("a path", words.format("the file")))
        else:
            rows.append((_code(entry), words))
    return rows


def _alternatives(rule: Rule) -> str:
    seen: list[str] = []
    for choice in rule.choices:
        for alt in rule.alternatives(rule.parse(choice)):
            text = rule.resolve(alt)
            if text not in seen:
                seen.append(text)
    if not seen:
        return "none (this rule is not varied)"
    return ", ".join(_code(t) for t in seen)


def _rule_section(rule: Rule) -> list[str]:
    if required(rule.key):
        default = "none: required" + (" (unless `metric.preset` supplies it)" if rule.section == "metric" else "")
    else:
        default = f"{_code(rule.raw(None) if rule.raw(None) is not None else 'null')}: {rule.words(None)}"
    out = [f"### `{rule.key}`", "", f"Default: {default}.", "", "| value | meaning |", "| --- | --- |"]
    out += [f"| {value} | {words} |" for value, words in _rule_rows(rule)]
    out += ["", f"`report.sensitivity` recomputes under: {_alternatives(rule)}.", ""]
    return out


def _field_rows(keys: list[str]) -> list[str]:
    """A table of keys: whether each is required, its choices (a column only where some key has them), its meaning."""
    with_choices = any(key in CHOICES for key in keys)
    out = ["| key | required |" + (" values |" if with_choices else "") + " meaning |"]
    out.append("| --- | --- |" + (" --- |" if with_choices else "") + " --- |")
    for key in keys:
        choices = f" {', '.join(_code(c) for c in CHOICES[key])} |" if key in CHOICES else " |" if with_choices else ""
        out.append(f"| `{key}` | {'yes' if required(key) else 'no'} |{choices} {FIELDS[key]} |")
    return out + [""]


def _presets() -> list[str]:
    names = [r.name for r in METRIC_RULES]
    out = ["| preset | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names)]
    for preset in PRESETS.values():
        values = [", ".join(str(v) for v in preset.values[n]) if n == "cutoffs" else preset.values[n] for n in names]
        out.append(f"| `{preset.name}` | " + " | ".join(str(v) for v in values) + " |")
    return out + [""]


def render() -> str:
    """The markdown of the spec reference page."""
    missing = undocumented()
    if missing:
        raise RuntimeError(f"docs/gen_spec_reference.py: describe these spec keys in FIELDS: {', '.join(missing)}")
    keys = declared_keys()
    top = list(TOP_REQUIRED + TOP_OPTIONAL)

    def under(prefix: str) -> list[str]:
        return [k for k in keys if k.startswith(prefix + ".")]

    lines = [
        "# Spec reference",
        "",
        "Every key of a spec, generated when the site is built from what the package declares: the metric and "
        "query rules from `ndcg_mlflow/rules.py` (their choices and the words `ndcg-mlflow explain` prints), the "
        "presets from `ndcg_mlflow/spec/presets.py`, the other sections from `ndcg_mlflow/spec/types.py`; whether a "
        "key is required is what the validator says. [The spec](spec.md) explains the rules in full.",
        "",
        'Unknown keys are errors (with a "did you mean"); paths are relative to the spec file.',
        "",
        "## Sections",
        "",
        *_field_rows(top),
        "## `metric`",
        "",
        *_field_rows(under("metric")),
        "### Presets",
        "",
        "The fields each `metric.preset` fills ([Presets and explain](presets.md) says what each reproduces):",
        "",
        *_presets(),
    ]
    for rule in METRIC_RULES:
        lines += _rule_section(rule)
    lines += ["## `queries`", ""]
    for rule in QUERY_RULES:
        lines += _rule_section(rule)
    lines += ["### Other keys", "", *_field_rows(under("queries"))]
    lines += [
        "## `data`",
        "",
        *_field_rows(["data.qrels", "data.systems", "data.judge_qrels"]),
        "A source is a path, or a mapping with these keys:",
        "",
        *_field_rows([k for k in under("data.*") if not k.startswith("data.systems.")]),
        "A model system (`data.systems.<name>`, see [Registered models](models.md)) is a mapping with these keys:",
        "",
        *_field_rows(["data.systems.*.model", "data.systems.*.candidates"]),
    ]
    for section in ("uncertainty", "comparison", "decision", "judge", "report", "companions", "mlflow"):
        lines += [f"## `{section}`", "", *_field_rows(under(section))]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render())
