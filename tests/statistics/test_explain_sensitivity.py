"""``ndcg-mlflow explain`` and the sensitivity analysis (``explain --sensitivity``, ``report.sensitivity``).

* explain prints every resolved choice, the gain each grade of the qrels earns, where each field came from, and a
  table of how trec_eval, gdeval, sklearn, torchmetrics and ranx differ from the spec ('=' where they agree);
* every row of ``sensitivity(result)`` equals a fresh ``evaluate`` of the spec with that one rule changed: the
  weighted mean for systems; for comparisons the weighted mean of the per-query differences over the queries valid
  for both systems, computed here from the fresh per-query table;
* a constructed case where the tie rule flips the sign of a comparison is flagged;
* ``report: {sensitivity: true}`` makes ``run`` write ``sensitivity.csv`` and log it (and
  ``sensitivity_table.json``) to MLflow.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import ndcg_mlflow
from ndcg_mlflow import Local
from ndcg_mlflow.cli import main
from ndcg_mlflow.render.command_text import format_sensitivity
from ndcg_mlflow.render.explain import explain
from ndcg_mlflow.rules import RULES
from ndcg_mlflow.spec import METRIC_FIELDS, load_spec
from ndcg_mlflow.spec.presets import PRESETS, TOOLS
from ndcg_mlflow.statistics.sensitivity import alternatives, sensitivity

TOOL_NAMES = ["trec_eval", "gdeval", "sklearn", "torchmetrics", "ranx"]


# --------------------------------------------------------------------------- data


def write_random_data(folder: Path, seed: int = 7) -> dict:
    """Judgments (grades -1..3, some queries without a relevant document), a weights file and three runs with
    ties, unjudged documents, judged queries a run lacks and a run query without judgments."""
    rng = np.random.default_rng(seed)
    qids = [f"q{i:02d}" for i in range(1, 25)]
    docs = [f"d{i}" for i in range(1, 31)]
    qrels = []
    judged: dict = {}
    for i, q in enumerate(qids):
        chosen = rng.choice(docs, size=int(rng.integers(3, 12)), replace=False)
        if i % 6 == 5:
            grades = rng.integers(-1, 1, size=chosen.size)  # no relevant document
        else:
            grades = rng.integers(-1, 4, size=chosen.size)
        judged[q] = dict(zip(chosen.tolist(), grades.tolist()))
        qrels += [f"{q}\t0\t{d}\t{g}" for d, g in judged[q].items()]
    (folder / "qrels.txt").write_text("\n".join(qrels) + "\n")
    (folder / "weights.tsv").write_text(
        "query_id\tweight\n" + "".join(f"{q}\t{w:.3f}\n" for q, w in zip(qids, rng.uniform(0.2, 3.0, size=len(qids))))
    )
    systems = {}
    for name, levels in (("base", 50), ("cand", 50), ("tied", 3)):
        lines = []
        for q in qids:
            if rng.uniform() < 0.1:
                continue  # the run lacks this judged query
            n = int(rng.integers(2, 15))
            pool = list(judged[q]) + [d for d in docs if d not in judged[q]]
            picked = rng.choice(pool[: len(judged[q]) + 8], size=min(n, len(judged[q]) + 8), replace=False)
            scores = (rng.integers(0, levels, size=picked.size) / 4.0).tolist()
            order = np.argsort(-np.asarray(scores), kind="stable")
            lines += [f"{q} Q0 {picked[j]} {r} {scores[j]!r} {name}" for r, j in enumerate(order.tolist(), 1)]
        lines += [f"zz-unjudged Q0 d1 1 1.0 {name}", f"zz-unjudged Q0 d2 2 0.5 {name}"]
        (folder / f"{name}.run").write_text("\n".join(lines) + "\n")
        systems[name] = f"{name}.run"
    return systems


def full_spec(
    metric: dict,
    systems: dict,
    *,
    weights="uniform",
    comparison: bool = True,
    report: bool | None = None,
    name: str = "sensitivity",
) -> dict:
    spec = {
        "spec_version": 1,
        "name": name,
        "metric": metric,
        "queries": {"weights": weights},
        "data": {"qrels": "qrels.txt", "systems": dict(systems)},
    }
    if comparison:
        spec["uncertainty"] = {"resamples": 200, "confidence": 0.9, "method": "percentile", "seed": 1}
        spec["comparison"] = {
            "baseline": next(iter(systems)),
            "test": "t_test",
            "correction": "holm",
            "wins_losses": 2,
            "tie_tolerance": 1e-9,
        }
    if report is not None:
        spec["report"] = {"sensitivity": report}
    return spec


def raw_metric(metric) -> dict:
    """A resolved :class:`Metric` written back as explicit spec fields (no preset)."""
    g = metric.gain
    gain = g.kind if g.kind != "table" else {k: v for k, v in g.table}
    return {
        "gain": gain,
        "cutoffs": ["all" if k is None else k for k in metric.cutoffs],
        "discount": metric.discount,
        "ties": metric.ties,
        "ideal": metric.ideal,
        "empty_ideal": metric.empty_ideal,
        "unjudged": metric.unjudged,
        "missing_queries": metric.missing_queries,
    }


def changed(metric, rule: str, alternative: str) -> dict:
    raw = raw_metric(metric)
    if rule == "declared":
        return raw
    if rule == "gain":
        if alternative in ("exponential", "linear"):
            raw["gain"] = alternative
        else:
            raw["gain"] = {float(k): v for k, v in json.loads(alternative).items()}
    else:
        raw[rule] = alternative
    return raw


# --------------------------------------------------------------------------- explain


def _explain_table(text: str) -> dict[str, dict[str, str]]:
    """``{field: {column: cell}}`` of explain's comparison table (columns located by the header)."""
    lines = text.splitlines()
    head_i = next(i for i, ln in enumerate(lines) if ln.strip().startswith("field") and "this spec" in ln)
    head = lines[head_i]
    cols = ["field", "this spec"] + TOOL_NAMES
    starts = [head.index(c) for c in cols]
    assert starts == sorted(starts)
    out = {}
    for ln in lines[head_i + 1 : head_i + 1 + len(METRIC_FIELDS)]:
        cells = [ln[a:b].strip() for a, b in zip(starts, starts[1:] + [len(ln) + 1])]
        out[cells[0]] = dict(zip(cols[1:], cells[1:]))
    assert list(out) == list(METRIC_FIELDS)
    return out


