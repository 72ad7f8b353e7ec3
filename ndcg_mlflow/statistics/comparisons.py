"""Uncertainty and paired comparison of evaluated systems, as the spec declares them.

* per system and key: bootstrap interval of the weighted mean, its standard error
  (the standard deviation of the bootstrap distribution), and the effective number
  of queries (sum w)^2 / sum w^2;
* per candidate against the baseline and key, on the queries valid for both: the
  paired difference with its interval (the same resampled queries for both
  systems), randomization and t-test p-values, p-values corrected over the family
  of all (candidate, key) comparisons, relative difference, effect size d_z,
  win / tie / loss counts, tail risk (:mod:`ndcg_mlflow.statistics.risk`: URisk and TRisk at
  each declared alpha; the share of queries that regressed by more than a
  regressions guardrail's delta, with its Clopper-Pearson interval on n_eff) and
  planning figures (:mod:`ndcg_mlflow.statistics.planning`: the minimum detectable difference
  at 80% power; with a decision, the queries needed to decide its margin);
* the same per segment when the spec declares segments (:mod:`ndcg_mlflow.statistics.segments`),
  the correction then running over every comparison, overall and per segment;
* the largest per-query wins and losses, with each side's top documents.

Series that share the same valid queries share one resampling; the resampled
indices depend only on the seed and on those queries' ids (:func:`stats.resample_seed`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..result import relative
from ..rules import corrected_test, cutoff_label, key_label, randomizes, studentizes, t_tests
from ..spec import Comparison, Uncertainty
from . import inference as stats
from . import planning
from .risk import regressed_share, risk_entry
from .segments import Segments, consistency, stratified_indices

POWER = 0.8  # the power of the reported minimum detectable difference and of the queries needed
#: the range of each resampled series' mean, which its interval never leaves: a system's mean nDCG in [0, 1], a
#: difference of two nDCG means in [-1, 1]
RANGES = {"system": (0.0, 1.0), "delta": (-1.0, 1.0)}


@dataclass
class Analysis:
    intervals: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    wins_losses: list[dict[str, Any]] = field(default_factory=list)
    distributions: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)  # (candidate, key) -> deltas
    # (candidate, key) -> the per-query differences and weights on the queries valid for both (the decision's input)
    paired: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    # with declared segments (ndcg_mlflow.statistics.segments): segment -> system -> key -> mean, interval, n, n_eff
    segments: dict[str, dict[str, dict[str, dict[str, float]]]] = field(default_factory=dict)
    segment_comparisons: list[dict[str, Any]] = field(default_factory=list)
    segment_paired: dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    consistency: list[dict[str, Any]] = field(default_factory=list)
    # the scopes (None: all queries, else a segment's label) whose resampled queries fall short of
    # stats.STUDENTIZED_MIN_N_EFF effective ones for a studentized interval, each with its smallest n_eff
    too_few: dict[str | None, float] = field(default_factory=dict)
    # the family the correction runs over (correction_family): its size, test, method, members and what it spans
    correction_family: dict[str, Any] | None = None


_NAN_FIELDS = (
    "baseline_mean",
    "candidate_mean",
    "delta",
    "ci_low",
    "ci_high",
    "std_error",
    "p_randomization",
    "p_t_test",
    "relative_delta",
    "effect_size_dz",
)


def _mask_token(mask: np.ndarray) -> bytes:
    """A dictionary key of a valid-query mask: series on the same queries share one resampling."""
    return np.packbits(mask).tobytes() + mask.size.to_bytes(8, "little")


def scope_weights(result, segs: Segments | None) -> dict[str | None, np.ndarray]:
    """The weights each scope's figures are computed with: overall (``None``) the evaluation's weights over the
    largest one; in a segment, the segment's weights over the segment's largest one (zero outside it), which are
    exactly the weights of the same spec restricted to the segment's queries. The same ratios either way, but
    not the same bits: a resampled mean or an estimate summed from other bits rounds differently, and a BCa
    interval's bias correction counts the resampled means below the estimate, which a rounding moves."""
    out: dict[str | None, np.ndarray] = {None: result.relative_weights}
    if segs is not None:
        for s, label in enumerate(segs.labels):
            sm = segs.mask(s)
            w = np.zeros(sm.size)
            w[sm] = relative(result.weights[sm])
            out[label] = w
    return out


