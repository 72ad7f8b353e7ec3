"""``ndcg-mlflow plan`` on real output folders of the demo's specs (evaluated here, logging nothing): the printed
numbers against the planning functions applied to the test's own reading of per_query.csv with pandas, the
declared decision's plan, the options, the error cases, and a run read back from MLflow."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import CONFIGS
from scipy import stats as st

from ndcg_mlflow.cli import main
from ndcg_mlflow.statistics import inference as stats
from ndcg_mlflow.statistics.planning import MOST_QUERIES, decision_plan, mde, queries_needed, query_sd


def _evaluate(spec: Path, out: Path, *sets: str) -> Path:
    """``ndcg-mlflow run SPEC --out OUT --no-mlflow --quiet`` from a temporary working folder."""
    old = os.getcwd()
    os.chdir(out.parent)
    try:
        code = main(["run", str(spec), "--out", str(out), "--no-mlflow", "--quiet", *[f"--set={s}" for s in sets]])
    finally:
        os.chdir(old)
    assert code in (0, 4)  # 4: the declared decision failed, the folder is written all the same
    return out


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("plan")
    return {
        "demo": _evaluate(CONFIGS / "demo.yaml", root / "demo"),
        "weighted": _evaluate(
            CONFIGS / "demo_weighted.yaml",
            root / "weighted",
            "decision={key: ndcg_at_10, rule: non_inferiority, margin: 0.02}",
        ),
        "superiority": _evaluate(
            CONFIGS / "demo.yaml", root / "superiority", "decision={key: ndcg_at_5, rule: superiority, margin: 0.01}"
        ),
        "no comparison": _evaluate(CONFIGS / "demo.yaml", root / "no_comparison", "comparison=null"),
    }


def _plan(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["plan", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _table(out: str) -> list[list[str]]:
    """The table's rows (the heading and the explanation lines left out)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("candidate "))
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("n: "):
            break
        rows.append(line.split())
    return rows


def _pairs(folder: Path, candidate: str, cutoff: str) -> tuple[np.ndarray, np.ndarray]:
    """The test's own reading: candidate - baseline (bm25) on the queries with an nDCG in both, weights over the
    largest weight of the evaluation."""
    table = pd.read_csv(
        folder / "per_query.csv",
        dtype={"system": str, "query_id": str, "cutoff": str},
        keep_default_na=False,
        na_values=[""],
    )
    base = table[(table.system == "bm25") & (table.cutoff == cutoff)].set_index("query_id")
    cand = table[(table.system == candidate) & (table.cutoff == cutoff)].set_index("query_id")
    both = base[["ndcg", "weight"]].join(cand[["ndcg"]].rename(columns={"ndcg": "ndcg_cand"}), how="inner").dropna()
    return (both.ndcg_cand - both.ndcg).to_numpy(), both.weight.to_numpy() / table.weight.max()


def _check_rows(rows, folder: Path, *, confidence: float, power: float, margin: float) -> None:
    summary = json.loads((folder / "summary.json").read_text())
    compared = {(c["candidate"], c["cutoff"]): c for c in summary["comparisons"]}
    for candidate, cutoff, n, n_eff, delta, sd, bound, smallest, needed in rows:
        d, w = _pairs(folder, candidate, cutoff)
        # sigma's one-sided 90% upper bound on the test's degrees of freedom (n - 1 under equal weights)
        nu = d.size - 1 if np.ptp(w) == 0 else stats.weighted_t(d, w)[2]
        assert float(bound) == pytest.approx(query_sd(d, w) * math.sqrt(nu / st.chi2.ppf(0.1, nu)), abs=5.1e-5)
        assert int(n) == d.size == compared[(candidate, cutoff)]["n_paired"]
        assert float(n_eff) == pytest.approx(w.sum() ** 2 / (w**2).sum(), abs=0.051)
        assert float(delta) == pytest.approx(np.sum(w * d) / np.sum(w), abs=5.1e-5)
        assert float(delta) == pytest.approx(compared[(candidate, cutoff)]["delta"], abs=5.1e-5)
        assert float(sd) == pytest.approx(query_sd(d, w), abs=5.1e-5)
        assert float(smallest) == pytest.approx(mde(d, w, confidence, power), abs=5.1e-5)
        assert int(needed.replace(",", "")) == queries_needed(d, w, confidence, power, distance=margin)