@pytest.fixture
def small(tmp_path) -> Path:
    (tmp_path / "qrels.txt").write_text("q1 0 d1 3\nq1 0 d2 1\nq1 0 d3 0\nq2 0 d1 2\nq2 0 d4 -1\n")
    (tmp_path / "a.run").write_text("q1 Q0 d1 1 3 a\nq1 Q0 d2 2 2 a\nq2 Q0 d1 1 1 a\n")
    (tmp_path / "b.run").write_text("q1 Q0 d2 1 3 b\nq1 Q0 d1 2 3 b\nq2 Q0 d4 1 1 b\nq2 Q0 d1 2 1 b\n")
    return tmp_path


def _write_spec(folder: Path, metric: dict, **kw) -> Path:
    path = folder / "spec.yaml"
    path.write_text(
        yaml.safe_dump(full_spec(metric, {"a": "a.run", "b": "b.run"}, comparison=False, **kw), sort_keys=False)
    )
    return path


def test_explain_prints_every_choice_gain_credit_and_origin(small, capsys):
    path = _write_spec(small, {"preset": "trec_eval", "gain": "exponential", "cutoffs": [5, "all"]})
    assert main(["explain", str(path)]) == 0
    out = capsys.readouterr().out
    spec = load_spec(path)
    m = spec.metric
    assert "metric preset: trec_eval" in out
    expected = {
        "gain": ("exponential", "spec"),
        "cutoffs": ("5, all", "spec"),
        "discount": ("log2", "preset trec_eval"),
        "ties": ("id_descending", "preset trec_eval"),
        "ideal": ("judged_catalog", "preset trec_eval"),
        "empty_ideal": ("zero", "preset trec_eval"),
        "unjudged": ("zero", "preset trec_eval"),
        "missing_queries": ("exclude", "preset trec_eval"),
    }
    for f, (value, origin) in expected.items():
        assert f"- {f}: {value}  [from {origin}]" in out, f
        assert m.source_of(f) == origin
    # the gain each grade found in the qrels earns (grades -1, 0, 1, 2, 3)
    gain_line = next(ln for ln in out.splitlines() if "grade 3 earns" in ln)
    assert "qrels.txt" in gain_line
    for text in ("grade -1 earns 0", "grade 0 earns 0", "grade 1 earns 1", "grade 2 earns 3", "grade 3 earns 7"):
        assert text in gain_line
    assert "grade 4" not in gain_line
    # plain words for every rule
    assert "descending plain string order" in out and "scores 0 and is averaged in" in out
    assert "every judged query" in out and "uniform" in out

    table = _explain_table(out)
    assert table["gain"] == {
        "this spec": "exponential",
        "trec_eval": "linear",
        "gdeval": "=",
        "sklearn": "linear",
        "torchmetrics": "linear",
        "ranx": "linear",
    }
    assert table["ties"] == {
        "this spec": "id_descending",
        "trec_eval": "=",
        "gdeval": "=",
        "sklearn": "average",
        "torchmetrics": "average",
        "ranx": "unspecified",
    }
    assert table["cutoffs"]["trec_eval"] == "5, 10, 15, 20, 30, 100, 200, 500, 1000, all"
    assert table["cutoffs"]["gdeval"] == "20" and table["cutoffs"]["sklearn"] == "all"
    assert table["empty_ideal"]["gdeval"] == "exclude" and table["empty_ideal"]["trec_eval"] == "="
    assert table["missing_queries"]["ranx"] == "unspecified"
    for tool in TOOLS:
        assert f"{tool.name}: {tool.title}" in out
    assert "ranx" in out and "not reproducible" in out


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_explain_table_agrees_everywhere_with_its_own_preset(small, capsys, preset):
    path = _write_spec(small, {"preset": preset})
    assert main(["explain", str(path)]) == 0
    table = _explain_table(capsys.readouterr().out)
    for f in METRIC_FIELDS:
        assert table[f][preset] == "=", (preset, f, table[f])
        # a cell is '=' exactly when the tool's value is the spec's
        for tool in TOOLS:
            theirs = tool.values[f]
            cell = table[f][tool.name]
            if theirs is None:
                assert cell == "unspecified"
            elif cell != "=":
                assert cell != table[f]["this spec"]


