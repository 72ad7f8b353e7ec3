"""An evaluation with a judge (the spec's ``judge`` section), end to end: the spec's checks, the labelled and
unlabelled queries, the estimator's numbers against ppi-python on per-query values read from two plain
evaluations (one per source of judgments), the per-query table, the decision and the shipped demo."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import yaml
from helpers import REPO, run_cli

import ndcg_mlflow
from ndcg_mlflow.errors import EXIT_DECISION, EXIT_OK, DataError, SpecError
from ndcg_mlflow.spec import parse_spec

CONFIGS = REPO / "configs"


def judge_spec(**changes) -> dict:
    spec = yaml.safe_load((CONFIGS / "demo_judge.yaml").read_text())
    for key, value in changes.items():
        node = spec
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return spec


def plain(spec: dict, qrels: str, query_set=None) -> ndcg_mlflow.EvaluationResult:
    """The same spec without a judge, on one source of judgments."""
    s = copy.deepcopy(spec)
    s.pop("judge")
    s["data"].pop("judge_qrels")
    s["data"]["qrels"] = qrels
    s.pop("comparison", None)
    s.pop("decision", None)
    s.pop("uncertainty", None)
    if query_set is not None:
        s["queries"]["set"] = query_set
    return ndcg_mlflow.evaluate(s, base_dir=CONFIGS)


def per_query(result, system: str, key: str) -> dict[str, float]:
    j = result.spec.metric.keys.index(key)
    x = result.systems[system].result.ndcg[:, j]
    return dict(zip(result.query_ids.tolist(), x.tolist()))


@pytest.fixture(scope="module")
def judged():
    return ndcg_mlflow.evaluate(judge_spec(), base_dir=CONFIGS)


@pytest.fixture(scope="module")
def by_source():
    spec = judge_spec()
    return plain(spec, "demo/judge_qrels.tsv"), plain(spec, "demo/human_qrels.tsv")


# --------------------------------------------------------------------------- the spec


@pytest.mark.parametrize(
    ("changes", "path", "words"),
    [
        ({"judge": None}, "data.judge_qrels", "only with the judge section"),
        ({"data.judge_qrels": None}, "data.judge_qrels", "missing required key"),
        ({"judge.estimator": "ppi+"}, "judge.estimator", "ppi++"),
        ({"judge.labelled_queries": "segments"}, "judge.labelled_queries", "queries.segments is not declared"),
        ({"uncertainty": None, "comparison": None}, "judge", "needs the uncertainty section"),
        ({"judge.extra": 1}, "judge.extra", "unknown key"),
    ],
)
def test_the_judge_section_is_checked(changes, path, words):
    with pytest.raises(SpecError) as info:
        parse_spec(judge_spec(**changes), base_dir=CONFIGS)
    assert info.value.path == path
    assert words in info.value.message


def test_what_a_judge_cannot_do_yet_is_refused_before_anything_is_read():
    spec = judge_spec(**{"report": {"sensitivity": True}})
    with pytest.raises(SpecError) as info:
        ndcg_mlflow.evaluate(spec, base_dir=CONFIGS)
    assert info.value.path == "report.sensitivity"


def test_the_judge_is_recorded_in_the_resolved_spec():
    spec = parse_spec(judge_spec(), base_dir=CONFIGS)
    resolved = spec.resolved()
    assert resolved["data.judge_qrels"] == "demo/judge_qrels.tsv"
    assert resolved["judge.estimator"] == "ppi++"
    assert resolved["judge.labelled_queries"] == "random"
    assert resolved["judge.name"] == "demo-judge"


# --------------------------------------------------------------------------- the numbers


def test_labelled_queries_are_the_evaluated_queries_the_humans_judged(judged, by_source):
    by_judge, by_humans = by_source
    assert judged.query_ids.tolist() == by_judge.query_ids.tolist()
    record = judged.summary["judge"]
    assert record["n_labelled"] == by_humans.query_ids.size == 60
    assert record["n_labelled"] + record["n_unlabelled"] == judged.query_ids.size


def test_the_per_query_table_holds_both_values(judged, by_source):
    by_judge, by_humans = by_source
    table = judged.per_query
    rows = table[(table.system == "reranker-v2") & (table.cutoff == 10)]
    human = per_query(by_humans, "reranker-v2", "ndcg_at_10")
    model = per_query(by_judge, "reranker-v2", "ndcg_at_10")
    for q, ndcg, ndcg_human in zip(rows.query_id, rows.ndcg, rows.ndcg_human):
        assert ndcg == model[q]
        if q in human:
            assert ndcg_human == human[q]
        else:
            assert math.isnan(ndcg_human)


@pytest.mark.parametrize("estimator", ["ppi++", "ppi", "human_only"])
def test_every_view_is_computed_on_the_two_plain_evaluations_values(estimator, by_source):
    """The wiring: the estimate and lambda equal ppi-python's on the per-query values of two plain evaluations
    (one per source of judgments), the interval is statistics.judge's t form on those values, and the human-only
    and judge-only views are scipy's one-sample t intervals of the labelled queries' human values and of every
    query's judge values."""
    ppi_py = pytest.importorskip("ppi_py")
    import scipy.stats as ss

    from ndcg_mlflow.statistics.judge import ppi_mean

    result = ndcg_mlflow.evaluate(judge_spec(**{"judge.estimator": estimator}), base_dir=CONFIGS)
    by_judge, by_humans = by_source
    record = result.summary["judge"]
    lam = {"ppi++": None, "ppi": 1, "human_only": 0}[estimator]

    def t_interval(x):
        return ss.t.interval(0.95, x.size - 1, loc=x.mean(), scale=ss.sem(x))

    def check(entry, y_of, f_of):
        labelled = sorted(y_of)
        unlabelled = sorted(set(f_of) - set(y_of))
        y = np.array([y_of[q] for q in labelled])
        f_l = np.array([f_of[q] for q in labelled])
        f_u = np.array([f_of[q] for q in unlabelled])
        est = ppi_py.ppi_mean_pointestimate(y, f_l, f_u, lam=lam)
        assert entry["estimate"] == pytest.approx(float(np.ravel(est)[0]), abs=1e-9)
        mine = ppi_mean(y, f_l, f_u, lam=lam, interval="t")
        assert (entry["ci_low"], entry["ci_high"], entry["lambda"]) == pytest.approx(
            (mine.ci_low, mine.ci_high, mine.lam), abs=1e-12
        )
        assert entry["ci_low"] < entry["estimate"] < entry["ci_high"]
        assert (entry["human_only"]["ci_low"], entry["human_only"]["ci_high"]) == pytest.approx(t_interval(y), abs=1e-9)
        everything = np.array(list(f_of.values()))
        assert entry["judge_only"]["estimate"] == pytest.approx(everything.mean(), abs=1e-12)
        assert (entry["judge_only"]["ci_low"], entry["judge_only"]["ci_high"]) == pytest.approx(
            t_interval(everything), abs=1e-9
        )
        if estimator == "human_only":
            assert (entry["ci_low"], entry["ci_high"]) == pytest.approx(t_interval(y), abs=1e-9)

    for system in ("bm25", "reranker-v2"):
        for key in ("ndcg_at_5", "ndcg_at_all"):
            check(record["systems"][system][key], per_query(by_humans, system, key), per_query(by_judge, system, key))
    for c in record["comparisons"]:
        yc, yb = per_query(by_humans, c["candidate"], c["key"]), per_query(by_humans, "bm25", c["key"])
        fc, fb = per_query(by_judge, c["candidate"], c["key"]), per_query(by_judge, "bm25", c["key"])
        check(c, {q: yc[q] - yb[q] for q in yc}, {q: fc[q] - fb[q] for q in fc})
        bias = np.array([(yc[q] - yb[q]) - (fc[q] - fb[q]) for q in sorted(yc)])
        assert c["judge_bias"]["estimate"] == pytest.approx(bias.mean(), abs=1e-12)
        assert c["judge_bias"]["p_value"] == pytest.approx(ss.ttest_1samp(bias, 0.0).pvalue, abs=1e-9)


