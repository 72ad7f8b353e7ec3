"""Coverage of the bootstrap intervals: a reduced run of benchmarks/coverage_sim.py.

150 repetitions of 400 queries (1000 resamples) from a known population (the script's
defaults), for uniform weights and for lognormal weights correlated with x. The
correct intervals (percentile, bca) must cover the population's weighted mean at a
rate within a generous binomial band around 0.95 (the 99.9% acceptance region, about
+-3.3 standard errors); the wrongly weighted bootstrap (queries drawn with probability
proportional to weight, then the plain mean; true coverage about 0.79 here) must fall
below that band. Seeds are fixed, so the run is deterministic; the band only has to
absorb changes of the random streams.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "coverage_sim.py"
REPS = 150
QUERIES = 400
RESAMPLES = 1000


def _load():
    name = "_coverage_sim_under_test"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["uniform", "skewed"])
def test_bootstrap_interval_coverage(kind):
    cs = _load()
    lo, hi = cs.binomial_band(REPS, 0.95, level=0.999)
    pop, covs = cs.simulate(
        kind,
        reps=REPS,
        queries=QUERIES,
        resamples=RESAMPLES,
        methods=("percentile", "bca"),
        seed=7,
        wrong=kind == "skewed",
        unweighted=False,
    )
    rates = {c.label: c.rate for c in covs}
    correct = {k: v for k, v in rates.items() if not k.startswith("wrong")}
    assert len(correct) == 2
    for label, rate in correct.items():
        assert lo <= rate <= hi, f"{kind}: {label} covered {rate:.3f}, outside [{lo:.3f}, {hi:.3f}] ({rates})"
    if kind == "skewed":
        assert pop.kish_ratio < 0.5  # the weights are unequal enough to matter
        wrong = {k: v for k, v in rates.items() if k.startswith(cs.WRONG_PW)}
        assert len(wrong) == 2
        for label, rate in wrong.items():
            assert rate < lo, f"{label} covered {rate:.3f}: the check no longer tells it apart ({rates})"