def test_explain_linear_gain_credit(small, capsys):
    path = _write_spec(small, {"preset": "sklearn"})
    assert main(["explain", str(path)]) == 0
    out = capsys.readouterr().out
    gain_line = next(ln for ln in out.splitlines() if "grade 3 earns" in ln)
    for text in ("grade -1 earns 0", "grade 0 earns 0", "grade 1 earns 1", "grade 2 earns 2", "grade 3 earns 3"):
        assert text in gain_line
    assert "- gain: linear  [from preset sklearn]" in out


def test_explain_gain_table_credit_lists_the_grades_found_in_the_qrels(small, capsys):
    """The credit line is announced as 'the grades found in qrels.txt': it must list those grades (-1..3) with
    their gains, not the entries of the table that the qrels never uses (grade 9)."""
    table = {-1: 0, 0: 0, 1: 2, 2: 5, 3: 11, 9: 100}
    path = _write_spec(small, {"preset": "trec_eval", "gain": table})
    assert main(["explain", str(path)]) == 0
    out = capsys.readouterr().out
    gain_line = next(ln for ln in out.splitlines() if ln.startswith("    ") and "earns" in ln)
    assert "the grades found in qrels.txt" in gain_line
    for g in (-1, 0, 1, 2, 3):
        assert f"grade {g} earns {table[g]}" in gain_line
    found_part, _, extra_part = gain_line.partition("; the table also lists")
    assert "grade 9" not in found_part, gain_line  # not presented as a grade of the qrels
    assert "grade 9 (earns 100)" in extra_part, gain_line  # an unused table entry is shown apart


