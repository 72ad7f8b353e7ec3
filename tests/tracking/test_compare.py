"""``ndcg-mlflow compare`` and ``ndcg-mlflow report`` on runs logged earlier, against one joint evaluation.

One SQLite store per module holds separate evaluations of the demo data (resamples 1000):
``bm25`` alone, ``reranker-v2`` alone (in another experiment), both together with a comparison,
and ``reranker-v2`` under a different definition (linear gain and/or other judgments).
Comparing the two single-system runs must reproduce the joint evaluation's numbers exactly
(the resampled indices depend only on the seed and the query ids).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from helpers import client_for

from ndcg_mlflow.cli import main

pytestmark = pytest.mark.integration  # every test logs to or reads from an MLflow store

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
FIGURES = ("ndcg_by_cutoff", "per_query_differences", "bootstrap_differences")
FLOATS = (
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
COUNTS = ("n_paired", "wins", "ties", "losses")
# the joint evaluation's comparison settings, given to compare when run A's evaluation declared none
SETTINGS = ["--test", "both", "--correction", "holm", "--wins-losses", "10", "--tie-tolerance", "1e-9"]


def _spec(
    name: str,
    systems: dict[str, str],
    experiment: str,
    *,
    comparison: bool = False,
    gain: str = "exponential",
    qrels: str = "demo/qrels.tsv",
) -> dict:
    spec = yaml.safe_load((CONFIGS / "demo.yaml").read_text(encoding="utf-8"))
    spec["name"] = name
    spec["metric"]["gain"] = gain
    spec["data"] = {"qrels": qrels, "systems": systems}
    spec["uncertainty"]["resamples"] = 1000
    spec.pop("companions", None)
    spec.pop("report", None)
    if comparison:
        spec["comparison"] = {
            "baseline": "bm25",
            "test": "both",
            "correction": "holm",
            "wins_losses": 10,
            "tie_tolerance": 1.0e-9,
        }
    else:
        spec.pop("comparison", None)
    spec["mlflow"] = {"experiment": experiment}
    return spec


@pytest.fixture(scope="module")
def store(tmp_path_factory, migrated_db):
    root = tmp_path_factory.mktemp("compare")
    configs = root / "configs"
    shutil.copytree(CONFIGS, configs, ignore=shutil.ignore_patterns("__pycache__"))
    # other judgments: one grade changed
    lines = (configs / "demo" / "qrels.tsv").read_text(encoding="utf-8").splitlines()
    q, d, g = lines[1].split("\t")
    lines[1] = "\t".join((q, d, str(int(g) + 1)))
    (configs / "demo" / "qrels_mod.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")

    specs = {
        "a": _spec("only-bm25", {"bm25": "demo/bm25.run"}, "cmp-a"),
        "b": _spec("only-reranker", {"reranker-v2": "demo/reranker_v2.run"}, "cmp-b"),
        "both": _spec(
            "both", {"bm25": "demo/bm25.run", "reranker-v2": "demo/reranker_v2.run"}, "cmp-both", comparison=True
        ),
        "linear_mod": _spec(
            "reranker-linear-other-qrels",
            {"reranker-v2": "demo/reranker_v2.run"},
            "cmp-b",
            gain="linear",
            qrels="demo/qrels_mod.tsv",
        ),
        "qrels_mod": _spec(
            "reranker-other-qrels", {"reranker-v2": "demo/reranker_v2.run"}, "cmp-b", qrels="demo/qrels_mod.tsv"
        ),
    }
    db = root / "mlflow.db"
    shutil.copy(migrated_db, db)
    uri = f"sqlite:///{db}"
    ns = SimpleNamespace(root=root, uri=uri, client=None, out={}, parent={}, child={})
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)  # before the client: a SQLite store puts new experiments' artifacts under ./mlruns
        client = ns.client = client_for(uri)
        mp.setenv("MLFLOW_TRACKING_URI", uri)
        for key, spec in specs.items():
            path = configs / f"{key}.yaml"
            path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
            out = root / f"out_{key}"
            assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0, key
            ns.out[key] = out
            exp = client.get_experiment_by_name(spec["mlflow"]["experiment"])
            runs = client.search_runs(
                [exp.experiment_id], filter_string=f"tags.`ndcg_mlflow.evaluation` = '{spec['name']}'"
            )
            ns.parent[key] = next(r.info.run_id for r in runs if r.data.tags["ndcg_mlflow.role"] == "evaluation")
            ns.child[key] = {
                r.data.tags["ndcg_mlflow.system"]: r.info.run_id
                for r in runs
                if r.data.tags["ndcg_mlflow.role"] == "system"
            }

        # the comparison of the two single-system runs, through the CLI
        out = root / "out_compare"
        assert (
            main(
                [
                    "compare",
                    ns.child["a"]["bm25"],
                    ns.child["b"]["reranker-v2"],
                    "--out",
                    str(out),
                    "--quiet",
                    *SETTINGS,
                ]
            )
            == 0
        )
        ns.out["compare"] = out
    return ns


@pytest.fixture
def cli(store, monkeypatch, capsys):
    """Run the CLI in the store's folder; returns (exit code, stdout, stderr)."""
    monkeypatch.chdir(store.root)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.uri)

    def run(*args: str):
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def _summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text(encoding="utf-8"))