def test_the_table_plans_every_comparison_from_the_per_query_table(folders, capsys):
    code, out, err = _plan(capsys, str(folders["demo"]), "--margin", "0.02")
    assert code == 0 and err == ""
    rows = _table(out)
    assert [(r[0], r[1]) for r in rows] == [
        (c, k) for c in ("reranker-v2", "dense-ties") for k in ("5", "10", "all")
    ]  # summary.json's order of comparisons
    _check_rows(rows, folders["demo"], confidence=0.95, power=0.8, margin=0.02)
    assert "95% two-sided weighted t interval" in out and "power 0.8, margin 0.02" in out
    assert "declared decision" not in out  # the demo declares none


def test_weights_and_the_declared_non_inferiority_decision(folders, capsys):
    folder = folders["weighted"]
    code, out, _ = _plan(capsys, str(folder), "--margin", "0.05", "--power", "0.9")
    assert code == 0
    rows = _table(out)
    assert all(float(r[3]) < int(r[2]) for r in rows)  # unequal weights: n_eff below n
    _check_rows(rows, folder, confidence=0.95, power=0.9, margin=0.05)
    assert "the declared decision (non-inferiority at nDCG@10, margin 0.02), power 0.9:" in out
    for candidate in ("reranker-v2", "dense-ties"):
        d, w = _pairs(folder, candidate, "10")
        plan = decision_plan(d, w, 0.95, 0.9, "non_inferiority", 0.02)
        line = next(line for line in out.splitlines() if line.startswith(f"  {candidate}: "))
        assert line.startswith(f"  {candidate}: {'detectable' if plan['detectable'] else 'not detectable'} at ")
        assert f"; {plan['queries_needed']:,} queries for power 0.9" in line
        assert f"mde {plan['mde']:.4f} against a distance of 0.0200" in line


def test_unequal_weights_say_the_bound_they_are_planned_at(folders, capsys):
    """The plan names the upper bound on the weights' log-scale dispersion it assumed: the largest over the rows of
    s sqrt((m - 1) / chi2_(0.1, m - 1)), s the standard deviation of the m paired queries' log weights."""
    folder = folders["weighted"]
    _, out, _ = _plan(capsys, str(folder), "--margin", "0.05")
    bounds = []
    for candidate, cutoff in {(r[0], r[1]) for r in _table(out)}:
        w = _pairs(folder, candidate, cutoff)[1]
        bounds.append(np.std(np.log(w), ddof=1) * math.sqrt((w.size - 1) / st.chi2.ppf(0.1, w.size - 1)))
    assert f"at its 90% upper confidence bound from these queries (up to {max(bounds):.2f})" in out
    _, out, _ = _plan(capsys, str(folders["demo"]), "--margin", "0.05")
    assert "unequal weights" not in out  # (equal weights: planned at their n exactly)


def test_the_declared_superiority_decision_says_when_no_number_of_queries_helps(folders, capsys):
    folder = folders["superiority"]
    code, out, _ = _plan(capsys, str(folder), "--margin", "0.05", "--key", "5")
    assert code == 0
    lines = out.splitlines()
    assert "  dense-ties: the observed difference does not exceed the margin" in lines  # observed -0.005 at nDCG@5
    d, w = _pairs(folder, "reranker-v2", "5")
    plan = decision_plan(d, w, 0.95, 0.8, "superiority", 0.01)
    assert plan["distance"] == pytest.approx(np.sum(w * d) / np.sum(w) - 0.01)
    sd_up = plan["sd"] * math.sqrt((d.size - 1) / st.chi2.ppf(0.1, d.size - 1))  # (equal weights: n - 1)
    ending = f"; {plan['queries_needed']:,} queries for power 0.8, planned at σ {sd_up:.4f} (its 90% upper bound)"
    assert any(line.endswith(ending) for line in lines)