def test_explain_works_without_readable_qrels(tmp_path, capsys):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(full_spec({"preset": "gdeval"}, {"a": "a.run"}, comparison=False)))
    assert main(["explain", str(path)]) == 0
    out = capsys.readouterr().out
    assert "example grades" in out and "grade 3 earns 7" in out
    assert "- cutoffs: 20  [from preset gdeval]" in out


def test_explain_function_matches_the_command(small, capsys):
    path = _write_spec(small, {"preset": "torchmetrics", "ties": "id_ascending"})
    assert main(["explain", str(path)]) == 0
    assert capsys.readouterr().out.rstrip("\n") == explain(load_spec(path))


# --------------------------------------------------------------------------- sensitivity: every row


DECLARED = {
    "trec_eval_weighted": ({"preset": "trec_eval", "cutoffs": [3, 10, "all"]}, "weights.tsv"),
    "explicit": (
        {
            "gain": "exponential",
            "cutoffs": [5, "all"],
            "discount": "log2",
            "ties": "displayed_order",
            "ideal": "candidates",
            "empty_ideal": "exclude",
            "unjudged": "condense",
            "missing_queries": "zero",
        },
        "uniform",
    ),
    "sklearn_table": (
        {"preset": "sklearn", "gain": {-1: 0, 0: 0, 1: 2, 2: 5, 3: 11}, "cutoffs": [4, "all"], "empty_ideal": "one"},
        "weights.tsv",
    ),
}


def _fresh(spec: dict, folder: Path, metric: dict):
    fresh = dict(spec, metric=metric)
    fresh.pop("uncertainty", None)
    fresh.pop("comparison", None)
    fresh.pop("report", None)
    return ndcg_mlflow.evaluate(fresh, base_dir=folder)


def _close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= 1e-12


@pytest.mark.parametrize("case", sorted(DECLARED))
def test_every_sensitivity_row_equals_a_fresh_evaluation(tmp_path, case):
    metric, weights = DECLARED[case]
    systems = write_random_data(tmp_path)
    spec = full_spec(metric, systems, weights=weights)
    result = ndcg_mlflow.evaluate(spec, base_dir=tmp_path, engine=Local(keep_data=True))
    table = sensitivity(result)
    m = result.spec.metric
    labels = [("all" if k is None else str(k)) for k in m.cutoffs]
    names = list(systems)
    baseline = names[0]

    # one row per (rule, alternative) x (system or comparison) x cutoff; every non-declared alternative
    expected_alts = {("declared", "as declared")}
    for rule in ("ties", "ideal", "empty_ideal", "unjudged", "missing_queries"):
        choices = RULES[f"metric.{rule}"].choices
        expected_alts |= {(rule, c) for c in choices if c != getattr(m, rule) and c != "error"}
    expected_alts |= {("gain", g) for g in ("exponential", "linear") if g != m.gain.kind}
    got_alts = set(zip(table["rule"], table["alternative"]))
    assert got_alts == expected_alts
    assert {(r, a) for r, a, _ in alternatives(m)} == expected_alts
    per_alt = (len(names) + len(names) - 1) * len(labels)
    assert len(table) == len(expected_alts) * per_alt
    assert not table.duplicated(["rule", "alternative", "kind", "system", "baseline", "cutoff"]).any()

    declared_sys, declared_cmp = {}, {}
    checked = 0
    for (rule, alt), rows in table.groupby(["rule", "alternative"], sort=False):
        fresh = _fresh(spec, tmp_path, changed(m, rule, alt))
        pq = fresh.per_query
        for row in rows.itertuples(index=False):
            ctx = (case, rule, alt, row.kind, row.system, row.cutoff)
            if row.kind == "system":
                want = fresh.mean(row.system, row.cutoff)
                n_used = fresh.summary["systems"][row.system][f"ndcg_at_{row.cutoff}"]["n_evaluated"]
                if rule == "declared":
                    declared_sys[(row.system, row.cutoff)] = want
                    assert _close(want, result.mean(row.system, row.cutoff)), ctx
            else:
                assert row.baseline == baseline and row.system != baseline, ctx
                a = pq[(pq.system == row.system) & (pq.cutoff.astype(str) == row.cutoff)].set_index("query_id")
                b = pq[(pq.system == baseline) & (pq.cutoff.astype(str) == row.cutoff)].set_index("query_id")
                ok = a["ndcg"].notna() & b["ndcg"].notna()
                d = a.loc[ok, "ndcg"] - b.loc[ok, "ndcg"]
                w = a.loc[ok, "weight"]
                want = float((w * d).sum() / w.sum()) if ok.any() else float("nan")
                n_used = int(ok.sum())
                if rule == "declared":
                    declared_cmp[(row.system, row.cutoff)] = want
            assert _close(row.value, want), (ctx, row.value, want)
            assert row.n_used == n_used, ctx
            checked += 1
    assert checked == len(table)
    # declared / change / sign_flip are consistent with the declared rows
    for row in table.itertuples(index=False):
        base = (declared_sys if row.kind == "system" else declared_cmp)[(row.system, row.cutoff)]
        assert _close(row.declared, base)
        assert _close(row.change, row.value - row.declared)
        flip = (
            row.kind == "comparison"
            and abs(row.value) > 1e-12
            and abs(row.declared) > 1e-12
            and np.sign(row.value) != np.sign(row.declared)
        )
        assert bool(row.sign_flip) == bool(flip), row
    # some alternatives really move the numbers on this data (the check above is not vacuous)
    assert (table["change"].abs() > 1e-6).sum() > 10