def _wins_losses(folder: Path) -> dict:
    return json.loads((folder / "wins_losses.json").read_text(encoding="utf-8"))


def _close(a, b):
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == pytest.approx(b, rel=1e-12, abs=1e-12)


def _comparison_runs(store):
    exps = [e.experiment_id for e in store.client.search_experiments()]
    return [r for r in store.client.search_runs(exps) if r.data.tags.get("ndcg_mlflow.role") == "comparison"]


# --------------------------------------------------------------------------- same numbers as one evaluation


def test_compare_reproduces_the_joint_evaluation(store):
    joint, cmp_ = _summary(store.out["both"]), _summary(store.out["compare"])
    assert (
        [(c["candidate"], c["baseline"], c["key"]) for c in cmp_["comparisons"]]
        == [(c["candidate"], c["baseline"], c["key"]) for c in joint["comparisons"]]
        == [("reranker-v2", "bm25", k) for k in ("ndcg_at_5", "ndcg_at_10", "ndcg_at_all")]
    )
    for got, want in zip(cmp_["comparisons"], joint["comparisons"]):
        for field in FLOATS:
            assert _close(got[field], want[field]), (got["key"], field, got[field], want[field])
        for field in COUNTS:
            assert got[field] == want[field], (got["key"], field)
        # the same family (one candidate at three cutoffs), so even the corrected p-values agree
        assert _close(got["p_corrected"], want["p_corrected"])
        assert got["p_t_test"] is not None and got["p_randomization"] is not None
    for name in ("bm25", "reranker-v2"):
        for key, want in joint["systems"][name].items():
            got = cmp_["systems"][name][key]
            for field in ("mean", "ci_low", "ci_high", "std_error", "n_eff", "weight_sum"):
                assert _close(got[field], want[field]), (name, key, field)
            for field in ("n_evaluated", "n_excluded", "n_missing", "n_empty_ideal"):
                assert got[field] == want[field], (name, key, field)


def test_compare_reproduces_wins_and_losses(store):
    joint, cmp_ = _wins_losses(store.out["both"]), _wins_losses(store.out["compare"])
    assert len(joint["comparisons"]) == len(cmp_["comparisons"]) == 3
    for got, want in zip(cmp_["comparisons"], joint["comparisons"]):
        assert got["key"] == want["key"]
        for kind in ("wins", "losses"):
            assert [e["query_id"] for e in got[kind]] == [e["query_id"] for e in want[kind]]
            assert len(got[kind]) == 10
            for g, w in zip(got[kind], want[kind]):
                assert _close(g["delta"], w["delta"])
                assert [d["doc_id"] for d in g["candidate_top"]] == [d["doc_id"] for d in w["candidate_top"]]
                assert [d["doc_id"] for d in g["baseline_top"]] == [d["doc_id"] for d in w["baseline_top"]]
                assert g["relevant_entered"] == w["relevant_entered"]
                assert g["relevant_left"] == w["relevant_left"]


def test_compare_report_shows_the_same_comparison_table(store):
    from helpers import HtmlDoc

    joint = HtmlDoc((store.out["both"] / "report.html").read_text(encoding="utf-8"))
    cmp_ = HtmlDoc((store.out["compare"] / "report.html").read_text(encoding="utf-8"))
    assert cmp_.table("candidate", "baseline") == joint.table("candidate", "baseline")
    assert cmp_.table("system", "nDCG@5") == joint.table("system", "nDCG@5")
    assert (store.out["compare"] / "report.md").is_file()


