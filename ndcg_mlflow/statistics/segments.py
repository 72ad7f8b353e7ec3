"""Query segments: where a candidate won and where it lost.

The spec's ``queries.segments`` puts every evaluated query in exactly one segment (``EvaluationResult.segments``,
a label per query). The analysis (:mod:`ndcg_mlflow.statistics.comparisons`) then computes, per segment, what it
computes overall, with the same rules:

* per system and cutoff, the weighted mean of the segment's queries (:func:`stats.nan_weighted_mean`: the same
  function as the overall mean, so it equals the weighted mean of the segment's rows of ``per_query.csv``), its
  bootstrap interval with the declared method, ``n`` and ``n_eff``;
* per candidate and cutoff, the paired comparison with the baseline on the segment's queries valid for both;
* every resampling seeded as the overall one: by the seed and the exact list of resampled queries
  (:func:`stats.resample_seed`), and every figure computed from the segment's weights over its own largest one
  (:func:`ndcg_mlflow.statistics.comparisons.scope_weights`), so a segment's numbers depend only on its queries: they
  are those of the same spec restricted to them, bit for bit.

The declared correction runs over one family: every comparison of the evaluation, overall and per segment
(candidates x cutoffs x (1 + segments)).

**Stratified bootstrap** (``uncertainty.stratify: segments``): each overall interval resamples, in every
resample, each segment's valid queries with replacement, as many as the segment has (:func:`stratified_indices`).
The segments' sizes are then fixed, as in the evaluation (the segments are declared, not drawn): the interval
measures only the variation within segments, and is narrower than the plain bootstrap's by as much as the
segments' means differ from each other (the share of the variance between segments). The point estimate, the
paired tests and the decision's t interval are unchanged. Each segment is drawn from its own stream, seeded by
the seed and that segment's resampled queries, so the draws do not depend on how many resamples are drawn at a
time.

**Consistency of the story** (:func:`consistency`): the overall weighted mean difference is the weighted average
of the segments' differences (weighted by each segment's paired weight), so it cannot have a sign no segment
has; it can still disagree with segments that hold most of the weight, when a few segments move much more. That
is said in a note (the spirit of Simpson's paradox: an aggregate that tells another story than its parts).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import inference as stats


@dataclass(frozen=True)
class Segments:
    """The declared segments of the evaluated queries: ``labels`` sorted, ``codes[i]`` the index in ``labels``
    of query ``i``'s segment."""

    labels: tuple[str, ...]
    codes: np.ndarray

    @classmethod
    def of(cls, result: Any) -> Segments | None:
        values = result.segments
        if values is None:
            return None
        # an object array of the labels themselves: numpy's fixed-width text ('U') drops trailing NULs, which
        # would make "head" and "head\0" one segment and "\0" an empty label
        labels, codes = np.unique(np.asarray([str(v) for v in values], dtype=object), return_inverse=True)
        return cls(tuple(str(s) for s in labels), codes.astype(np.int64))

    def mask(self, s: int) -> np.ndarray:
        return self.codes == s


def stratified_indices(
    seed: int, query_ids: np.ndarray, strata: np.ndarray, resamples: int, chunk: int = stats.DEFAULT_CHUNK
) -> Iterator[np.ndarray]:
    """Chunks of (rows x n) indices of a stratified bootstrap of ``n`` queries: in each resample, stratum ``s``'s
    positions (``strata == s``) are filled with draws with replacement among themselves, each a uniform
    (:func:`stats.index_of`) from the stratum's own generator, seeded by ``seed`` and the stratum's query ids; the
    stream does not depend on ``chunk``."""
    n = strata.size
    groups = [np.flatnonzero(strata == s) for s in np.unique(strata)]
    gens = [
        np.random.default_rng(stats.resample_seed(seed, ["stratum", *(str(q) for q in query_ids[pos])]))
        for pos in groups
    ]
    done = 0
    while done < resamples:
        c = min(chunk, resamples - done)
        idx = np.empty((c, n), dtype=np.int64)
        for pos, rng in zip(groups, gens):
            idx[:, pos] = pos[stats.index_of(rng.random((c, pos.size)), pos.size)]
        yield idx
        done += c


def consistency(candidate: str, key: str, delta: float, by_segment: list[tuple[str, float, float]]) -> dict[str, Any]:
    """Does the overall difference tell the segments' story? ``by_segment``: (segment, difference, paired weight)
    of each segment with paired queries. ``agrees`` is False when the overall difference has a sign and segments
    holding more than half of the paired weight moved the other way (said in words by
    :func:`ndcg_mlflow.render.words.consistency_note`)."""
    held = stats.scale_free([w for _, _, w in by_segment])  # (the shares at any scale of the weights)
    total = float(held.sum())
    sign = np.sign(delta) if np.isfinite(delta) else 0.0
    opposite = [sign != 0 and np.isfinite(d) and np.sign(d) == -sign for _, d, _ in by_segment]
    against = [part for part, o in zip(by_segment, opposite) if o]
    share = float(held[np.asarray(opposite, dtype=bool)].sum()) / total if total > 0 else float("nan")
    agrees = not (sign != 0 and share > 0.5)
    return {
        "candidate": candidate,
        "key": key,
        "delta": delta,
        "opposite_weight_share": share,
        "opposite_segments": [s for s, _, _ in against],
        "agrees": agrees,
    }