def test_sensitivity_needs_the_kept_data(tmp_path):
    systems = write_random_data(tmp_path)
    result = ndcg_mlflow.evaluate(full_spec({"preset": "trec_eval"}, systems, comparison=False), base_dir=tmp_path)
    with pytest.raises(ValueError, match="keep_data"):
        sensitivity(result)
    # report.sensitivity computes the alternatives beside the declared numbers, one run at a time (no joined rows
    # kept); the table equals the one recomputed from the rows a keep_data evaluation kept
    spec = full_spec({"preset": "trec_eval"}, systems, comparison=False, report=True)
    with_report = ndcg_mlflow.evaluate(spec, base_dir=tmp_path)
    assert with_report.sensitivity is not None and not with_report.prepared
    kept = ndcg_mlflow.evaluate(spec, base_dir=tmp_path, engine=Local(keep_data=True))
    again = sensitivity(kept)
    pd.testing.assert_frame_equal(with_report.sensitivity, again, check_exact=True)
    assert set(with_report.sensitivity["kind"]) == {"system"}  # no comparison section: systems only


# --------------------------------------------------------------------------- sensitivity: a sign flip


def _write_flip_case(folder: Path) -> Path:
    """q1: base shows d1 (2), an unjudged x, then d2 (1): 2.5 / IDCG. cand ties d1 and d2 at the top: ties by
    id descending put d2 first (worse than base), id ascending or the displayed ranks put d1 first (better)."""
    (folder / "qrels.txt").write_text("q1 0 d1 2\nq1 0 d2 1\nq2 0 e1 1\nq2 0 e2 0\nq3 0 f1 1\n")
    (folder / "base.run").write_text(
        "q1 Q0 d1 1 3.0 base\nq1 Q0 x 2 2.0 base\nq1 Q0 d2 3 1.0 base\n"
        "q2 Q0 e1 1 2.0 base\nq2 Q0 e2 2 1.0 base\nq3 Q0 f1 1 1.0 base\n"
    )
    (folder / "cand.run").write_text(
        "q1 Q0 d1 1 5.0 cand\nq1 Q0 d2 2 5.0 cand\nq2 Q0 e1 1 2.0 cand\nq2 Q0 e2 2 1.0 cand\nq3 Q0 f1 1 1.0 cand\n"
    )
    spec = full_spec(
        {"preset": "trec_eval", "cutoffs": [5, "all"]}, {"base": "base.run", "cand": "cand.run"}, name="flip"
    )
    path = folder / "flip.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_tie_rule_flipping_a_comparison_is_flagged(tmp_path):
    path = _write_flip_case(tmp_path)
    result = ndcg_mlflow.evaluate(path, engine=Local(keep_data=True))
    table = sensitivity(result)
    cmp = table[(table["kind"] == "comparison") & (table["cutoff"] == "all")].set_index(["rule", "alternative"])
    idcg = 2 + 1 / math.log2(3)
    base_q1 = 2.5 / idcg
    desc_q1 = (1 + 2 / math.log2(3)) / idcg
    declared = (desc_q1 - base_q1) / 3
    assert cmp.loc[("declared", "as declared"), "value"] == pytest.approx(declared, abs=1e-12)
    assert declared < 0
    assert cmp.loc[("ties", "id_ascending"), "value"] == pytest.approx((1 - base_q1) / 3, abs=1e-12)
    assert bool(cmp.loc[("ties", "id_ascending"), "sign_flip"]) is True
    assert bool(cmp.loc[("ties", "displayed_order"), "sign_flip"]) is True
    avg_q1 = 1.5 * (1 + 1 / math.log2(3)) / idcg  # still below base: no flip
    assert cmp.loc[("ties", "average"), "value"] == pytest.approx((avg_q1 - base_q1) / 3, abs=1e-12)
    assert bool(cmp.loc[("ties", "average"), "sign_flip"]) is False
    flipped = set(cmp.index[cmp["sign_flip"].astype(bool)])
    assert flipped == {("ties", "id_ascending"), ("ties", "displayed_order")}
    assert not table.loc[table["kind"] == "system", "sign_flip"].any()

    text = format_sensitivity(table, "all")
    assert "FLIP: cand vs base changes sign under ties = id_ascending" in text
    assert "FLIP: cand vs base changes sign under ties = displayed_order" in text


