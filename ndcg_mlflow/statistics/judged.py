"""The statistics of an evaluation with a judge (the spec's ``judge`` section): every system's mean and every
comparison estimated from the human values of the labelled queries and the judge's values of every evaluated query,
by the declared estimator (:mod:`.judge`: PPI++, PPI or the labelled queries alone), beside the two other views
(human-only: the labelled queries alone; judge-only: every query under the judge's labels, not valid), with the
judge's bias on each comparison and the agreement of the two label sources.

The per-query values come from the engine twice (:mod:`ndcg_mlflow.engines.with_judge`): ``f`` the result's own
per-query nDCG (the judge's labels, every evaluated query), ``y`` the human labels' (NaN outside the labelled
queries). A query whose judge value is undefined (excluded by ``empty_ideal`` or ``missing_queries``) is left out
of both sides, as the other views leave it out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import EvaluationError
from ..rules import fixed_lambda, stratifies_labels
from ..spec import Spec
from . import inference as stats
from .comparisons import POWER, Analysis, correction_family, row_head, scope_weights, wins_ties_losses
from .judge import PPIEstimate, judge_bias, labelled_plan, ppi_mean, stratified_ppi_mean, weighted_kappa
from .segments import Segments

#: the form of the declared estimator's interval (statistics.judge.ppi_mean's ``interval``): each part's weighted t,
#: combined at their Welch-Satterthwaite degrees of freedom (the normal form covers too rarely on few labelled
#: queries: docs/judge.md)
FORM = "t"


@dataclass
class JudgeViews:
    """What the judged statistics produced: ``record`` (``summary.json``'s ``judge``), the ``analysis`` the
    outputs and the decision read (the declared estimator's means, intervals and comparisons) and ``intervals``
    (``(candidate, key)`` -> the declared estimator's interval of the difference, for the decision)."""

    record: dict[str, Any]
    analysis: Analysis
    intervals: dict[tuple[str, str], tuple[float, float, float]] = field(default_factory=dict)
    estimates: dict[tuple[str, str, str | None], float] = field(default_factory=dict)  # (system, key, segment)


def _view(e: PPIEstimate | Any) -> dict[str, float]:
    return {"estimate": e.estimate, "ci_low": e.ci_low, "ci_high": e.ci_high}


def judge_only(f: np.ndarray, w: np.ndarray, confidence: float) -> dict[str, float]:
    """The mean of the judge's values over every query with its weighted t interval: what treating the judge's
    labels as truth gives (not valid: the judge's bias is not corrected)."""
    if f.size == 0:
        nan = float("nan")
        return {"estimate": nan, "ci_low": nan, "ci_high": nan}
    lo, hi, _ = stats.t_interval(f, w, confidence)
    return {"estimate": float(stats.weighted_mean(f, w)), "ci_low": lo, "ci_high": hi}


class _Estimator:
    """The declared estimator over one set of queries: ``labelled`` and ``valid`` masks, the weights, and the
    strata (segments) when the labelled queries were drawn within them."""

    def __init__(self, spec: Spec, labelled: np.ndarray, weights: np.ndarray, strata: np.ndarray | None) -> None:
        judge = spec.judge
        assert judge is not None and spec.uncertainty is not None
        self.lam = fixed_lambda(judge.estimator)
        self.confidence = spec.uncertainty.confidence
        self.labelled = labelled
        self.weights = weights
        self.strata = strata if stratifies_labels(judge.labelled_queries) else None

    def split(self, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.labelled & valid, ~self.labelled & valid

    def declared(self, y: np.ndarray, f: np.ndarray, valid: np.ndarray) -> Any:
        """The declared estimator's estimate (a PPIEstimate, or a StratifiedPPIEstimate by segment)."""
        lab, unl = self.split(valid)
        w = self.weights
        if self.strata is None:
            return ppi_mean(
                y[lab], f[lab], f[unl], w_l=w[lab], w_u=w[unl], confidence=self.confidence, lam=self.lam, interval=FORM
            )
        est = stratified_ppi_mean(
            y[lab],
            f[lab],
            f[unl],
            self.strata[lab],
            self.strata[unl],
            w_l=w[lab],
            w_u=w[unl],
            confidence=self.confidence,
            lam=self.lam,
            interval=FORM,
        )
        if est.unlabelled_strata:
            first = est.unlabelled_strata[0]
            raise EvaluationError(
                f"segment {str(first)!r} has no human-labelled query with a value (of {int(unl.sum())} unlabelled "
                f"queries in all): with judge.labelled_queries: segments every segment needs some; label some of its "
                f"queries, or set labelled_queries: random."
            )
        return est

    def plan(self, y: np.ndarray, f: np.ndarray, valid: np.ndarray, spec: Spec) -> dict[str, Any]:
        """The labelled queries the decision's rule needs at :data:`~ndcg_mlflow.statistics.comparisons.POWER`
        (:func:`~ndcg_mlflow.statistics.judge.labelled_plan`, the judge-only queries held fixed): ``{"labelled_needed",
        "labelled_plan"}``. Labelled queries drawn by segment are not planned (reason ``stratified``): the plan is
        made for one random sample."""
        assert spec.decision is not None
        lab, unl = self.split(valid)
        w = self.weights
        plan = labelled_plan(
            y[lab],
            f[lab],
            f[unl],
            w_l=w[lab],
            w_u=w[unl],
            confidence=self.confidence,
            power=POWER,
            rule=spec.decision.rule,
            margin=spec.decision.margin,
            lam=self.lam,
        )
        if self.strata is not None:
            plan.update(labelled_needed=None, reason={"kind": "stratified"})
        return {"labelled_needed": plan.pop("labelled_needed"), "labelled_plan": plan}

    def human_only(self, y: np.ndarray, f: np.ndarray, valid: np.ndarray) -> PPIEstimate:
        lab, unl = self.split(valid)
        w = self.weights
        return ppi_mean(
            y[lab], f[lab], f[unl], w_l=w[lab], w_u=w[unl], confidence=self.confidence, lam=0.0, interval=FORM
        )

    def entry(self, y: np.ndarray, f: np.ndarray, valid: np.ndarray) -> tuple[dict[str, Any], Any]:
        """The record of one mean or difference (its three views) and the declared estimate."""
        est = self.declared(y, f, valid)
        lab, _ = self.split(valid)
        # the labelled queries alone (its rho describes them): the declared estimate itself under human_only
        human = est if self.lam == 0 and self.strata is None else self.human_only(y, f, valid)
        out = {
            **_view(est),
            "std_error": est.se,
            "p_value": est.p_value,
            "lambda": est.lam if isinstance(est, PPIEstimate) else None,
            "rho": human.rho,
            "n_effective": est.n_effective if isinstance(est, PPIEstimate) else None,
            "n_labelled": int(lab.sum()),
            "n_unlabelled": int((valid & ~self.labelled).sum()),
            "human_only": _view(human),
            "judge_only": judge_only(f[valid], self.weights[valid], self.confidence),
        }
        if not isinstance(est, PPIEstimate):
            out["segments"] = {
                str(s): None if e is None else {**_view(e), "lambda": e.lam, "rho": e.rho}
                for s, e in zip(est.strata, est.per_stratum)
            }
        return out, est


def judged_statistics(
    result, human: dict[str, np.ndarray], labelled: np.ndarray, grades: tuple[np.ndarray, np.ndarray]
) -> JudgeViews:
    """The judged statistics of ``result`` (the judge's per-query values of every evaluated query; its spec has the
    ``judge`` section): ``human[system]`` the human per-query values aligned with ``result.query_ids`` (NaN outside
    the labelled queries), ``labelled`` the mask of the labelled queries, ``grades`` the human and judge grades of
    the documents both judged (for Cohen's weighted kappa). With ``queries.segments``, each segment's means and
    comparisons too, by the same estimator on the segment's queries (its labelled queries a random sample of the
    segment's under either ``labelled_queries``), the correction running over every comparison, overall and per
    segment, as without a judge."""
    spec: Spec = result.spec
    judge = spec.judge
    assert judge is not None and spec.uncertainty is not None
    keys = spec.metric.keys
    segs = Segments.of(result)
    scope_w = scope_weights(result, segs)
    overall = _Estimator(spec, labelled, scope_w[None], result.segments)
    scopes: list[tuple[str | None, np.ndarray, _Estimator]] = [(None, np.ones(labelled.size, dtype=bool), overall)]
    if segs is not None:
        for s, label in enumerate(segs.labels):
            scopes.append((label, segs.mask(s), _Estimator(spec, labelled, scope_w[label], None)))
    kappa = float("nan")
    if grades[0].size:  # each grade's rank among the grades seen: kappa's weights read the grades' order
        _, codes = np.unique(np.concatenate(grades), return_inverse=True)
        kappa = weighted_kappa(codes[: grades[0].size], codes[grades[0].size :])
    record: dict[str, Any] = {
        "estimator": judge.estimator,
        "labelled_queries": judge.labelled_queries,
        "name": judge.name,
        "n_labelled": int(labelled.sum()),
        "n_unlabelled": int((~labelled).sum()),
        "confidence": spec.uncertainty.confidence,
        "interval": FORM,
        "agreement": {"weighted_kappa": kappa, "kappa_weights": "quadratic", "n_documents": int(grades[0].size)},
        "systems": {},
        "comparisons": [],
    }
    if segs is not None:
        record["segments"] = {label: {"systems": {}, "comparisons": []} for label in segs.labels}
    analysis = Analysis()
    views = JudgeViews(record, analysis)
    for scope, within, est in scopes:
        into = record if scope is None else record["segments"][scope]
        w = est.weights
        for name, sr in result.systems.items():
            into["systems"][name] = {}
            for j, key in enumerate(keys):
                f, y = sr.result.ndcg[:, j], human[name][:, j]
                valid = ~np.isnan(f) & within
                entry, e = est.entry(y, f, valid)
                into["systems"][name][key] = entry
                views.estimates[(name, key, scope)] = e.estimate
                figures = {
                    "ci_low": e.ci_low,
                    "ci_high": e.ci_high,
                    "std_error": e.se,
                    "n_eff": stats.effective_n(w[valid]),
                }
                if scope is None:
                    analysis.intervals.setdefault(name, {})[key] = figures
                else:
                    shown = {"mean": e.estimate, **figures, "n": int(valid.sum())}
                    analysis.segments.setdefault(scope, {}).setdefault(name, {})[key] = shown
    comparison = spec.comparison
    if comparison is None:
        return views
    base_f = result.systems[comparison.baseline].result.ndcg
    base_y = human[comparison.baseline]
    rows, primary, members = [], [], []
    for scope, within, est in scopes:
        into = record if scope is None else record["segments"][scope]
        w = est.weights
        for name, sr in result.systems.items():
            if name == comparison.baseline:
                continue
            for j, key in enumerate(keys):
                valid = ~np.isnan(base_f[:, j]) & ~np.isnan(sr.result.ndcg[:, j]) & within
                df = sr.result.ndcg[:, j] - base_f[:, j]
                dy = human[name][:, j] - base_y[:, j]
                entry, e = est.entry(dy, df, valid)
                lab = labelled & valid
                bias = judge_bias(dy[lab], df[lab], w_l=w[lab], confidence=spec.uncertainty.confidence)
                into["comparisons"].append(
                    {
                        "candidate": name,
                        "baseline": comparison.baseline,
                        "key": key,
                        **entry,
                        "judge_bias": {
                            "estimate": bias.estimate,
                            "ci_low": bias.ci_low,
                            "ci_high": bias.ci_high,
                            "p_value": bias.p_value,
                        },
                        **(
                            est.plan(dy, df, valid, spec)
                            if scope is None and spec.decision is not None and key == spec.decision.key
                            else {}
                        ),
                    }
                )
                d_lab = dy[lab]
                base_mean = views.estimates[(comparison.baseline, key, scope)]
                row = row_head(comparison, name, key, scope, int(valid.sum()))
                row.update(
                    {
                        "baseline_mean": base_mean,
                        "candidate_mean": views.estimates[(name, key, scope)],
                        "delta": e.estimate,
                        "ci_low": e.ci_low,
                        "ci_high": e.ci_high,
                        "std_error": e.se,
                        "p_judged": e.p_value,
                        "relative_delta": e.estimate / base_mean if base_mean else float("nan"),
                        "effect_size_dz": stats.effect_size_dz(d_lab, w[lab]) if d_lab.size else float("nan"),
                        **wins_ties_losses(d_lab, comparison.tie_tolerance),
                    }
                )
                if scope is None:
                    analysis.paired[(name, key)] = (d_lab, w[lab])
                    views.intervals[(name, key)] = (e.ci_low, e.ci_high, e.df)
                rows.append(row)
                primary.append(e.p_value)
                members.append((name, key, scope))
    corrected = stats.correct(primary, comparison.correction) if primary else np.empty(0)
    for row, p in zip(rows, corrected):
        row["p_corrected"] = float(p)
        row["corrected_test"] = judge.estimator
        row["correction"] = comparison.correction
    analysis.comparisons = [r for r in rows if "segment" not in r]
    analysis.segment_comparisons = [r for r in rows if "segment" in r]
    analysis.correction_family = correction_family(
        comparison,
        len(result.systems) - 1,
        len(keys),
        0 if segs is None else len(segs.labels),
        members,
        primary,
        judge.estimator,
    )
    return views
