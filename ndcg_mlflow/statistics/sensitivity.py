"""Which declared choices move the result: every alternative of each rule, one rule at a time.

Each system's mean and each comparison's difference (candidate minus baseline,
on the queries valid for both) are recomputed with one metric field changed and
the others as declared. The table is built from each system's per-query nDCG under
each alternative (:data:`AlternativeNdcg`), computed next to the declared numbers by
:func:`ndcg_mlflow.queries.score_queries` on each system's joined rows (the local engine
once per system, one run in memory at a time; the Spark engine per query bucket) and
collected by :func:`collect_alternatives`; or recomputed from the joined rows an
evaluation kept (``keep_data``, :func:`alternative_ndcg`). Either way the means and
differences are formed here, on the driver, from the same arrays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..rules import METRIC_RULES, cutoff_label
from ..spec import Metric, Spec
from .inference import nan_weighted_mean

SIGN_TOLERANCE = 1e-12


def alternatives(metric: Metric) -> list[tuple[str, str, Metric]]:
    """(rule, alternative label, metric) for every alternative of every rule; the declared one first."""
    out: list[tuple[str, str, Metric]] = [("declared", "as declared", metric)]
    for rule in METRIC_RULES:  # the alternatives are declared in ndcg_mlflow.rules
        for value in rule.alternatives(getattr(metric, rule.name)):
            out.append((rule.name, rule.resolve(value), metric.replace(**{rule.name: value})))
    return out


AlternativeNdcg = Mapping[tuple[str, str], Mapping[str, np.ndarray]]
"""Per-query nDCG under each alternative: ``{(rule, alternative label): {system: array}}``, each array of shape
(evaluated queries, cutoffs) in the evaluated-query order, NaN where a query has no value (and everywhere when
the alternative's numbers overflow a float)."""


def alternative_ndcg(result) -> dict[tuple[str, str], dict[str, np.ndarray]]:
    """Each system's per-query nDCG under every alternative (:func:`alternatives`), recomputed from the joined
    rows the evaluation kept (``result.prepared``, ``keep_data``). An alternative whose gains or ratios overflow a
    float (:class:`~ndcg_mlflow.kernel.NonFiniteError`, e.g. 2^g - 1 of a grade >= 1024) is NaN for every system:
    undefined."""
    from ..kernel import NonFiniteError
    from ..queries import ndcg_under

    if not result.prepared:
        raise ValueError("sensitivity needs the evaluation's data: evaluate(..., engine=Local(keep_data=True))")
    nq, nc = len(result.query_ids), len(result.spec.metric.cutoffs)
    out: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    for rule, alt, metric in alternatives(result.spec.metric):
        try:
            ndcg = {name: ndcg_under(metric, prep, result.catalog) for name, prep in result.prepared.items()}
        except NonFiniteError:  # this alternative's gains overflow a float
            ndcg = {name: np.full((nq, nc), np.nan) for name in result.prepared}  # undefined
        out[(rule, alt)] = ndcg
    return out


def collect_alternatives(
    alts: Sequence[tuple[str, str, Metric]],
    systems: Mapping[str, Any],
    computed: dict[str, tuple[dict[tuple[str, str], np.ndarray], set[tuple[str, str]]]],
) -> tuple[dict[tuple[str, str], dict[str, np.ndarray]], list[dict[str, Any]]]:
    """Every system's per-query nDCG under each alternative (:data:`AlternativeNdcg`), from what the engine
    computed on the joined rows (:func:`ndcg_mlflow.queries.score_queries`; ``computed``: per system, the arrays
    and the alternatives that overflowed, in some bucket on Spark). The declared numbers are the systems' own. An
    alternative that overflowed for some system is NaN for every system (undefined); one some system's rows could
    not give (on Spark, :func:`ndcg_mlflow.engines.spark.runs.computable`) is left out of the table: each such
    alternative is returned beside the arrays (its ``rule``, ``alternative`` and the ``systems`` lacking it), for
    the result's ``sensitivity_left_out`` (said in the notes: :func:`ndcg_mlflow.render.words.left_out_note`)."""
    out: dict[tuple[str, str], dict[str, np.ndarray]] = {
        ("declared", "as declared"): {name: sr.result.ndcg for name, sr in systems.items()}
    }
    left_out: list[dict[str, Any]] = []
    overflowed = set().union(*(over for _, over in computed.values()))
    for rule, alt, _ in alts:
        key = (rule, alt)
        lacking = [name for name in systems if key not in computed[name][0]]
        if lacking:
            left_out.append({"rule": rule, "alternative": alt, "systems": lacking})
            continue
        if key in overflowed:
            out[key] = {name: np.full(sr.result.ndcg.shape, np.nan) for name, sr in systems.items()}
        else:
            out[key] = {name: computed[name][0][key] for name in systems}
    return out, left_out


def sensitivity(result, ndcg_by_alternative: AlternativeNdcg | None = None) -> Any:
    """A DataFrame: one row per (rule, alternative, system or comparison, cutoff).

    Columns: rule, alternative, kind (``system`` / ``comparison``), system, baseline,
    cutoff, declared, value, change, sign_flip (comparisons: the difference changes
    sign), n_used (queries in the mean or pairs in the difference). A mean with no query left in it
    (every query excluded under that alternative) is NaN, and so is its change: undefined, never 0.

    ``ndcg_by_alternative`` (:data:`AlternativeNdcg`) gives the per-query numbers of every alternative, as an
    engine computed them; by default they are recomputed from the kept rows (:func:`alternative_ndcg`). An
    alternative absent from it (one the engine could not compute) has no row; the declared one must be there.
    """
    if ndcg_by_alternative is None:
        ndcg_by_alternative = alternative_ndcg(result)
    return sensitivity_table(result.spec, result.relative_weights, ndcg_by_alternative)


def sensitivity_table(spec: Spec, weights: np.ndarray, ndcg_by_alternative: AlternativeNdcg) -> Any:
    """The table of :func:`sensitivity` from the per-query numbers of each alternative and the weights (over
    the largest one: same ratios, no overflow or underflow)."""
    import pandas as pd

    w = weights
    baseline = spec.comparison.baseline if spec.comparison else None
    labels = [cutoff_label(k) for k in spec.metric.cutoffs]
    rows: list[dict[str, Any]] = []
    declared_sys: dict[tuple[str, str], float] = {}
    declared_cmp: dict[tuple[str, str], float] = {}
    if ("declared", "as declared") not in ndcg_by_alternative:
        raise ValueError("sensitivity needs the per-query numbers as declared")
    for rule, alt, _ in alternatives(spec.metric):
        ndcg = ndcg_by_alternative.get((rule, alt))
        if ndcg is None:  # not computed by the engine (said in the result's notes)
            continue
        for name, x in ndcg.items():
            for j, label in enumerate(labels):
                ok = ~np.isnan(x[:, j])
                value = nan_weighted_mean(x[:, j], w)
                if rule == "declared":
                    declared_sys[(name, label)] = value
                base_value = declared_sys[(name, label)]
                rows.append(
                    {
                        "rule": rule,
                        "alternative": alt,
                        "kind": "system",
                        "system": name,
                        "baseline": "",
                        "cutoff": label,
                        "declared": base_value,
                        "value": value,
                        "change": value - base_value,
                        "sign_flip": False,
                        "n_used": int(ok.sum()),
                    }
                )
        if baseline is None:
            continue
        b = ndcg[baseline]
        for name, x in ndcg.items():
            if name == baseline:
                continue
            for j, label in enumerate(labels):
                d = x[:, j] - b[:, j]  # NaN where either is undefined: the pairs valid for both are averaged
                ok = ~np.isnan(d)
                value = nan_weighted_mean(d, w)
                if rule == "declared":
                    declared_cmp[(name, label)] = value
                base_value = declared_cmp[(name, label)]
                flip = bool(
                    abs(value) > SIGN_TOLERANCE
                    and abs(base_value) > SIGN_TOLERANCE
                    and np.sign(value) != np.sign(base_value)
                )
                rows.append(
                    {
                        "rule": rule,
                        "alternative": alt,
                        "kind": "comparison",
                        "system": name,
                        "baseline": baseline,
                        "cutoff": label,
                        "declared": base_value,
                        "value": value,
                        "change": value - base_value,
                        "sign_flip": flip,
                        "n_used": int(ok.sum()),
                    }
                )
    return pd.DataFrame(rows)