def test_explain_sensitivity_command_prints_the_tables(tmp_path, capsys):
    path = _write_flip_case(tmp_path)
    assert main(["explain", str(path), "--sensitivity", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "- ties: id_descending  [from preset trec_eval]" in out  # the explanation comes first
    for label in ("5", "all"):
        assert f"sensitivity at nDCG@{label} (one rule changed at a time; declared value first):" in out
    assert out.index("How other tools' nDCG differs") < out.index("sensitivity at nDCG@5")
    assert "FLIP: cand vs base changes sign under ties = id_ascending" in out
    result = ndcg_mlflow.evaluate(path, engine=Local(keep_data=True))
    section = out[out.index("sensitivity at nDCG@all") :]
    declared_line = next(ln for ln in section.splitlines() if ln.startswith("declared"))
    cells = declared_line.split()
    assert cells[-3:] == [
        f"{result.mean('base', 'all'):.4f}",
        f"{result.mean('cand', 'all'):.4f}",
        f"{result.mean('cand', 'all') - result.mean('base', 'all'):+.4f}",
    ]


def test_explain_sensitivity_without_comparison(small, capsys):
    path = _write_spec(small, {"preset": "trec_eval", "cutoffs": [5, "all"]})
    assert main(["explain", str(path), "--sensitivity", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "sensitivity at nDCG@5" in out and "sensitivity at nDCG@all" in out
    assert "no alternative flips the sign of a comparison at this cutoff." in out


# --------------------------------------------------------------------------- report.sensitivity in `run`


@pytest.mark.integration
def test_report_sensitivity_is_written_and_logged(tracking_uri, demo_copy, tmp_path, capsys):
    spec_path = demo_copy / "demo.yaml"
    text = spec_path.read_text()
    assert "sensitivity: true" in text
    spec_path.write_text(text.replace("resamples: 10000", "resamples: 200"))
    out = tmp_path / "out"
    assert main(["run", str(spec_path), "--out", str(out), "--quiet"]) == 0
    local = out / "sensitivity.csv"
    assert local.is_file()
    table = pd.read_csv(local, dtype={"cutoff": str, "baseline": str}, keep_default_na=False, na_values=[""])
    assert list(table.columns) == [
        "rule",
        "alternative",
        "kind",
        "system",
        "baseline",
        "cutoff",
        "declared",
        "value",
        "change",
        "sign_flip",
        "n_used",
    ]
    summary = json.loads((out / "summary.json").read_text())
    declared = table[(table["rule"] == "declared") & (table["kind"] == "system")]
    assert len(declared) == 3 * 3
    for row in declared.itertuples(index=False):
        assert row.value == pytest.approx(summary["systems"][row.system][f"ndcg_at_{row.cutoff}"]["mean"], abs=1e-12)
    assert set(table.loc[table["kind"] == "comparison", "baseline"]) == {"bm25"}

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name("demo-product-search")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1
    pid = parents[0].info.run_id
    names = {a.path for a in client.list_artifacts(pid)}
    assert {"sensitivity.csv", "sensitivity_table.json"} <= names
    logged_csv = Path(client.download_artifacts(pid, "sensitivity.csv", str(tmp_path / "dl")))
    assert logged_csv.read_bytes() == local.read_bytes()
    logged = json.loads(
        Path(client.download_artifacts(pid, "sensitivity_table.json", str(tmp_path / "dl2"))).read_text()
    )
    assert logged["columns"] == list(table.columns)
    assert len(logged["data"]) == len(table)


def test_no_sensitivity_report_unless_asked(small, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _write_spec(small, {"preset": "trec_eval"}, report=False)
    out = tmp_path / "o"
    assert main(["run", str(path), "--no-mlflow", "--out", str(out), "--quiet"]) == 0
    assert (out / "summary.json").is_file() and not (out / "sensitivity.csv").exists()
    path = _write_spec(small, {"preset": "trec_eval"}, report=True)
    out2 = tmp_path / "o2"
    assert main(["run", str(path), "--no-mlflow", "--out", str(out2), "--quiet"]) == 0
    assert (out2 / "sensitivity.csv").is_file()


# --------------------------------------------------------------------------- undefined means under an alternative


def _write_undefined_case(folder: Path) -> Path:
    """Under ``ideal: candidates`` system a returns nothing relevant on its only valid query: every query is
    empty-ideal and excluded, so a's mean (and a's comparison) is undefined under that alternative."""
    (folder / "qrels.txt").write_text("q1 0 d1 2\nq1 0 d2 1\n")
    (folder / "a.run").write_text("q1 Q0 x 1 3 a\n")
    (folder / "b.run").write_text("q1 Q0 d2 1 3 b\n")
    spec = full_spec(
        {"preset": "trec_eval", "cutoffs": [5], "empty_ideal": "exclude"},
        {"a": "a.run", "b": "b.run"},
        report=True,
        name="undefined",
    )
    path = folder / "undefined.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _check_undefined_rows(table: pd.DataFrame) -> None:
    cand = table[(table["rule"] == "ideal") & (table["alternative"] == "candidates")]
    a = cand[(cand["kind"] == "system") & (cand["system"] == "a")].iloc[0]
    assert math.isnan(a["value"]) and math.isnan(a["change"]) and a["n_used"] == 0
    cmp = cand[cand["kind"] == "comparison"].iloc[0]
    assert math.isnan(cmp["value"]) and math.isnan(cmp["change"]) and not bool(cmp["sign_flip"])
    b = cand[(cand["kind"] == "system") & (cand["system"] == "b")].iloc[0]
    assert b["value"] == pytest.approx(1.0)  # the defined mean next to it is still a number


def test_undefined_alternative_mean_flows_through_as_nan(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = _write_undefined_case(tmp_path)
    result = ndcg_mlflow.evaluate(path)
    _check_undefined_rows(result.sensitivity)

    out = tmp_path / "out"
    assert main(["run", str(path), "--no-mlflow", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    lines = (out / "sensitivity.csv").read_text().splitlines()
    row = next(ln for ln in lines if ln.startswith("ideal,candidates,system,a,"))
    assert row.split(",")[7:9] == ["", ""]  # value and change: empty, not 0 and not "nan"

    from ndcg_mlflow.render.report import load_bundle, render_markdown, write_reports

    bundle = load_bundle(out)
    _check_undefined_rows(bundle.sensitivity)
    kinds = bundle.sensitivity["kind"]
    assert (bundle.sensitivity.loc[kinds == "system", "baseline"] == "").all()  # strings stay strings
    assert (bundle.sensitivity.loc[kinds == "comparison", "baseline"] == "a").all()
    html_path, md_path = write_reports(out)  # renders again from the folder
    page = html_path.read_text()
    assert "<td class='l'>ideal</td><td class='l'>candidates</td><td>–</td>" in page
    assert "nan" not in page.split("Sensitivity to the declared choices")[1].split("</table>")[0]
    render_markdown(bundle)

    assert main(["explain", str(path), "--sensitivity", "--quiet"]) == 0
    text = capsys.readouterr().out
    line = next(ln for ln in text.splitlines() if ln.startswith("ideal") and "candidates" in ln)
    assert line.split()[2:] == ["undefined", "+0.6199", "undefined"]
    assert "nan" not in text
    assert format_sensitivity(result.sensitivity, "5").count("undefined") >= 2


@pytest.mark.integration
def test_undefined_alternative_mean_is_logged_to_mlflow(tracking_uri, tmp_path, capsys):
    path = _write_undefined_case(tmp_path)
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name("undefined")
    pid = next(
        r.info.run_id for r in client.search_runs([exp.experiment_id]) if "mlflow.parentRunId" not in r.data.tags
    )
    logged = json.loads(
        Path(client.download_artifacts(pid, "sensitivity_table.json", str(tmp_path / "dl"))).read_text()
    )
    cols = logged["columns"]
    row = next(
        r
        for r in logged["data"]
        if r[cols.index("rule")] == "ideal"
        and r[cols.index("alternative")] == "candidates"
        and r[cols.index("system")] == "a"
        and r[cols.index("kind")] == "system"
    )
    assert row[cols.index("value")] is None and row[cols.index("change")] is None  # JSON null, not 0
    assert row[cols.index("declared")] == 0.0


NAME = "odd\nerror: forged\x1b[31m\x07 \\ end"  # a spec name with a line break, an escape sequence and a bell


def test_explain_and_validate_show_a_spec_name_on_one_line_escaped(small, capsys):
    """The spec's name (and any text from the spec or the data's paths) is shown as terminal text: its line break,
    escape and bell written as Python escapes on the line that names it, in ``explain``, ``validate`` and
    ``explanation.txt`` alike, never a line of its own."""
    from ndcg_mlflow.render.format import term_text

    path = _write_spec(small, {"preset": "trec_eval"}, name=NAME)
    assert load_spec(path).name == NAME
    shown = term_text(NAME)
    assert "\n" not in shown and "\x1b" not in shown and "\\\\ end" in shown
    text = explain(load_spec(path))
    assert text.splitlines()[0] == f"Evaluation spec '{shown}' ({path})"
    assert main(["validate", str(path), "--spec-only"]) == 0
    out = capsys.readouterr().out
    assert f"  name: {shown}" in out.splitlines()
    for lines in (text.splitlines(), out.splitlines()):
        assert not any(line.startswith("error: forged") or "\x1b" in line or "\x07" in line for line in lines)


def test_validate_names_a_data_file_on_one_line_escaped(small, capsys):
    """The rows read from a run whose file name holds a line break and an escape sequence are said on one line,
    the name as terminal text."""
    from ndcg_mlflow.render.format import term_text

    odd = "b\nerror: forged\x1b[31m.run"
    (small / "b.run").rename(small / odd)
    path = small / "spec.yaml"
    path.write_text(yaml.safe_dump(full_spec({"preset": "trec_eval"}, {"a": "a.run", "b": odd}, comparison=False)))
    assert main(["validate", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("  system:b: ") and line.endswith(term_text(odd)) for line in lines), lines
    assert not any(line.startswith("error:") or "\x1b" in line for line in lines), lines