def test_a_tiny_margin_is_answered_with_more_queries_than_any_plan(folders, capsys, tmp_path):
    """--margin 1e-200 (and a declared decision.margin of 1e-200): more than 2^53 queries, not an overflow."""
    code, out, err = _plan(capsys, str(folders["demo"]), "--margin", "1e-200")
    assert code == 0 and err == ""
    rows = _table(out)
    assert len(rows) == 6 and all(r[-1] == f">{MOST_QUERIES:,}" for r in rows)
    folder = _evaluate(
        CONFIGS / "demo.yaml", tmp_path / "tiny", "decision={key: ndcg_at_10, rule: non_inferiority, margin: 1.0e-200}"
    )
    summary = json.loads((folder / "summary.json").read_text())
    assert [c["queries_needed"] for c in summary["comparisons"] if c["key"] == "ndcg_at_10"] == [None, None]
    code, out, _ = _plan(capsys, str(folder), "--margin", "0.02")
    assert code == 0
    assert f"  reranker-v2: more than {MOST_QUERIES:,} queries would be needed" in out.splitlines()


@pytest.mark.parametrize("key", ["10", "ndcg_at_10", "nDCG@10"])
def test_one_key_at_another_confidence(folders, capsys, key):
    code, out, _ = _plan(capsys, str(folders["demo"]), "--margin", "0.03", "--key", key, "--confidence", "0.9")
    assert code == 0
    rows = _table(out)
    assert [(r[0], r[1]) for r in rows] == [("reranker-v2", "10"), ("dense-ties", "10")]
    _check_rows(rows, folders["demo"], confidence=0.9, power=0.8, margin=0.03)
    assert "the 90% two-sided" in out


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--margin", "0"], "--margin 0: expected a positive difference of nDCG"),
        (["--margin", "-0.01"], "--margin -0.01: expected a positive difference"),
        (["--margin", "nan"], "--margin nan: expected a positive difference"),
        (["--margin", "inf"], "--margin inf: expected a positive difference"),
        (["--margin", "0.01", "--power", "1"], "--power 1: expected a probability strictly between 0 and 1"),
        (["--margin", "0.01", "--power", "0"], "--power 0: expected a probability"),
        (["--margin", "0.01", "--confidence", "1.5"], "--confidence 1.5: expected a level strictly between 0 and 1"),
        (["--margin", "0.01", "--key", "20"], "--key '20': the evaluation compared ndcg_at_5, ndcg_at_10, ndcg_at_all"),
    ],
)
def test_bad_options_exit_2_saying_what_was_expected(folders, capsys, argv, words):
    code, out, err = _plan(capsys, str(folders["demo"]), *argv)
    assert code == 2 and out == ""
    assert words in err


def test_a_missing_margin_is_a_usage_error(folders, capsys):
    with pytest.raises(SystemExit) as done:
        main(["plan", str(folders["demo"])])
    assert done.value.code == 2
    assert "--margin" in capsys.readouterr().err


def test_an_evaluation_without_comparison_exits_2(folders, capsys):
    code, _, err = _plan(capsys, str(folders["no comparison"]), "--margin", "0.01")
    assert code == 2
    assert "the evaluation compared no candidate with a baseline" in err


def test_a_folder_without_its_tables_exits_2_naming_the_file(folders, capsys, tmp_path):
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(folders["demo"] / "summary.json", partial)
    code, _, err = _plan(capsys, str(partial), "--margin", "0.01")
    assert code == 2
    assert f"{partial / 'per_query.csv'}: not found" in err and "plan reads the per-query table" in err
    (partial / "summary.json").unlink()
    code, _, err = _plan(capsys, str(partial), "--margin", "0.01")
    assert code == 2 and f"{partial / 'summary.json'}: not found" in err