def test_human_only_means_equal_the_plain_evaluation_of_the_labelled_queries(tmp_path, by_source):
    _, by_humans = by_source
    ids = tmp_path / "labelled.txt"
    ids.write_text("".join(f"{q}\n" for q in by_humans.query_ids.tolist()))
    spec = judge_spec(**{"judge.estimator": "human_only"})
    result = ndcg_mlflow.evaluate(spec, base_dir=CONFIGS)
    alone = plain(judge_spec(), "demo/human_qrels.tsv", str(ids))
    for system in ("bm25", "reranker-v2", "dense-ties"):
        for key in result.spec.metric.keys:
            assert result.summary["systems"][system][key]["mean"] == pytest.approx(
                alone.summary["systems"][system][key]["mean"], abs=1e-12
            )


def test_the_comparisons_and_the_decision_read_the_declared_estimator(by_source):
    spec = judge_spec(decision={"key": "ndcg_at_10", "rule": "superiority", "margin": 0.0})
    result = ndcg_mlflow.evaluate(spec, base_dir=CONFIGS)
    record = {(c["candidate"], c["key"]): c for c in result.summary["judge"]["comparisons"]}
    for row in result.summary["comparisons"]:
        c = record[(row["candidate"], row["key"])]
        assert (row["delta"], row["ci_low"], row["ci_high"]) == (c["estimate"], c["ci_low"], c["ci_high"])
        assert row["p_judged"] == c["p_value"]
        assert "p_randomization" not in row and "p_t_test" not in row
    decision = result.decision
    assert decision["interval"] == "weighted t, Welch-Satterthwaite (ppi++)"
    for row in decision["candidates"]:
        c = record[(row["candidate"], "ndcg_at_10")]
        assert (row["ci_low"], row["ci_high"]) == (c["ci_low"], c["ci_high"])
        assert row["outcome"] == ("pass" if c["ci_low"] > 0 else "fail")


