"""Uncertainty and paired comparison of evaluated systems, as the spec declares them.

* per system and key: bootstrap interval of the weighted mean, its standard error
  (the standard deviation of the bootstrap distribution), and the effective number
  of queries (sum w)^2 / sum w^2;
* per candidate against the baseline and key, on the queries valid for both: the
  paired difference with its interval (the same resampled queries for both
  systems), randomization and t-test p-values, p-values corrected over the family
  of all (candidate, key) comparisons, relative difference, effect size d_z, and
  win / tie / loss counts;
* the largest per-query wins and losses, with each side's top documents.

Series that share the same valid queries share one resampling; the resampled
indices depend only on the seed and on those queries' ids (:func:`stats.resample_seed`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import stats
from .format import listing, md_html, md_table, md_text, number
from .rules import cutoff_label, key_label, metric_name
from .spec import Comparison, Uncertainty


@dataclass
class Analysis:
    intervals: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    wins_losses: list[dict[str, Any]] = field(default_factory=list)
    family: str = ""
    distributions: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)  # (candidate, key) -> deltas
    # (candidate, key) -> the per-query differences and weights on the queries valid for both (the decision's input)
    paired: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


def analyze(result, uncertainty: Uncertainty | None, comparison: Comparison | None) -> Analysis:
    """Statistics for an :class:`~ndcg_mlflow.evaluation.EvaluationResult` (nothing when not declared)."""
    out = Analysis()
    if uncertainty is None:
        return out
    keys = result.spec.metric.keys
    names = list(result.systems)
    w_all = result.relative_weights  # weights over the largest: same ratios, no overflow or underflow

    # one job per (label, valid-query mask): columns to resample together
    jobs: dict[bytes, list[tuple[str, str, np.ndarray]]] = {}
    masks: dict[bytes, np.ndarray] = {}

    def add(mask: np.ndarray, label: tuple[str, str], series: np.ndarray) -> None:
        token = np.packbits(mask).tobytes() + mask.size.to_bytes(8, "little")
        masks[token] = mask
        jobs.setdefault(token, []).append((label[0], label[1], series))

    for name in names:
        x = result.systems[name].result.ndcg
        for j, key in enumerate(keys):
            mask = ~np.isnan(x[:, j])
            if mask.any():
                add(mask, ("system:" + name, key), x[:, j])
    pairs: list[tuple[str, str]] = []
    if comparison is not None:
        base = result.systems[comparison.baseline].result.ndcg
        for name in names:
            if name == comparison.baseline:
                continue
            cand = result.systems[name].result.ndcg
            for j, key in enumerate(keys):
                mask = ~np.isnan(base[:, j]) & ~np.isnan(cand[:, j])
                pairs.append((name, key))
                if mask.any():
                    add(mask, ("delta:" + name, key), cand[:, j] - base[:, j])

    boot_results: dict[tuple[str, str], tuple[float, float, float, np.ndarray]] = {}
    for token, series in jobs.items():
        mask = masks[token]
        ids = result.query_ids[mask]
        w = w_all[mask]
        x = np.column_stack([s[mask] for _, _, s in series])
        rng = np.random.default_rng(stats.resample_seed(uncertainty.seed, ids))
        boot = stats.bootstrap_means(
            x, w, resamples=uncertainty.resamples, rng=rng, studentized=uncertainty.method == "studentized"
        )
        lows, highs = stats.interval(boot, x, w, confidence=uncertainty.confidence, method=uncertainty.method)
        ses = stats.standard_error(boot, x)
        for c, (kind, key, _) in enumerate(series):
            boot_results[(kind, key)] = (float(lows[c]), float(highs[c]), float(ses[c]), boot.dist[:, c])

    for name in names:
        out.intervals[name] = {}
        x = result.systems[name].result.ndcg
        for j, key in enumerate(keys):
            mask = ~np.isnan(x[:, j])
            lo, hi, se, _ = boot_results.get(("system:" + name, key), (np.nan, np.nan, np.nan, None))
            out.intervals[name][key] = {
                "ci_low": lo,
                "ci_high": hi,
                "std_error": se,
                "n_eff": stats.effective_n(w_all[mask]),
            }

    if comparison is None:
        return out
    out.family = (
        f"{len(pairs)} comparisons: each of {len(names) - 1} candidate(s) against baseline "
        f"'{comparison.baseline}' at each of {len(keys)} cutoff(s); correction {comparison.correction}"
    )
    base = result.systems[comparison.baseline].result.ndcg
    randomization = (
        _randomization(result, comparison, uncertainty, pairs) if comparison.test in ("randomization", "both") else {}
    )
    primary = []
    for name, key in pairs:
        j = keys.index(key)
        cand = result.systems[name].result.ndcg
        mask = ~np.isnan(base[:, j]) & ~np.isnan(cand[:, j])
        w = w_all[mask]
        d = cand[mask, j] - base[mask, j]
        b = base[mask, j]
        out.paired[(name, key)] = (d, w)
        row: dict[str, Any] = {
            "baseline": comparison.baseline,
            "candidate": name,
            "key": key,
            "cutoff": key_label(key),
            "n_paired": int(mask.sum()),
        }
        if mask.any():
            base_mean = float(stats.weighted_mean(b, w))
            delta = float(stats.weighted_mean(d, w))
            lo, hi, se, dist = boot_results[("delta:" + name, key)]
            out.distributions[(name, key)] = dist
            p_rand = p_t = float("nan")
            if (name, key) in randomization:
                p_rand, exact = randomization[(name, key)]
                row["randomization_exact"] = exact
            if comparison.test in ("t_test", "both"):
                p_t = stats.paired_t_test(d, w)
            wins = int(np.count_nonzero(d > comparison.tie_tolerance))
            losses = int(np.count_nonzero(d < -comparison.tie_tolerance))
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
                    "wins": wins,
                    "ties": int(mask.sum()) - wins - losses,
                    "losses": losses,
                }
            )
        else:
            row.update(
                {
                    k: float("nan")
                    for k in (
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
                }
            )
            row.update({"wins": 0, "ties": 0, "losses": 0})
        primary.append(row["p_randomization"] if comparison.test in ("randomization", "both") else row["p_t_test"])
        out.comparisons.append(row)
    corrected = stats.correct(primary, comparison.correction)
    test_name = "randomization" if comparison.test in ("randomization", "both") else "t_test"
    for row, p in zip(out.comparisons, corrected):
        row["p_corrected"] = float(p)
        row["corrected_test"] = test_name
        row["correction"] = comparison.correction
    out.wins_losses = _wins_losses(result, comparison, pairs)
    return out


def _randomization(
    result, comparison: Comparison, uncertainty: Uncertainty, pairs: list[tuple[str, str]]
) -> dict[tuple[str, str], tuple[float, bool]]:
    """Randomization p-values of every comparison; comparisons on the same queries share one stream of
    sign vectors (seeded by the seed and those queries' ids), drawn once."""
    keys = list(result.spec.metric.keys)
    base = result.systems[comparison.baseline].result.ndcg
    groups: dict[bytes, list[tuple[tuple[str, str], np.ndarray, np.ndarray]]] = {}
    for name, key in pairs:
        j = keys.index(key)
        cand = result.systems[name].result.ndcg
        mask = ~np.isnan(base[:, j]) & ~np.isnan(cand[:, j])
        if mask.any():
            token = np.packbits(mask).tobytes() + mask.size.to_bytes(8, "little")
            groups.setdefault(token, []).append(((name, key), mask, cand[:, j] - base[:, j]))
    out = {}
    for items in groups.values():
        mask = items[0][1]
        d = np.column_stack([diff[mask] for _, _, diff in items])
        rng = np.random.default_rng(stats.resample_seed(uncertainty.seed, ["randomization", *result.query_ids[mask]]))
        p, exact = stats.randomization_tests(d, result.relative_weights[mask], resamples=uncertainty.resamples, rng=rng)
        for (label, _, _), pv in zip(items, p):
            out[label] = (float(pv), exact)
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


def wins_losses_markdown(result, analysis: Analysis) -> str:
    """A readable rendering of the largest wins and losses; every string from the data or the spec goes
    through :func:`format.md_text` (:func:`format.md_html` inside the raw ``<summary>`` element)."""
    lines = [f"# Largest per-query wins and losses — {_md(result.spec.name)}", ""]
    if not analysis.wins_losses:
        lines.append("No comparison was declared (spec section `comparison`).")
        return "\n".join(lines) + "\n"
    for block in analysis.wins_losses:
        title = f"## {_md(block['candidate'])} vs {_md(block['baseline'])}, {metric_name(block['key'], _md)}"
        lines += [title, ""]
        for kind in ("wins", "losses"):
            items = block[kind]
            lines.append(f"### {kind.capitalize()} ({len(items)})")
            lines.append("")
            if not items:
                lines += ["(none)", ""]
                continue
            lines += md_table(
                ["query", "weight", "baseline", "candidate", "delta", "relevant entered top K", "relevant left top K"],
                [
                    [
                        _md(e["query_id"]),
                        f"{e['weight']:g}",
                        number(e["baseline_ndcg"]),
                        number(e["candidate_ndcg"]),
                        number(e["delta"], signed=True),
                        listing([_md(d) for d in e["relevant_entered"]]),
                        listing([_md(d) for d in e["relevant_left"]]),
                    ]
                    for e in items
                ],
                "lrrrrll",
            )
            lines.append("")
            for e in items:
                lines.append(f"<details><summary>{md_html(e['query_id'])}: top {e['shown']} of both systems</summary>")
                lines.append("")
                lines += md_table(
                    ["rank", "baseline doc (grade)", "candidate doc (grade)"],
                    [
                        [
                            str(r + 1),
                            _doc_cell(e["baseline_top"], r, "left_top_k", "⬇ left"),
                            _doc_cell(e["candidate_top"], r, "entered_top_k", "⬆ entered"),
                        ]
                        for r in range(max(len(e["baseline_top"]), len(e["candidate_top"])))
                    ],
                    "rll",
                )
                lines += ["", "</details>", ""]
    return "\n".join(lines) + "\n"


def _doc_cell(top: list[dict[str, Any]], r: int, flag: str, mark: str) -> str:
    if r >= len(top):
        return ""
    e = top[r]
    grade = "unjudged" if e["grade"] is None else f"{e['grade']:g}"
    return f"{_md(e['doc_id'])} ({grade}){' ' + mark if e.get(flag) else ''}"


_md = md_text  # the same escaping as report.md