def test_a_bad_weight_in_the_per_query_table_names_its_line(folders, capsys, tmp_path):
    folder = tmp_path / "edited"
    shutil.copytree(folders["demo"], folder)
    _edit_cell(folder, 7, "weight", "-1")
    code, _, err = _plan(capsys, str(folder), "--margin", "0.01")
    assert code == 2
    assert f"{folder / 'per_query.csv'}:7: column weight: expected a finite positive weight, found -1" in err


@pytest.mark.parametrize("scale", ["1e300", "1e-300"])
def test_weights_at_the_ends_of_the_doubles_plan_as_their_ratios(folders, capsys, tmp_path, scale):
    """Every weight of a hand-edited per_query.csv times 1e300 (or 1e-300): the same plan as the evaluation's own
    weights (only their ratios matter); one query's weight 1e300 and another's 1e-300, whose ratio no double
    holds: refused naming the line (it raised a ValueError)."""
    folder = tmp_path / "scaled"
    shutil.copytree(folders["weighted"], folder)
    table = pd.read_csv(folder / "per_query.csv", dtype=str, keep_default_na=False)
    table["weight"] = [repr(float(w) * float(scale)) for w in table["weight"]]
    table.to_csv(folder / "per_query.csv", index=False)
    code, out, err = _plan(capsys, str(folder), "--margin", "0.02")
    assert code == 0, err
    code, expected, _ = _plan(capsys, str(folders["weighted"]), "--margin", "0.02")
    assert code == 0
    assert out.replace(str(folder), "F") == expected.replace(str(folders["weighted"]), "F")
    first, second = table["query_id"].unique()[:2]
    table["weight"] = "1"
    table.loc[table["query_id"] == first, "weight"] = "1e300"
    table.loc[table["query_id"] == second, "weight"] = "1e-300"
    table.to_csv(folder / "per_query.csv", index=False)
    code, _, err = _plan(capsys, str(folder), "--margin", "0.02")
    line = int(np.flatnonzero((table["query_id"] == second).to_numpy())[0]) + 2
    assert code == 2, err
    assert f"{folder / 'per_query.csv'}:{line}: column weight: query {second!r} has the weight 1e-300" in err
    assert "cannot be represented" in err and "Traceback" not in err


def test_neither_a_folder_nor_a_run_id_exits_2(capsys, tmp_path):
    code, _, err = _plan(capsys, str(tmp_path / "nowhere"), "--margin", "0.01")
    assert code == 2
    assert "no such folder, and not an MLflow run id (32 hexadecimal digits)" in err


# --------------------------------------------------------------------------- from MLflow


def test_a_logged_evaluation_is_planned_from_its_run(folders, capsys, tracking_uri, tmp_path):
    """The folder uploaded to a store of this test's own, then planned from the evaluation's run id and from one of
    its systems' runs: the same table as from the folder."""
    folder = tmp_path / "uploaded"
    shutil.copytree(folders["weighted"], folder)
    assert main(["upload", str(folder), "--tracking-uri", tracking_uri]) == 0
    logged = capsys.readouterr().out
    run_id = re.search(r"evaluation run: ([0-9a-f]{32})", logged).group(1)
    system_run = re.search(r"system run bm25: ([0-9a-f]{32})", logged).group(1)
    _, from_folder, _ = _plan(capsys, str(folders["weighted"]), "--margin", "0.02")
    for rid in (run_id, system_run):
        code, out, err = _plan(capsys, rid, "--margin", "0.02", "--tracking-uri", tracking_uri)
        assert code == 0, err
        assert f"(MLflow run {rid})" in out.splitlines()[0]
        assert out.splitlines()[1:] == from_folder.splitlines()[1:]
    code, _, err = _plan(capsys, "0" * 32, "--margin", "0.02", "--tracking-uri", tracking_uri)
    assert code == 2 and f"run {'0' * 32!r} not found" in err


# --------------------------------------------------------------------------- summary.json edited by hand