def test_a_labelled_query_left_out_under_one_judgment_only_is_an_error(tmp_path):
    human = (CONFIGS / "demo" / "human_qrels.tsv").read_text().splitlines()
    query = human[1].split("\t")[0]
    zeroed = [human[0]] + [
        "\t".join([*line.split("\t")[:2], "0"]) if line.startswith(query + "\t") else line for line in human[1:]
    ]
    (tmp_path / "human.tsv").write_text("\n".join(zeroed) + "\n")
    spec = judge_spec(**{"metric.empty_ideal": "exclude", "data.qrels": str(tmp_path / "human.tsv")})
    with pytest.raises(DataError) as info:
        ndcg_mlflow.evaluate(spec, base_dir=CONFIGS)
    assert repr(query) in str(info.value)
    assert "empty_ideal" in str(info.value)


def test_human_judgments_of_no_evaluated_query_are_an_error(tmp_path, by_source):
    by_judge, by_humans = by_source
    unlabelled = sorted(set(by_judge.query_ids.tolist()) - set(by_humans.query_ids.tolist()))
    (tmp_path / "set.txt").write_text("".join(f"{q}\n" for q in unlabelled))
    spec = judge_spec(**{"queries.set": str(tmp_path / "set.txt")})
    with pytest.raises(DataError, match="none of the 60 queries the humans judged is an evaluated query"):
        ndcg_mlflow.evaluate(spec, base_dir=CONFIGS)


def test_a_query_set_restricts_the_labelled_queries_too(tmp_path, by_source):
    by_judge, by_humans = by_source
    kept = by_judge.query_ids.tolist()[::2]
    (tmp_path / "set.txt").write_text("".join(f"{q}\n" for q in kept))
    result = ndcg_mlflow.evaluate(judge_spec(**{"queries.set": str(tmp_path / "set.txt")}), base_dir=CONFIGS)
    labelled = set(kept) & set(by_humans.query_ids.tolist())
    assert result.summary["judge"]["n_labelled"] == len(labelled)
    assert result.summary["judge"]["n_unlabelled"] == len(kept) - len(labelled)
    assert any("queries judged by humans are not evaluated queries" in n for n in result.notes)


# --------------------------------------------------------------------------- the demo