class _Resampling:
    """The bootstrap jobs of one analysis: every series resampled on the same queries (the same valid-query
    mask, the same scope's weights and the same strata) shares one resampling, seeded by the seed and those
    queries' ids."""

    def __init__(self, result, uncertainty: Uncertainty, weights: dict[str | None, np.ndarray]) -> None:
        self.ids = result.query_ids
        self.weights = weights
        self.unc = uncertainty
        self.jobs: dict[bytes, tuple[np.ndarray, str | None, np.ndarray | None, list[tuple[Any, np.ndarray]]]] = {}
        self.out: dict[Any, tuple[float, float, float, np.ndarray]] = {}
        # studentized: the scopes (None overall, else a segment) resampled with too few effective queries, and
        # the smallest n_eff of each
        self.too_few: dict[str | None, float] = {}

    def add(
        self,
        mask: np.ndarray,
        label: Any,
        series: np.ndarray,
        strata: np.ndarray | None = None,
        scope: str | None = None,
    ) -> None:
        token = _mask_token(mask) + (b"S" if strata is not None else b"") + repr(scope).encode("utf-8")
        self.jobs.setdefault(token, (mask, scope, strata, []))[3].append((label, series))

    def run(self) -> None:
        unc = self.unc
        for mask, scope, strata, series in self.jobs.values():
            ids = self.ids[mask]
            w = self.weights[scope][mask]
            x = np.column_stack([s[mask] for _, s in series])
            chunks = None
            if strata is not None:
                chunks = stratified_indices(unc.seed, ids, strata[mask], unc.resamples)
            rng = np.random.default_rng(stats.resample_seed(unc.seed, ids))
            boot = stats.bootstrap_means(
                x,
                w,
                resamples=unc.resamples,
                rng=rng,
                studentized=studentizes(unc.method),
                index_chunks=chunks,
            )
            bounds = np.array([RANGES[label[0]] for label, _ in series]).T
            lows, highs = stats.interval(
                boot, x, w, confidence=unc.confidence, method=unc.method, bounds=(bounds[0], bounds[1])
            )
            ses = stats.standard_error(boot, x)
            if studentizes(unc.method) and not stats.reaches_n_eff(w, stats.STUDENTIZED_MIN_N_EFF):
                self.too_few[scope] = min(self.too_few.get(scope, np.inf), stats.effective_n(w))
            for c, (label, _) in enumerate(series):
                self.out[label] = (float(lows[c]), float(highs[c]), float(ses[c]), boot.dist[:, c])

    def get(self, label: Any) -> tuple[float, float, float, np.ndarray | None]:
        return self.out.get(label, (np.nan, np.nan, np.nan, None))