_SENTINEL = "__a_literal__"
# what plan reads of summary.json (each edit of it exits 2 naming the field, or 0 when the value is still valid) ...
_READ = [
    "name",
    "models",
    "comparisons",
    "comparisons[0]",
    "comparisons[0].key",
    "comparisons[0].baseline",
    "comparisons[0].candidate",
    "spec",
    "spec.uncertainty.confidence",
    "decision",
    "decision.key",
    "decision.rule",
    "decision.margin",
]
# ... and fields it does not read: any edit leaves the same answer
_IGNORED = ["n_queries", "notes", "systems", "comparisons[0].delta", "comparisons[0].p_corrected", "decision.outcome"]
_EDITS = {
    "absent": None,
    "null": ("value", None),
    "text": ("value", "abc"),
    "true": ("value", True),
    "negative": ("value", -1),
    "zero": ("value", 0),
    "half": ("value", 0.5),
    "list": ("value", []),
    "object": ("value", {}),
    "1e999": ("literal", "1e999"),
    "-1e999": ("literal", "-1e999"),
    "NaN": ("literal", "NaN"),
    "Infinity": ("literal", "Infinity"),
}


def _edited(summary: dict, path: str, edit) -> str:
    """summary.json's text with the field at ``path`` removed (``edit`` None) or replaced."""
    data = json.loads(json.dumps(summary))
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path.replace("spec.uncertainty.confidence", "spec.\0"))
    parts = [p.replace("\0", "uncertainty.confidence") for p in parts]
    node = data
    for p in parts[:-1]:
        node = node[int(p[1:-1])] if p.startswith("[") else node[p]
    last = parts[-1]
    index = int(last[1:-1]) if last.startswith("[") else last
    if edit is None:
        if isinstance(node, list):
            node.pop(index)
        else:
            node.pop(index, None)
    else:
        kind, value = edit
        node[index] = _SENTINEL if kind == "literal" else value
    text = json.dumps(data, indent=2)
    return text.replace(f'"{_SENTINEL}"', edit[1]) if edit is not None and edit[0] == "literal" else text


@pytest.mark.parametrize("path", _READ + _IGNORED)
def test_a_summary_edited_by_hand_exits_2_naming_the_field_or_gives_the_same_answer(folders, capsys, tmp_path, path):
    """Every edit of a field of summary.json (removed, another type, a non-finite number): plan exits 2 with a
    message naming the file and the field, or 0; an edit of a field plan does not read gives the unedited answer."""
    source = folders["weighted"]
    summary = json.loads((source / "summary.json").read_text(encoding="utf-8"))
    assert summary["decision"]["key"] == "ndcg_at_10" and summary["comparisons"]
    code, want, err = _plan(capsys, str(source), "--margin", "0.01")
    assert code == 0, err
    folder = tmp_path / "edited"
    shutil.copytree(source, folder)
    for name, edit in _EDITS.items():
        (folder / "summary.json").write_text(_edited(summary, path, edit), encoding="utf-8")
        code, out, err = _plan(capsys, str(folder), "--margin", "0.01")
        assert "Traceback" not in err, (path, name, err)
        assert code in (0, 2), (path, name, code, err)
        if code == 2:
            assert (
                f"{folder / 'summary.json'}: field " in err
                or "compared no candidate" in err
                or ("records no confidence" in err)
            ), (path, name, err)
            assert path in err or "compared no candidate" in err or "records no confidence" in err, (path, name, err)
        if path in _IGNORED:
            assert code == 0 and out == want.replace(str(source), str(folder)), (path, name)