def test_the_judge_demo_runs_and_records_its_judge(tmp_path):
    out = tmp_path / "out"
    done = run_cli("run", str(CONFIGS / "demo_judge.yaml"), "--out", str(out), "--no-mlflow", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    judge = summary["judge"]
    assert (judge["estimator"], judge["name"], judge["n_labelled"]) == ("ppi++", "demo-judge", 60)
    assert set(summary["files"]) >= {"qrels", "judge_qrels"}
    assert summary["files"]["qrels"]["path"] == "demo/human_qrels.tsv"
    assert "t intervals of the ppi++ estimate" in done.stdout
    assert "The verdict rests on human judgments of 60 queries and demo-judge's judgments of 180 more" in done.stdout
    header = (out / "per_query.csv").read_text().splitlines()[0].split(",")
    assert header[header.index("ndcg") + 1] == "ndcg_human"
    explanation = (out / "explanation.txt").read_text()
    assert "judge: the judgments of demo/judge_qrels.tsv come from a model (demo-judge)" in explanation


# --------------------------------------------------------------------------- segments


def write_segments(tmp_path, query_ids, assign) -> str:
    path = tmp_path / "segments.tsv"
    path.write_text("query_id\tsegment\n" + "".join(f"{q}\t{assign(i)}\n" for i, q in enumerate(query_ids)))
    return str(path)


def test_each_segment_is_estimated_on_its_own_queries(tmp_path, by_source):
    ppi_py = pytest.importorskip("ppi_py")
    by_judge, by_humans = by_source
    ids = by_judge.query_ids.tolist()
    segments = write_segments(tmp_path, ids, lambda i: ("head", "torso", "tail")[i % 3])
    result = ndcg_mlflow.evaluate(judge_spec(**{"queries.segments": segments}), base_dir=CONFIGS)
    record = result.summary["judge"]["segments"]
    assert sorted(record) == ["head", "tail", "torso"]
    y_of = per_query(by_humans, "reranker-v2", "ndcg_at_10")
    f_of = per_query(by_judge, "reranker-v2", "ndcg_at_10")
    for s, label in enumerate(("head", "torso", "tail")):
        mine = {q for i, q in enumerate(ids) if i % 3 == s}
        labelled = sorted(mine & set(y_of))
        unlabelled = sorted(mine - set(y_of))
        y = np.array([y_of[q] for q in labelled])
        f_l, f_u = np.array([f_of[q] for q in labelled]), np.array([f_of[q] for q in unlabelled])
        est = ppi_py.ppi_mean_pointestimate(y, f_l, f_u)
        entry = record[label]["systems"]["reranker-v2"]["ndcg_at_10"]
        assert (entry["n_labelled"], entry["n_unlabelled"]) == (len(labelled), len(unlabelled))
        assert entry["estimate"] == pytest.approx(float(np.ravel(est)[0]), abs=1e-9)
        shown = result.summary["segments"][label]["reranker-v2"]["ndcg_at_10"]
        assert (shown["ci_low"], shown["ci_high"]) == (entry["ci_low"], entry["ci_high"])
    family = result.summary["correction_family"]
    assert (
        family["size"]
        == 2 * 3 * (1 + 3)
        == len(result.summary["comparisons"]) + len(result.summary["segment_comparisons"])
    )
    assert all("p_judged" in c for c in result.summary["segment_comparisons"])


def test_labelled_queries_drawn_by_segment_combine_each_segments_estimate(tmp_path, by_source):
    by_judge, _ = by_source
    ids = by_judge.query_ids.tolist()
    segments = write_segments(tmp_path, ids, lambda i: "a" if i < 80 else "b")
    spec = judge_spec(**{"queries.segments": segments, "judge.labelled_queries": "segments"})
    result = ndcg_mlflow.evaluate(spec, base_dir=CONFIGS)
    judge = result.summary["judge"]
    for system in ("bm25", "dense-ties"):
        overall = judge["systems"][system]["ndcg_at_5"]
        parts = judge["segments"]
        combined = (80 * parts["a"]["systems"][system]["ndcg_at_5"]["estimate"]) / 240 + (
            160 * parts["b"]["systems"][system]["ndcg_at_5"]["estimate"]
        ) / 240
        assert overall["estimate"] == pytest.approx(combined, abs=1e-12)
        assert result.summary["systems"][system]["ndcg_at_5"]["mean"] == overall["estimate"]


def test_a_segment_without_labelled_queries_cannot_be_combined(tmp_path, by_source):
    by_judge, by_humans = by_source
    labelled = set(by_humans.query_ids.tolist())
    ids = by_judge.query_ids.tolist()
    segments = write_segments(tmp_path, ids, lambda i: "judged-only" if ids[i] not in labelled and i % 2 else "rest")
    spec = judge_spec(**{"queries.segments": segments, "judge.labelled_queries": "segments"})
    with pytest.raises(ndcg_mlflow.errors.EvaluationError, match="segment 'judged-only' has no human-labelled query"):
        ndcg_mlflow.evaluate(spec, base_dir=CONFIGS)


def test_a_run_that_changes_between_the_two_readings_is_an_error(tmp_path, monkeypatch):
    """Each system is read once per source of judgments: a run rewritten in between would mix two runs' values."""
    import shutil

    from ndcg_mlflow.engines import Local

    data = tmp_path / "demo"
    shutil.copytree(CONFIGS / "demo", data)
    spec = judge_spec()
    readings = []
    original = Local.evaluate

    def evaluate(self, spec, inputs):
        readings.append(spec.qrels.declared)
        if len(readings) == 2:  # between the judge's reading and the humans'
            with open(data / "bm25.run", "a") as f:
                f.write("q0001 Q0 P-999999 999 -1.0 bm25\n")
        return original(self, spec, inputs)

    monkeypatch.setattr(Local, "evaluate", evaluate)
    with pytest.raises(DataError, match="changed while it was read"):
        ndcg_mlflow.evaluate(spec, base_dir=tmp_path)
    assert readings == ["demo/judge_qrels.tsv", "demo/human_qrels.tsv"]


def test_plan_refuses_an_evaluation_with_a_judge(tmp_path):
    out = tmp_path / "out"
    done = run_cli("run", str(CONFIGS / "demo_judge.yaml"), "--out", str(out), "--no-mlflow", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    planned = run_cli("plan", str(out), "--margin", "0.01", cwd=tmp_path)
    assert planned.returncode == 2
    assert "is an evaluation with a judge" in planned.stderr
    assert "Traceback" not in planned.stderr


def test_the_mlflow_entry_points_refuse_a_judge_by_name(tmp_path):
    """mlflow.evaluate's evaluator logs one model under one source of judgments, and a GenAI scorer reads one
    trace's expectations: a judge section is refused there, naming the key, not ignored."""
    from ndcg_mlflow.integrations.evaluator import Config, load_plugin_spec
    from ndcg_mlflow.integrations.genai import load_scorer_spec

    spec = judge_spec()
    spec["data"] = {key: str(CONFIGS / value) for key, value in spec["data"].items() if key != "systems"}
    spec.pop("comparison")
    with pytest.raises(SpecError) as info:
        load_plugin_spec(Config(spec, "model", None))
    assert info.value.path == "judge"
    for given in (spec, parse_spec({**spec, "data": {**spec["data"], "systems": {"a": "a.run"}}}, base_dir=tmp_path)):
        with pytest.raises(SpecError) as info:
            load_scorer_spec(given, 10)
        assert info.value.path == "judge"


# --------------------------------------------------------------------------- the labelled queries a decision needs


@pytest.mark.parametrize(("rule", "margin"), [("non_inferiority", 0.02), ("superiority", 0.0)])
def test_the_decisions_comparisons_plan_their_labelled_queries_at_the_bounds(rule, margin, by_source, tmp_path):
    """labelled_needed in the record is statistics.judge.labelled_needed at the bounds computed here from the two
    plain evaluations' per-query values: sigma_y (the labelled differences' standard deviation) at its chi-square
    90% upper bound, rho at Fisher's z 90% lower bound, and the distance to the threshold as the plan without a
    judge takes it: for non-inferiority the margin itself (a candidate as good as the baseline), for superiority
    the estimate minus the margin at its t 90% lower bound, with the PPI++ standard error and Welch-Satterthwaite
    degrees of freedom written out (lambda the record's, pinned against ppi-python above)."""
    import scipy.stats as ss

    from ndcg_mlflow.statistics.judge import labelled_needed

    spec = judge_spec(decision={"key": "ndcg_at_10", "rule": rule, "margin": margin})
    result = ndcg_mlflow.evaluate(spec, base_dir=CONFIGS)
    by_judge, by_humans = by_source
    threshold = margin if rule == "superiority" else -margin
    planned = [c for c in result.summary["judge"]["comparisons"] if "labelled_needed" in c]
    assert sorted((c["candidate"], c["key"]) for c in planned) == [
        ("dense-ties", "ndcg_at_10"),
        ("reranker-v2", "ndcg_at_10"),
    ]
    for c in planned:
        yc, yb = per_query(by_humans, c["candidate"], "ndcg_at_10"), per_query(by_humans, "bm25", "ndcg_at_10")
        fc, fb = per_query(by_judge, c["candidate"], "ndcg_at_10"), per_query(by_judge, "bm25", "ndcg_at_10")
        labelled = sorted(yc)
        y = np.array([yc[q] - yb[q] for q in labelled])
        f_l = np.array([fc[q] - fb[q] for q in labelled])
        f_u = np.array([fc[q] - fb[q] for q in sorted(set(fc) - set(yc))])
        n, big_n = y.size, f_u.size
        lam = c["lambda"]
        rect = y - lam * f_l
        v_l, v_u = rect.var(ddof=1) / n, lam * lam * f_u.var(ddof=1) / big_n
        se = math.sqrt(v_l + v_u)
        df = (v_l + v_u) ** 2 / (v_l**2 / (n - 1) + v_u**2 / (big_n - 1))
        estimate = rect.mean() + lam * f_u.mean()
        sigma_up = y.std(ddof=1) * math.sqrt((n - 1) / ss.chi2.ppf(0.1, n - 1))
        rho_low = math.tanh(math.atanh(np.corrcoef(y, f_l)[0, 1]) - ss.norm.ppf(0.9) / math.sqrt(n - 3))
        plan = c["labelled_plan"]
        if rule == "superiority":
            assumed, distance_low = estimate, estimate - threshold - ss.t.ppf(0.9, df) * se
            assert plan["distance_bound"] == pytest.approx(distance_low, rel=1e-9)
        else:  # not estimated: no bound
            assumed, distance_low = 0.0, margin
            assert math.isnan(plan["distance_bound"])
        assumed_here = (plan["sigma_y_bound"], plan["rho_bound"], plan["assumed_difference"], plan["distance"])
        assert assumed_here == pytest.approx((sigma_up, rho_low, assumed, assumed - threshold), rel=1e-9)
        assert (plan["n_labelled"], plan["n_unlabelled"], plan["power"], plan["threshold"]) == (
            n,
            big_n,
            0.8,
            threshold,
        )
        at_bounds = (
            labelled_needed(distance_low, sigma_y=sigma_up, rho=rho_low, n_unlabelled=big_n, power=0.8, df_share=1.0)
            if distance_low > 0
            else None
        )
        if plan["reason"] is None:
            assert c["labelled_needed"] == at_bounds
        else:  # refused: the bound does not clear the threshold, or the plan at the bounds is 100 times the point plan
            assert rule == "superiority" and c["labelled_needed"] is None
            assert plan["reason"]["kind"] == "pilot_too_small"
            assert plan["reason"].get("needed") == at_bounds
            if at_bounds is not None:
                assert at_bounds > 100 * plan["reason"]["known"]
    if rule == "non_inferiority":  # planned at the margin whatever the estimate: both are planned
        assert all(isinstance(c["labelled_needed"], int) for c in planned)
    out = tmp_path / "out"
    path = tmp_path / "spec.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                **spec,
                "data": {
                    k: str(CONFIGS / v) if k != "systems" else {s: str(CONFIGS / p) for s, p in v.items()}
                    for k, v in spec["data"].items()
                },
            }
        )
    )
    done = run_cli("run", str(path), "--out", str(out), "--no-mlflow", cwd=tmp_path)
    assert done.returncode in (EXIT_OK, EXIT_DECISION), done.stderr  # (a failed decision exits apart)
    written = json.loads((out / "summary.json").read_text())["judge"]["comparisons"]
    assert {(c["candidate"], c["key"]): c.get("labelled_needed") for c in written} == {
        (c["candidate"], c["key"]): c.get("labelled_needed") for c in result.summary["judge"]["comparisons"]
    }


def test_labelled_queries_drawn_by_segment_are_not_planned(tmp_path, by_source):
    by_judge, _ = by_source
    segments = write_segments(tmp_path, by_judge.query_ids.tolist(), lambda i: "a" if i < 80 else "b")
    spec = judge_spec(
        **{"queries.segments": segments, "judge.labelled_queries": "segments"},
        decision={"key": "ndcg_at_5", "rule": "non_inferiority", "margin": 0.05},
    )
    record = ndcg_mlflow.evaluate(spec, base_dir=CONFIGS).summary["judge"]
    planned = [c for c in record["comparisons"] if "labelled_needed" in c]
    assert len(planned) == 2 and all(c["key"] == "ndcg_at_5" for c in planned)
    assert all(c["labelled_needed"] is None and c["labelled_plan"]["reason"] == {"kind": "stratified"} for c in planned)
    assert not any("labelled_needed" in c for s in record["segments"].values() for c in s["comparisons"])