def analyze(result, uncertainty: Uncertainty | None, comparison: Comparison | None, decision=None) -> Analysis:
    """Statistics for an :class:`~ndcg_mlflow.result.EvaluationResult` (nothing when not declared); per
    segment too when the result has segments (:mod:`ndcg_mlflow.statistics.segments`). ``decision``: the spec's, for the
    planning figures and the regressions guardrail's share."""
    out = Analysis()
    if uncertainty is None:
        return out
    keys = result.spec.metric.keys
    names = list(result.systems)
    segs = Segments.of(result)
    # weights over the largest (same ratios, no overflow or underflow), per scope: overall and each segment
    scope_w = scope_weights(result, segs)
    w_all = scope_w[None]
    strata = segs.codes if segs is not None and uncertainty.stratify else None
    seg_masks = [(label, segs.mask(s)) for s, label in enumerate(segs.labels)] if segs is not None else []
    boot = _Resampling(result, uncertainty, scope_w)

    for name in names:
        x = result.systems[name].result.ndcg
        for j, key in enumerate(keys):
            mask = ~np.isnan(x[:, j])
            if mask.any():
                boot.add(mask, ("system", name, key, None), x[:, j], strata)
            for label, sm in seg_masks:
                if (mask & sm).any():
                    boot.add(mask & sm, ("system", name, key, label), x[:, j], scope=label)
    pairs: list[tuple[str, str]] = []
    pair_masks: list[np.ndarray] = []  # the queries valid for both systems of each pair
    if comparison is not None:
        base = result.systems[comparison.baseline].result.ndcg
        for name in names:
            if name == comparison.baseline:
                continue
            cand = result.systems[name].result.ndcg
            for j, key in enumerate(keys):
                mask = ~np.isnan(base[:, j]) & ~np.isnan(cand[:, j])
                pairs.append((name, key))
                pair_masks.append(mask)
                d = cand[:, j] - base[:, j]
                scoped: list[tuple[str | None, np.ndarray, np.ndarray | None]] = [(None, mask, strata)]
                scoped += [(lb, mask & sm, None) for lb, sm in seg_masks]
                for where, m, st in scoped:
                    if m.any():
                        boot.add(m, ("delta", name, key, where), d, st, where)
    boot.run()
    out.too_few = dict(boot.too_few)

    for name in names:
        out.intervals[name] = {}
        x = result.systems[name].result.ndcg
        for j, key in enumerate(keys):
            mask = ~np.isnan(x[:, j])
            lo, hi, se, _ = boot.get(("system", name, key, None))
            out.intervals[name][key] = {
                "ci_low": lo,
                "ci_high": hi,
                "std_error": se,
                "n_eff": stats.effective_n(w_all[mask]),
            }
            for label, sm in seg_masks:
                m = mask & sm
                lo, hi, se, _ = boot.get(("system", name, key, label))
                out.segments.setdefault(label, {}).setdefault(name, {})[key] = {
                    "mean": stats.nan_weighted_mean(x[sm, j], scope_w[label][sm]),
                    "ci_low": lo,
                    "ci_high": hi,
                    "std_error": se,
                    "n": int(m.sum()),
                    "n_eff": stats.effective_n(scope_w[label][m]),
                }

    if comparison is None:
        return out
    base = result.systems[comparison.baseline].result.ndcg
    scopes: list[tuple[str | None, np.ndarray | None]] = [(None, None), *seg_masks]
    jobs = [
        (name, key, scope, mask if within is None else mask & within)
        for scope, within in scopes
        for (name, key), mask in zip(pairs, pair_masks)
    ]
    randomization = (
        _randomization(result, comparison, uncertainty, jobs, scope_w) if randomizes(comparison.test) else {}
    )
    primary = []
    rows = []
    for name, key, scope, mask in jobs:
        j = keys.index(key)
        cand = result.systems[name].result.ndcg
        w = scope_w[scope][mask]
        d = cand[mask, j] - base[mask, j]
        if scope is None:
            out.paired[(name, key)] = (d, w)
        else:
            out.segment_paired[(name, key, scope)] = (d, w)
        row = row_head(comparison, name, key, scope, int(mask.sum()))
        if mask.any():
            base_mean = float(stats.weighted_mean(base[mask, j], w))
            delta = float(stats.weighted_mean(d, w))
            lo, hi, se, dist = boot.get(("delta", name, key, scope))
            if scope is None and dist is not None:
                out.distributions[(name, key)] = dist
            p_rand = p_t = float("nan")
            if (name, key, scope) in randomization:
                p_rand, exact = randomization[(name, key, scope)]
                row["randomization_exact"] = exact
            if t_tests(comparison.test):
                p_t = stats.paired_t_test(d, w)
            row.update(
                {
                    "baseline_mean": base_mean,
                    "candidate_mean": float(stats.weighted_mean(cand[mask, j], w)),
                    "delta": delta,
                    "ci_low": lo,
                    "ci_high": hi,
                    "std_error": se,
                    "p_randomization": p_rand,
                    "p_t_test": p_t,
                    "relative_delta": delta / base_mean if base_mean != 0 else float("nan"),
                    "effect_size_dz": stats.effect_size_dz(d, w),
                    **wins_ties_losses(d, comparison.tie_tolerance),
                }
            )
        else:
            row.update({k: float("nan") for k in _NAN_FIELDS})
            row.update({"wins": 0, "ties": 0, "losses": 0})
        row.update(_risk_and_plan(d, w, comparison, uncertainty, decision))
        primary.append(row["p_randomization"] if randomizes(comparison.test) else row["p_t_test"])
        rows.append(row)
    corrected = stats.correct(primary, comparison.correction)
    test_name = corrected_test(comparison.test)
    for row, p in zip(rows, corrected):
        row["p_corrected"] = float(p)
        row["corrected_test"] = test_name
        row["correction"] = comparison.correction
    out.comparisons = rows[: len(pairs)]
    out.segment_comparisons = rows[len(pairs) :]
    out.correction_family = correction_family(
        comparison, len(names) - 1, len(keys), len(seg_masks), [(n, k, lb) for n, k, lb, _ in jobs], primary, test_name
    )
    if seg_masks:
        # a segment's paired weight as a share of the evaluation's: the overall weights (a segment's own weights
        # over its largest tell nothing of how much weight it holds)
        held = {(n, k, lb): float(w_all[m].sum()) for n, k, lb, m in jobs}
        for row in out.comparisons:
            parts = [
                (c["segment"], c["delta"], held[(c["candidate"], c["key"], c["segment"])])
                for c in out.segment_comparisons
                if c["candidate"] == row["candidate"] and c["key"] == row["key"] and c["n_paired"] > 0
            ]
            out.consistency.append(consistency(row["candidate"], row["key"], row["delta"], parts))
    out.wins_losses = _wins_losses(result, comparison, pairs)
    return out