@pytest.mark.parametrize(
    ("path", "edit", "words"),
    [
        (
            "decision.margin",
            ("value", "abc"),
            "field decision.margin: expected a finite number at or above 0, found 'abc'",
        ),
        ("decision.margin", ("literal", "1e999"), "field decision.margin: expected a finite number at or above 0"),
        ("spec.uncertainty.confidence", ("literal", "1e999"), "field spec.uncertainty.confidence: expected a level"),
        ("spec.uncertainty.confidence", ("value", True), "field spec.uncertainty.confidence: expected a level"),
        ("comparisons[0].key", ("value", 10), "field comparisons[0].key: expected an nDCG key such as ndcg_at_10"),
        ("decision.rule", ("value", "best"), "field decision.rule: expected superiority or non_inferiority"),
        ("decision.key", None, "field decision.key: expected one of the compared keys"),
    ],
)
def test_the_edits_that_ended_in_a_traceback_exit_2(folders, capsys, tmp_path, path, edit, words):
    summary = json.loads((folders["weighted"] / "summary.json").read_text(encoding="utf-8"))
    folder = tmp_path / "edited"
    shutil.copytree(folders["weighted"], folder)
    (folder / "summary.json").write_text(_edited(summary, path, edit), encoding="utf-8")
    code, _, err = _plan(capsys, str(folder), "--margin", "0.01")
    assert code == 2 and f"{folder / 'summary.json'}: {words}" in err, err


def test_a_non_finite_ndcg_in_the_per_query_table_names_its_line(folders, capsys, tmp_path):
    folder = tmp_path / "edited"
    shutil.copytree(folders["demo"], folder)
    _edit_cell(folder, 5, "ndcg", "1e999")
    code, _, err = _plan(capsys, str(folder), "--margin", "0.01")
    assert code == 2
    assert f"{folder / 'per_query.csv'}:5: column ndcg: expected an nDCG in [0, 1] or an empty field" in err


def _edit_cell(folder: Path, line: int, column: str, value: str) -> None:
    """per_query.csv with the field ``column`` of line ``line`` (1-based, the header is line 1) replaced."""
    lines = (folder / "per_query.csv").read_text().splitlines(keepends=True)
    head = lines[0].rstrip("\n").split(",")
    cells = lines[line - 1].rstrip("\n").split(",")
    cells[head.index(column)] = value
    lines[line - 1] = ",".join(cells) + "\n"
    (folder / "per_query.csv").write_text("".join(lines))


@pytest.mark.parametrize("value", ["5", "-0.5", "1.0000001"])
def test_an_ndcg_outside_0_1_in_the_per_query_table_names_its_line(folders, capsys, tmp_path, value):
    """No nDCG lies outside [0, 1]: an edited one is refused, not planned with (a difference of 4.5 planned as
    data)."""
    folder = tmp_path / "edited"
    shutil.copytree(folders["demo"], folder)
    _edit_cell(folder, 5, "ndcg", value)
    code, _, err = _plan(capsys, str(folder), "--margin", "0.01")
    assert code == 2, err
    assert f"{folder / 'per_query.csv'}:5: column ndcg: expected an nDCG in [0, 1] or an empty field" in err


def test_a_query_weighted_differently_on_two_rows_names_its_line(folders, capsys, tmp_path):
    """A query's weight is one number: a row that gives it another (one system's rows edited) is refused, naming
    the line, not planned with the baseline's weight."""
    folder = tmp_path / "edited"
    shutil.copytree(folders["weighted"], folder)
    frame = pd.read_csv(folder / "per_query.csv", dtype={"query_id": str, "system": str, "cutoff": str})
    first = frame["query_id"].iloc[0]
    later = int(np.flatnonzero((frame["query_id"] == first).to_numpy())[1])
    _edit_cell(folder, later + 2, "weight", "12345")
    code, _, err = _plan(capsys, str(folder), "--margin", "0.01")
    assert code == 2, err
    assert f"{folder / 'per_query.csv'}:{later + 2}: column weight: query {first!r} has the weight 12345 here" in err


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000 + "]" * 100_000, '{"a": ' * 50_000 + "1" + "}" * 50_000, '{"name": ' + "9" * 5000 + "}"],
    ids=["deep list", "deep object", "5000 digits"],
)
def test_a_summary_nested_deeper_than_the_parser_goes_exits_2(folders, capsys, tmp_path, text):
    folder = tmp_path / "edited"
    shutil.copytree(folders["demo"], folder)
    (folder / "summary.json").write_text(text, encoding="utf-8")
    code, _, err = _plan(capsys, str(folder), "--margin", "0.01")
    assert code == 2 and f"{folder / 'summary.json'}: cannot be read as JSON" in err, err