def test_comparison_run_is_logged_and_names_both_runs(store):
    a, b = store.child["a"]["bm25"], store.child["b"]["reranker-v2"]
    runs = [
        r
        for r in _comparison_runs(store)
        if r.data.tags.get("ndcg_mlflow.compared_runs", "").startswith(a)
        and b in r.data.tags["ndcg_mlflow.compared_runs"]
    ]
    assert len(runs) == 1
    run = runs[0]
    tags = run.data.tags
    assert tags["ndcg_mlflow.role"] == "comparison"
    assert set(tags["ndcg_mlflow.compared_runs"].split(",")) == {a, b}
    assert tags["ndcg_mlflow.baseline_run"] == a and tags["ndcg_mlflow.candidate_run"] == b
    assert tags["ndcg_mlflow.spec_mismatch"] == "false"
    assert run.info.status == "FINISHED"
    # logged in run A's experiment by default
    assert run.info.experiment_id == store.client.get_experiment_by_name("cmp-a").experiment_id
    joint = {c["key"]: c for c in _summary(store.out["both"])["comparisons"]}
    for key, c in joint.items():
        for field in ("delta", "ci_low", "ci_high", "p_randomization", "p_t_test"):
            assert run.data.metrics[f"compare.{key}.{field}"] == pytest.approx(c[field], rel=1e-12)
    # the tags every run kind shares: found by run A's spec and by the judgments; names in tags, not keys
    a_run, b_run = store.client.get_run(a), store.client.get_run(b)
    assert tags["ndcg_mlflow.spec_sha256"] == a_run.data.tags["ndcg_mlflow.spec_sha256"]
    assert tags["ndcg_mlflow.candidate.spec_sha256"] == b_run.data.tags["ndcg_mlflow.spec_sha256"]
    assert (
        tags["ndcg_mlflow.data.qrels.sha256"]
        == a_run.data.tags["ndcg_mlflow.data.qrels.sha256"]
        == b_run.data.tags["ndcg_mlflow.data.qrels.sha256"]
    )
    assert "ndcg_mlflow.candidate.data.qrels.sha256" not in tags  # the same judgments
    assert (
        tags["ndcg_mlflow.data.system.reranker-v2.sha256"]
        == b_run.data.tags["ndcg_mlflow.data.system.reranker-v2.sha256"]
    )
    assert tags["ndcg_mlflow.baseline"] == "bm25" and tags["ndcg_mlflow.candidate"] == "reranker-v2"
    assert run.info.run_name.startswith("compare reranker-v2 vs bm25 · ")
    assert not any("reranker" in key or "bm25" in key for key in run.data.metrics)
    names = {x.path for x in store.client.list_artifacts(run.info.run_id)}
    assert {
        "summary.json",
        "report.html",
        "report.md",
        "comparisons.csv",
        "wins_losses.json",
        "figures_table.json",
        "comparisons_table.json",
    } <= names
    figures = {x.path for x in store.client.list_artifacts(run.info.run_id, "figures")}
    assert figures == {f"figures/{n}.svg" for n in FIGURES}


def test_compare_takes_the_settings_of_run_a(store, cli, tmp_path):
    """Run A from the joint evaluation carries comparison settings: no flags needed, same numbers."""
    out = tmp_path / "cmp"
    code, _, err = cli(
        "compare",
        store.child["both"]["bm25"],
        store.child["b"]["reranker-v2"],
        "--out",
        str(out),
        "--no-mlflow",
        "--quiet",
    )
    assert code == 0, err
    joint = _summary(store.out["both"])["comparisons"]
    for got, want in zip(_summary(out)["comparisons"], joint):
        for field in FLOATS:
            assert _close(got[field], want[field]), field


def test_compare_without_settings_names_the_missing_flags(store, cli, tmp_path):
    code, out, err = cli(
        "compare",
        store.child["a"]["bm25"],
        store.child["b"]["reranker-v2"],
        "--no-mlflow",
        "--quiet",
        "--out",
        str(tmp_path / "x"),
    )
    assert code == 2
    assert "neither run records the comparison settings (its evaluation's spec had no comparison section)" in err
    assert "--test, --correction, --wins-losses, --tie-tolerance" in err and "Traceback" not in err


def test_compare_takes_the_settings_of_run_b_when_run_a_declared_none(store, cli, tmp_path):
    """Run A's evaluation had no comparison section, run B's (the joint evaluation) had: no flags needed."""
    out = tmp_path / "cmp"
    code, _, err = cli(
        "compare", store.child["a"]["bm25"], store.child["both"]["reranker-v2"], "--out", str(out), "--no-mlflow"
    )
    assert code == 0, err
    joint = _summary(store.out["both"])["comparisons"]
    for got, want in zip(_summary(out)["comparisons"], joint, strict=True):
        for field in FLOATS:
            assert _close(got[field], want[field]), field


# --------------------------------------------------------------------------- refusals