def row_head(comparison: Comparison, candidate: str, key: str, scope: str | None, n_paired: int) -> dict[str, Any]:
    """The first entries of a comparison's row (``comparisons.csv``'s first columns): its segment (``scope``; none
    overall), the two systems, the key and its cutoff, and how many queries were paired."""
    row: dict[str, Any] = {} if scope is None else {"segment": scope}
    row.update(
        {
            "baseline": comparison.baseline,
            "candidate": candidate,
            "key": key,
            "cutoff": key_label(key),
            "n_paired": n_paired,
        }
    )
    return row


def wins_ties_losses(d: np.ndarray, tolerance: float) -> dict[str, int]:
    """The queries a candidate wins, ties and loses: a difference within ``tolerance`` of 0 is a tie."""
    wins = int(np.count_nonzero(d > tolerance))
    losses = int(np.count_nonzero(d < -tolerance))
    return {"wins": wins, "ties": int(d.size) - wins - losses, "losses": losses}


def correction_family(
    comparison: Comparison,
    candidates: int,
    cutoffs: int,
    segments: int,
    members: list[tuple[str, str, str | None]],
    pvalues: list[float],
    test: str,
) -> dict[str, Any]:
    """The family the declared correction runs over, whatever engine computed it: every (candidate, key, segment
    or None) in ``members``, each with its p-value of ``test`` in ``pvalues`` (NaN: none, counted as p = 1 by
    :func:`stats.correct`), and what it spans (the ``candidates`` against the ``baseline``, the ``cutoffs``, the
    ``segments``), which :func:`ndcg_mlflow.render.words.family_record` writes as summary.json's
    ``correction_family`` with the sentence that states it."""
    undefined = int(np.count_nonzero(np.isnan(np.asarray(pvalues, dtype=np.float64))))
    return {
        "size": len(members),
        "correction": comparison.correction,
        "test": test,
        # members without a p-value stay in the family, counted as p = 1 (stats.correct)
        "without_p_value": undefined,
        "members": [{"candidate": n, "key": k, "segment": lb} for n, k, lb in members],
        "baseline": comparison.baseline,
        "candidates": candidates,
        "cutoffs": cutoffs,
        "segments": segments,
    }


def _risk_and_plan(d, w, comparison: Comparison, uncertainty: Uncertainty, decision) -> dict:
    """The comparison's tail risk (URisk and TRisk at each declared alpha), with a regressions guardrail its share
    of regressed queries and that share's interval (:func:`~ndcg_mlflow.statistics.risk.regressed_share`, at the spec's
    confidence), and its planning figures: the minimum detectable difference at 80% power and, with a decision,
    the queries needed to decide its margin, the bounds on sigma and the weights' spread it was planned at
    (:func:`~ndcg_mlflow.planning.plan_bounds`, at their level) and why there is no plan (``plan_reason``)."""
    out: dict[str, Any] = risk_entry(d, w, comparison.risk_alpha)
    guard = decision.guardrails.regressions if decision is not None else None
    if guard is not None:
        out["regressed_share"] = regressed_share(d, w, guard.delta, uncertainty.confidence)
    out["mde"] = planning.mde(d, w, uncertainty.confidence, POWER)
    out["mde_power"] = POWER
    if decision is not None:
        plan = planning.decision_plan(d, w, uncertainty.confidence, POWER, decision.rule, decision.margin)
        out["queries_needed"] = plan["queries_needed"]
        out["detectable"] = plan["detectable"]
        # what the plan assumed beyond these queries (the bounds at their level), and why there is none
        out["plan_sd_bound"] = plan["sd_bound"]
        out["plan_weights_bound"] = plan["weights_bound"]
        out["plan_bound_level"] = plan["sd_level"]
        out["plan_reason"] = plan["reason"]
    return out


def planned_detection(result, spec) -> list[tuple[str, int, float]]:
    """Before any statistics (``validate``): each candidate's paired queries at the decision's key and their
    minimum detectable difference at 80% power, ``(candidate, n, mde)``, which
    :func:`~ndcg_mlflow.render.words.undetectable_message` warns of when the non-inferiority margin is below it."""
    if spec.comparison.baseline not in result.systems:  # a model, scored only by 'run'
        return []
    j = spec.metric.keys.index(spec.decision.key)
    base = result.systems[spec.comparison.baseline].result.ndcg[:, j]
    out = []
    for name, sr in result.systems.items():
        if name == spec.comparison.baseline:
            continue
        x = sr.result.ndcg[:, j]
        mask = ~np.isnan(base) & ~np.isnan(x)
        mde = planning.mde(x[mask] - base[mask], result.relative_weights[mask], spec.uncertainty.confidence, POWER)
        out.append((name, int(mask.sum()), mde))
    return out