@pytest.mark.parametrize("path", ["spec.uncertainty.confidence", "decision.margin"])
def test_an_integer_beyond_the_largest_double_in_the_summary_names_its_field(folders, capsys, tmp_path, path):
    source = folders["weighted"]
    summary = json.loads((source / "summary.json").read_text(encoding="utf-8"))
    folder = tmp_path / "edited"
    shutil.copytree(source, folder)
    (folder / "summary.json").write_text(_edited(summary, path, ("literal", "1" + "0" * 400)), encoding="utf-8")
    code, _, err = _plan(capsys, str(folder), "--margin", "0.01")
    assert code == 2 and f"{folder / 'summary.json'}: field {path}: expected" in err, err


def test_a_margin_near_the_smallest_double_plans_no_queries(folders, capsys):
    """A margin of 1e-300 needs more queries than any plan gives (the normal approximation's square beyond the
    largest double): more than any plan, as at 1e-200, exit 0, not an OverflowError."""
    code, out, err = _plan(capsys, str(folders["demo"]), "--margin", "1e-300")
    assert code == 0, err
    rows = _table(out)
    assert rows and all(row[-1] == f">{MOST_QUERIES:,}" for row in rows)


def test_plan_names_the_evaluation_on_one_line_escaped(tmp_path, capsys):
    """The evaluation's name (a line break and an escape sequence in it) is shown as terminal text on plan's first
    line, as run shows it: no line of the output is the name's second half."""
    from ndcg_mlflow.render.format import term_text

    out = _evaluate(CONFIGS / "demo.yaml", tmp_path / "odd", 'name="odd\\nerror: forged\\e[31m"')
    name = json.loads((out / "summary.json").read_text())["name"]
    assert name == "odd\nerror: forged\x1b[31m"
    code, text, err = _plan(capsys, str(out), "--margin", "0.02")
    assert code == 0, err
    lines = text.splitlines()
    assert lines[0].startswith(f"{term_text(name)} ({term_text(out)}) — each candidate"), lines[0]
    assert not any(line.startswith("error:") for line in lines) and "\x1b" not in text


def test_the_bounds_the_plan_assumed_are_in_summary_json_the_report_and_the_plan(folders, capsys):
    """Each comparison at the decision's key records the bounds its queries_needed was planned at, each by its
    closed form: sigma's sd sqrt(nu / chi2_(0.1, nu)) on the test's degrees of freedom, the weights' log-scale
    s sqrt((m - 1) / chi2_(0.1, m - 1)); the report's planning table shows them, and plan's paragraph names them."""
    folder = folders["weighted"]
    summary = json.loads((folder / "summary.json").read_text())
    report = (folder / "report.md").read_text()
    _, out, _ = _plan(capsys, str(folder), "--margin", "0.05")
    for c in [c for c in summary["comparisons"] if c["key"] == "ndcg_at_10"]:
        d, w = _pairs(folder, c["candidate"], "10")
        nu = stats.weighted_t(d, w)[2]
        sd_up = query_sd(d, w) * math.sqrt(nu / st.chi2.ppf(0.1, nu))
        logs = np.log(w)
        weights_up = np.std(logs, ddof=1) * math.sqrt((w.size - 1) / st.chi2.ppf(0.1, w.size - 1))
        assert c["plan_sd_bound"] == pytest.approx(sd_up, rel=1e-9)
        assert c["plan_weights_bound"] == pytest.approx(weights_up, rel=1e-9)
        assert c["plan_bound_level"] == 0.9 and c["plan_reason"] is None
        assert f"σ {sd_up:.4f}, weights' log σ {weights_up:.2f}" in report
        line = next(line for line in out.splitlines() if line.startswith(f"  {c['candidate']}: "))
        assert line.endswith(
            f"planned at σ {sd_up:.4f} (its 90% upper bound) and the weights' log-scale σ {weights_up:.2f} "
            f"(its 90% upper bound)"
        )
    assert "σ, the per-query standard deviation of the differences, at its 90% upper confidence bound" in report