def test_mismatched_definitions_are_refused_naming_each_field(store, cli, tmp_path):
    before = len(_comparison_runs(store))
    code, out, err = cli(
        "compare",
        store.child["a"]["bm25"],
        store.child["linear_mod"]["reranker-v2"],
        "--out",
        str(tmp_path / "x"),
        *SETTINGS,
    )
    assert code == 2
    assert "metric.gain" in err and "'exponential'" in err and "'linear'" in err
    assert "qrels" in err
    assert "--allow-spec-mismatch" in err
    assert "Traceback" not in err
    assert len(_comparison_runs(store)) == before
    assert not (tmp_path / "x" / "summary.json").exists()


def test_other_judgments_alone_are_refused(store, cli, tmp_path):
    code, out, err = cli(
        "compare",
        store.child["a"]["bm25"],
        store.child["qrels_mod"]["reranker-v2"],
        "--no-mlflow",
        "--out",
        str(tmp_path / "x"),
        *SETTINGS,
    )
    assert code == 2
    assert "qrels" in err
    assert "metric.gain" not in err


def test_allow_spec_mismatch_compares_and_says_so(store, cli, tmp_path):
    out = tmp_path / "mm"
    code, stdout, err = cli(
        "compare",
        store.child["a"]["bm25"],
        store.child["linear_mod"]["reranker-v2"],
        "--out",
        str(out),
        "--allow-spec-mismatch",
        *SETTINGS,
    )
    assert code == 0, err
    notes = _summary(out)["notes"]
    differ = [n for n in notes if "differ" in n.lower()]
    assert differ and "metric.gain" in differ[0] and "qrels" in differ[0]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "DEFINITIONS DIFFER" in html.upper() and "metric.gain" in html
    runs = [
        r
        for r in _comparison_runs(store)
        if r.data.tags["ndcg_mlflow.candidate_run"] == store.child["linear_mod"]["reranker-v2"]
    ]
    assert len(runs) == 1 and runs[0].data.tags["ndcg_mlflow.spec_mismatch"] == "true"
    assert "metric\\.gain" in runs[0].data.tags["mlflow.note.content"]  # (markdown text: metric.gain shown)


@pytest.mark.parametrize("which", ["a", "b"])
def test_an_evaluation_run_is_refused(store, cli, tmp_path, which):
    before = len(_comparison_runs(store))
    a = store.parent["a"] if which == "a" else store.child["a"]["bm25"]
    b = store.parent["b"] if which == "b" else store.child["b"]["reranker-v2"]
    code, out, err = cli("compare", a, b, "--out", str(tmp_path / "x"), *SETTINGS)
    assert code == 2
    bad = a if which == "a" else b
    assert bad in err
    assert "not a system's run" in err and "child run" in err
    assert "Traceback" not in err
    assert len(_comparison_runs(store)) == before


# --------------------------------------------------------------------------- report from logged artifacts


@pytest.mark.parametrize("by", ["parent", "child"])
def test_report_rebuilds_the_local_report(store, cli, tmp_path, by):
    from helpers import HtmlDoc

    run_id = store.parent["both"] if by == "parent" else store.child["both"]["reranker-v2"]
    out = tmp_path / "rep"
    code, stdout, err = cli("report", run_id, "--out", str(out))
    assert code == 0, err
    assert (out / "report.html").is_file() and (out / "report.md").is_file()
    local = (store.out["both"] / "report.html").read_text(encoding="utf-8")
    rebuilt = (out / "report.html").read_text(encoding="utf-8")
    assert rebuilt.count("<svg") == local.count("<svg") == 3
    assert rebuilt == local  # the figures too: drawn from the same files, to the byte
    doc_l, doc_r = HtmlDoc(local), HtmlDoc(rebuilt)
    assert doc_r.tables == doc_l.tables
    summary = _summary(store.out["both"])
    for c in summary["comparisons"]:
        assert f"{c['delta']:+.4f}" in rebuilt
    assert (out / "report.md").read_text(encoding="utf-8") == (store.out["both"] / "report.md").read_text(
        encoding="utf-8"
    )


def test_report_of_a_comparison_run(store, cli, tmp_path):
    run = next(
        r
        for r in _comparison_runs(store)
        if r.data.tags["ndcg_mlflow.candidate_run"] == store.child["b"]["reranker-v2"]
        and r.data.tags["ndcg_mlflow.baseline_run"] == store.child["a"]["bm25"]
    )
    out = tmp_path / "rep"
    code, _, err = cli("report", run.info.run_id, "--out", str(out))
    assert code == 0, err
    assert (out / "report.html").read_text(encoding="utf-8") == (store.out["compare"] / "report.html").read_text(
        encoding="utf-8"
    )