def _randomization(
    result,
    comparison: Comparison,
    uncertainty: Uncertainty,
    jobs: list[tuple[str, str, str | None, np.ndarray]],
    scope_w: dict[str | None, np.ndarray],
) -> dict[tuple[str, str, str | None], tuple[float, bool]]:
    """Randomization p-values of every comparison (overall and per segment, with that scope's weights);
    comparisons on the same queries share one stream of sign vectors (seeded by the seed and those queries'
    ids), drawn once."""
    keys = list(result.spec.metric.keys)
    base = result.systems[comparison.baseline].result.ndcg
    groups: dict[bytes, list[tuple[tuple[str, str, str | None], np.ndarray, np.ndarray]]] = {}
    for name, key, label, mask in jobs:
        j = keys.index(key)
        cand = result.systems[name].result.ndcg
        if mask.any():
            token = _mask_token(mask) + repr(label).encode("utf-8")
            groups.setdefault(token, []).append(((name, key, label), mask, cand[:, j] - base[:, j]))
    out: dict[tuple[str, str, str | None], tuple[float, bool]] = {}
    for items in groups.values():
        (_, _, scope), mask, _ = items[0]
        d = np.column_stack([diff[mask] for _, _, diff in items])
        rng = np.random.default_rng(stats.resample_seed(uncertainty.seed, ["randomization", *result.query_ids[mask]]))
        p, exact = stats.randomization_tests(d, scope_w[scope][mask], resamples=uncertainty.resamples, rng=rng)
        for (which, _, _), pv in zip(items, p):
            out[which] = (float(pv), exact)
    return out


def _wins_losses(result, comparison: Comparison, pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    keys = list(result.spec.metric.keys)
    cutoffs = result.spec.metric.cutoffs
    n = comparison.wins_losses
    base_sr = result.systems[comparison.baseline]
    out = []
    for name, key in pairs:
        j = keys.index(key)
        k = cutoffs[j]
        cand_sr = result.systems[name]
        b = base_sr.result.ndcg[:, j]
        c = cand_sr.result.ndcg[:, j]
        valid = np.flatnonzero(~np.isnan(b) & ~np.isnan(c))
        d = c[valid] - b[valid]
        # rank of each id in plain string order (no fixed-width numpy string copy of the ids)
        ids = np.argsort(np.argsort(result.query_ids[valid].astype(object), kind="stable"), kind="stable")
        win_order = np.lexsort((ids, -d))
        loss_order = np.lexsort((ids, d))
        wins = [i for i in win_order if d[i] > comparison.tie_tolerance][:n]
        losses = [i for i in loss_order if d[i] < -comparison.tie_tolerance][:n]
        depth = base_sr.top.depth if k is None else min(k, base_sr.top.depth)

        # entry() runs within this iteration only, so the loop's current values are the ones it means
        def entry(i: int) -> dict[str, Any]:
            q = int(valid[i])  # noqa: B023
            btop = base_sr.top.of(q, depth)  # noqa: B023
            ctop = cand_sr.top.of(q, depth)  # noqa: B023
            brel = {e["doc_id"] for e in btop if (e["grade"] or 0) > 0}
            crel = {e["doc_id"] for e in ctop if (e["grade"] or 0) > 0}
            for e in btop:
                e["left_top_k"] = e["doc_id"] in brel - crel
            for e in ctop:
                e["entered_top_k"] = e["doc_id"] in crel - brel
            return {
                "query_id": str(result.query_ids[q]),
                "weight": float(result.weights[q]),
                "baseline_ndcg": float(b[q]),  # noqa: B023
                "candidate_ndcg": float(c[q]),  # noqa: B023
                "delta": float(d[i]),  # noqa: B023
                "shown": depth,  # noqa: B023
                "baseline_top": btop,
                "candidate_top": ctop,
                "relevant_entered": sorted(crel - brel),
                "relevant_left": sorted(brel - crel),
            }

        out.append(
            {
                "baseline": comparison.baseline,
                "candidate": name,
                "key": key,
                "cutoff": cutoff_label(k),
                "wins": [entry(i) for i in wins],
                "losses": [entry(i) for i in losses],
            }
        )
    return out