# --------------------------------------------------------------------------- weighted queries


def _write_weighted_case(folder: Path) -> dict[str, Path]:
    """12 queries with traffic weights, two systems; one spec per system and one joint spec."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    qrels, runs, weights = [], {"base": [], "cand": []}, ["query_id\tweight"]
    for i in range(12):
        q = f"w{i:02d}"
        docs = [f"{q}-d{j}" for j in range(8)]
        grades = rng.integers(0, 4, size=8)
        grades[0] = max(grades[0], 1)
        qrels += [f"{q} 0 {d} {g}" for d, g in zip(docs, grades)]
        for name, order in (("base", rng.permutation(8)), ("cand", np.argsort(-grades - rng.random(8) * 2.5))):
            runs[name] += [f"{q} Q0 {docs[j]} {r + 1} {20 - r} {name}" for r, j in enumerate(order)]
        weights.append(f"{q}\t{rng.uniform(0.1, 3.0):.6f}")
    (folder / "qrels.txt").write_text("\n".join(qrels) + "\n")
    for name, lines in runs.items():
        (folder / f"{name}.run").write_text("\n".join(lines) + "\n")
    (folder / "weights.tsv").write_text("\n".join(weights) + "\n")
    metric = {
        "gain": "exponential",
        "cutoffs": [3, 10],
        "discount": "log2",
        "ties": "displayed_order",
        "ideal": "judged_catalog",
        "empty_ideal": "exclude",
        "unjudged": "zero",
        "missing_queries": "zero",
    }
    unc = {"resamples": 500, "confidence": 0.95, "method": "bca", "seed": 11}
    paths = {}
    for key, systems in (("base", ["base"]), ("cand", ["cand"]), ("joint", ["base", "cand"])):
        spec = {
            "spec_version": 1,
            "name": f"weighted-{key}",
            "metric": metric,
            "queries": {"weights": "weights.tsv"},
            "data": {"qrels": "qrels.txt", "systems": {s: f"{s}.run" for s in systems}},
            "uncertainty": unc,
            "mlflow": {"experiment": "weighted"},
        }
        if key == "joint":
            spec["comparison"] = {
                "baseline": "base",
                "test": "both",
                "correction": "holm",
                "wins_losses": 3,
                "tie_tolerance": 1.0e-9,
            }
        paths[key] = folder / f"{key}.yaml"
        paths[key].write_text(yaml.safe_dump(spec), encoding="utf-8")
    return paths


def test_compare_of_weighted_runs(tracking_uri, tmp_path, capsys):
    """The numbers of weighted runs are reproduced, and the comparison's spec and report must not claim
    that the queries were weighted uniformly."""
    paths = _write_weighted_case(tmp_path / "w")
    for key, path in paths.items():
        assert main(["run", str(path), "--out", str(tmp_path / f"out_{key}"), "--quiet"]) == 0
    client = client_for(tracking_uri)
    exp = client.get_experiment_by_name("weighted")
    child = {
        r.data.tags["ndcg_mlflow.evaluation"]: r.info.run_id
        for r in client.search_runs([exp.experiment_id])
        if r.data.tags.get("ndcg_mlflow.role") == "system"
    }
    out = tmp_path / "cmp"
    assert (
        main(
            [
                "compare",
                child["weighted-base"],
                child["weighted-cand"],
                "--out",
                str(out),
                "--quiet",
                "--no-mlflow",
                "--test",
                "both",
                "--correction",
                "holm",
                "--wins-losses",
                "3",
                "--tie-tolerance",
                "1e-9",
            ]
        )
        == 0
    ), capsys.readouterr().err
    joint, cmp_ = _summary(tmp_path / "out_joint"), _summary(out)
    assert joint["systems"]["base"]["ndcg_at_10"]["n_eff"] < 11.9  # really weighted
    for got, want in zip(cmp_["comparisons"], joint["comparisons"]):
        for field in FLOATS:
            assert _close(got[field], want[field]), field
    for name in ("base", "cand"):
        for field in ("mean", "ci_low", "ci_high", "weight_sum", "n_eff"):
            assert _close(cmp_["systems"][name]["ndcg_at_10"][field], joint["systems"][name]["ndcg_at_10"][field])
    # the comparison's description of what was measured must agree with its (weighted) numbers
    assert cmp_["spec"]["queries.weights"] != "uniform"
    explanation = (out / "explanation.txt").read_text(encoding="utf-8")
    assert "plain average" not in explanation
    assert "plain average" not in (out / "report.html").read_text(encoding="utf-8")
