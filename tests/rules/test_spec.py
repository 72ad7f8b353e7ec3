"""Spec validation: every error names the key path and what was expected; nothing is defaulted silently."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import CONFIGS

import ndcg_mlflow
from ndcg_mlflow import SpecError, load_spec
from ndcg_mlflow.spec import cutoff_key

BASE = {
    "spec_version": 1,
    "name": "t",
    "metric": {
        "gain": "exponential",
        "cutoffs": [5, 10, "all"],
        "discount": "log2",
        "ties": "displayed_order",
        "ideal": "judged_catalog",
        "empty_ideal": "exclude",
        "unjudged": "zero",
        "missing_queries": "zero",
    },
    "queries": {"weights": "uniform", "set": None},
    "data": {"qrels": "q.tsv", "systems": {"bm25": "a.run", "dense-v2.1": {"path": "b.csv", "format": "csv"}}},
    "mlflow": {"experiment": "e"},
}


def spec_with(path: str, value=None, delete: bool = False):
    raw = copy.deepcopy(BASE)
    keys = path.split(".")
    node = raw
    for k in keys[:-1]:
        node = node[k]
    if delete:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return raw


def test_valid_spec_resolves_every_field(tmp_path):
    spec = load_spec(BASE, base_dir=tmp_path)
    assert spec.metric.cutoffs == (5, 10, None)
    assert spec.metric.keys == ("ndcg_at_5", "ndcg_at_10", "ndcg_at_all")
    assert spec.systems[1][1].format == "csv"
    assert spec.systems[0][1].path == tmp_path / "a.run"
    resolved = spec.resolved()
    assert resolved["metric.cutoffs"] == "5,10,all"
    assert resolved["data.systems.dense-v2.1"] == "b.csv"
    assert resolved["queries.set"] == "null"
    assert cutoff_key(None) == "ndcg_at_all" and "@" not in cutoff_key(10)


def test_gain_table_resolves_sorted(tmp_path):
    spec = load_spec(spec_with("metric.gain", {3: 7, 0: 0, 1: 1, 2: 3.5}), base_dir=tmp_path)
    assert spec.metric.gain.kind == "table"
    assert spec.metric.gain.table == ((0, 0), (1, 1), (2, 3.5), (3, 7))
    assert spec.resolved()["metric.gain"] == '{"0": 0, "1": 1, "2": 3.5, "3": 7}'


@pytest.mark.parametrize(
    "path, value, match",
    [
        ("metric.cuttoffs", [5], r"at key 'metric.cuttoffs': unknown key \(did you mean 'cutoffs'\?\)"),
        ("metric.tie", "average", r"'metric.tie': unknown key \(did you mean 'ties'\?\)"),
        ("extra", 1, r"at key 'extra': unknown key"),
        ("metric.ties", "avg", r"'metric.ties': must be one of displayed_order, id_ascending, id_descending, average"),
        ("metric.ties", "id_ascendng", r"did you mean 'id_ascending'"),
        ("metric.gain", "exp", r"'metric.gain': must be exponential, linear, or a table"),
        ("metric.gain", {1: "high"}, r"'metric.gain\[1\]': a gain must be a finite number. Got 'high'"),
        ("metric.gain", {}, r"'metric.gain': a gain table must map at least one grade"),
        (
            "metric.cutoffs",
            [10, 0],
            r"'metric.cutoffs\[1\]': must be a positive integer \(at most 10\^30\) or 'all'. Got 0",
        ),
        ("metric.cutoffs", [10, True], r"'metric.cutoffs\[1\]'.*Got True \(a boolean\)"),
        ("metric.cutoffs", [10, 10], r"'metric.cutoffs\[1\]': cutoff 10 is listed twice"),
        ("metric.cutoffs", "10", r"'metric.cutoffs': must be a non-empty list"),
        ("metric.cutoffs", [], r"'metric.cutoffs': must be a non-empty list"),
        ("metric.discount", "log10", r"'metric.discount': must be one of log2"),
        ("metric.ideal", "catalog", r"'metric.ideal': must be one of judged_catalog, candidates"),
        ("metric.empty_ideal", None, r"'metric.empty_ideal': must be one of exclude, zero, one, error. Got None"),
        ("metric.unjudged", "drop", r"'metric.unjudged': must be one of zero, condense, error"),
        ("metric.missing_queries", 0, r"'metric.missing_queries': must be one of zero, exclude, error"),
        ("spec_version", 2, r"'spec_version': this version of ndcg-mlflow reads spec_version 1"),
        ("name", "", r"'name': must be a non-empty string"),
        ("data.systems", {}, r"'data.systems': must map at least one system"),
        (
            "data.systems",
            {"bad name!": "x.run"},
            r"'data.systems.bad name!': the system name becomes part of MLflow "
            r"keys .* MLflow refuses '!'",
        ),
        ("data.systems", {"v@2": "x.run"}, r"'data.systems.v@2': .*MLflow refuses '@' in metric, param and tag keys"),
        ("data.systems", {"a//b": "x.run"}, r"'data.systems.a//b': .*resolves to another name"),
        ("data.systems", {"x/": "x.run"}, r"'data.systems.x/': .*resolves to another name"),
        ("data.systems", {"/x": "x.run"}, r"'data.systems./x': .*starts with '..' or '/'"),
        ("data.systems", {"s" * 151: "x.run"}, r"at most 150 characters"),
        ("mlflow.tags", ["team"], r"'mlflow.tags': must be a mapping of tag keys to string values"),
        (
            "mlflow.tags",
            {"ticket": 123},
            r"'mlflow.tags.ticket': a tag value is a string \(in YAML, quote it: \"123\"\)",
        ),
        ("mlflow.tags", {"a@b": "x"}, r"'mlflow.tags.a@b': not a usable MLflow tag key: MLflow refuses '@'"),
        (
            "mlflow.tags",
            {"mlflow.runName": "x"},
            r"'mlflow.tags.mlflow.runName': tag keys starting with 'mlflow.' or "
            r"'ndcg_mlflow.' are reserved",
        ),
        ("mlflow.tags", {"t": "x" * 8001}, r"'mlflow.tags.t': MLflow tag values hold at most 8000 characters"),
        ("data.qrels", 5, r"'data.qrels': must be a file path"),
        ("data.qrels", {"path": "q", "format": "xml"}, r"'data.qrels.format': must be one of auto, trec"),
        ("queries.weight", "uniform", r"did you mean 'weights'"),
        ("mlflow.experimnt", "x", r"did you mean 'experiment'"),
    ],
)
def test_bad_values_name_the_key(tmp_path, path, value, match):
    with pytest.raises(SpecError, match=match):
        load_spec(spec_with(path, value), base_dir=tmp_path)


@pytest.mark.parametrize(
    "path",
    [
        "metric.gain",
        "metric.cutoffs",
        "metric.discount",
        "metric.ties",
        "metric.ideal",
        "metric.empty_ideal",
        "metric.unjudged",
        "metric.missing_queries",
        "queries.weights",
        "data.qrels",
        "metric",
    ],
)
def test_required_fields_have_no_default(tmp_path, path):
    with pytest.raises(SpecError, match=rf"at key '{path}': missing required key"):
        load_spec(spec_with(path, delete=True), base_dir=tmp_path)


def test_yaml_errors_name_file_and_line(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("spec_version: 1\nname: x\nmetric:\n  gain: [1, 2\n")
    with pytest.raises(SpecError, match=r"s.yaml: not valid YAML at line \d+"):
        load_spec(p)


def test_yaml_python_objects_are_refused(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("spec_version: !!python/object/apply:os.system ['echo hi']\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(p)


def test_paths_are_relative_to_the_spec_file(tmp_path):
    import yaml

    (tmp_path / "sub").mkdir()
    p = tmp_path / "sub" / "s.yaml"
    p.write_text(yaml.safe_dump(BASE))
    spec = load_spec(p)
    assert spec.qrels.path == tmp_path / "sub" / "q.tsv"
    assert spec.sha256 and spec.text == p.read_text()


def test_spec_not_a_mapping(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("- 1\n- 2\n")
    with pytest.raises(SpecError, match="expected a mapping"):
        load_spec(p)


# --------------------------------------------------------------------------- numbers at the edges


def test_cutoffs_beyond_int64_are_accepted_up_to_the_documented_bound(tmp_path):
    spec = load_spec(spec_with("metric.cutoffs", [2**63, 2**64, 10**30, "all"]), base_dir=tmp_path)
    assert spec.metric.cutoffs == (2**63, 2**64, 10**30, None)
    assert spec.metric.keys[0] == "ndcg_at_9223372036854775808"
    with pytest.raises(
        SpecError,
        match=r"at key 'metric.cutoffs\[1\]': must be a positive integer \(at most "
        r"10\^30\)",
    ):
        load_spec(spec_with("metric.cutoffs", [5, 10**30 + 1]), base_dir=tmp_path)


@pytest.mark.parametrize(
    "path, value, match",
    [
        ("metric.gain", {1: 1, 10**400: 2}, r"'metric.gain\[1000.*\]': a grade \(table key\) must be a finite number"),
        ("metric.gain", {1: 10**400}, r"'metric.gain\[1\]': a gain must be a finite number"),
        ("uncertainty.seed", 2**64, r"'uncertainty.seed': must be an integer in \[0, 9223372036854775807\]"),
        ("uncertainty.resamples", 10**30, r"'uncertainty.resamples': must be an integer in \[100, 10000000\]"),
        ("comparison.wins_losses", 2**63, r"'comparison.wins_losses': must be an integer in \[0, 10000\]"),
        ("comparison.tie_tolerance", 10**400, r"'comparison.tie_tolerance': must be a finite number >= 0"),
        ("companions.catalog", 10**40, r"'companions.catalog': must be an integer in \[1, 10{30}\]"),
        ("mlflow.max_retries", 2**70, r"'mlflow.max_retries': must be an integer in \[0, 20\]"),
        ("mlflow.timeout", 10**400, r"'mlflow.timeout': must be a number of seconds"),
    ],
)
def test_huge_integers_are_spec_errors_not_overflows(tmp_path, path, value, match):
    raw = spec_with(path, value) if not path.startswith(("uncertainty", "comparison", "companions")) else None
    if raw is None:
        raw = copy.deepcopy(BASE)
        raw["uncertainty"] = {"resamples": 1000, "confidence": 0.95, "method": "bca", "seed": 1}
        raw["comparison"] = {
            "baseline": "bm25",
            "test": "both",
            "correction": "holm",
            "wins_losses": 5,
            "tie_tolerance": 0,
        }
        raw["companions"] = {"catalog": 100}
        section, key = path.split(".")
        raw[section][key] = value
    with pytest.raises(SpecError, match=match):
        load_spec(raw, base_dir=tmp_path)


# --------------------------------------------------------------------------- strings and YAML


@pytest.mark.parametrize(
    "yaml_value, path",
    [
        ('name: "a\\udc80b"', "name"),
        ('name: "\\ud800"', "name"),
        ('name: "nul \\x00 inside"', "name"),
        ('name: t\nmlflow: {experiment: "e\\udfff"}', "mlflow.experiment"),
        ('name: t\nqueries: {weights: uniform, set: "s\\udc80.txt"}', "queries.set"),
    ],
)
def test_strings_that_are_not_text_are_refused_at_load(tmp_path, yaml_value, path):
    import yaml

    raw = {k: v for k, v in BASE.items() if k not in ("name", "mlflow", "queries")}
    text = yaml.safe_dump(raw) + yaml_value + "\n"
    if "queries:" not in yaml_value:
        text += "queries: {weights: uniform}\n"
    p = tmp_path / "s.yaml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(
        SpecError,
        match=rf"s.yaml: at key '{re.escape(path)}': the string contains (a lone "
        rf"surrogate U\+D[89A-F]|a NUL)",
    ) as info:
        load_spec(p)
    str(info.value).encode("utf-8")  # the message itself is printable


def test_a_key_that_is_not_text_is_refused_with_a_printable_path(tmp_path):
    raw = copy.deepcopy(BASE)
    raw["data"]["systems"] = {"bm25\udc80": "a.run"}
    with pytest.raises(
        SpecError,
        match=r"at key 'data.systems.bm25\\udc80': the string contains a lone "
        r"surrogate U\+DC80",
    ) as info:
        load_spec(raw, base_dir=tmp_path)
    str(info.value).encode("utf-8")


def test_yaml_merge_keys_are_refused_naming_the_line(tmp_path):
    import yaml

    text = yaml.safe_dump({k: v for k, v in BASE.items() if k != "metric"})
    text += "base: &m {gain: exponential, cutoffs: [10], discount: log2}\nmetric:\n  <<: *m\n  ties: average\n"
    p = tmp_path / "s.yaml"
    p.write_text(text)
    line = text.splitlines().index("  <<: *m") + 1
    with pytest.raises(
        SpecError,
        match=rf"s.yaml: not valid YAML at line {line}, column 3: a merge key \(<<\) "
        r"is not supported in a spec",
    ):
        load_spec(p)


def _with_aliases(n: int) -> str:
    """A valid spec but for an unknown key, whose value uses exactly ``n`` aliases."""
    import yaml

    return yaml.safe_dump(BASE) + "x_anchor: &a 1\nx_uses: [" + ", ".join(["*a"] * n) + "]\n"


def test_the_alias_limit_is_the_documented_one(tmp_path):
    """docs/data.md: YAML that uses more than 50 aliases is refused. 50 are read (the spec then fails on its
    unknown key, after the YAML was read); 51 are refused while reading."""
    from ndcg_mlflow.spec import MAX_ALIASES

    assert MAX_ALIASES == 50
    page = (Path(__file__).resolve().parents[2] / "docs" / "data.md").read_text(encoding="utf-8")
    assert f"more than {MAX_ALIASES} aliases" in page
    p = tmp_path / "s.yaml"
    p.write_text(_with_aliases(50))
    with pytest.raises(SpecError, match="at key 'x_anchor': unknown key"):
        load_spec(p)
    p.write_text(_with_aliases(51))
    with pytest.raises(SpecError, match=r"not valid YAML at line \d+, column \d+: more than 50 aliases"):
        load_spec(p)


@pytest.mark.parametrize(
    "kind, match",
    [
        ("missing", "file not found"),
        ("directory", "is a directory"),
        ("fifo", "FIFO"),
        ("long", "name too long"),
        ("loop", "symbolic link"),
    ],
)
def test_a_spec_path_that_cannot_be_read_is_named_with_the_reason(tmp_path, kind, match):
    import os

    from ndcg_mlflow.cli import main

    path = tmp_path / "spec.yaml"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "long":
        path = tmp_path / ("s" * 5000)
    elif kind == "loop":
        os.symlink(tmp_path / "b.yaml", tmp_path / "a.yaml")
        os.symlink(tmp_path / "a.yaml", tmp_path / "b.yaml")
        path = tmp_path / "a.yaml"
    with pytest.raises(SpecError, match=match):
        load_spec(path)
    assert main(["validate", str(path)]) == 2


@pytest.mark.parametrize("name", ["team/model-v2", "model v2", "modèle-v2", "v1:2", "a.b_c-d", ".hidden", "x" * 150])
def test_system_names_mlflow_accepts_are_accepted(tmp_path, name):
    spec = load_spec(spec_with("data.systems", {name: "a.run"}), base_dir=tmp_path)
    assert spec.system_names == (name,)


@pytest.mark.integration  # imports mlflow
@pytest.mark.parametrize(
    "name",
    [
        "team/model-v2",
        "model v2",
        "modèle",
        "v1:2",
        ".x",
        "v@2",
        "a//b",
        "x/",
        "/x",
        "..",
        "a/../b",
        "a/./b",
        "q?",
        "a,b",
        "tab\there",
        "ü/ß",
        "-",
        "~x",
        "a%2Fb",
    ],
)
def test_system_names_follow_mlflows_own_validation(name):
    """Differential: a name is accepted exactly when MLflow's validation accepts every key it becomes part of."""
    from mlflow.exceptions import MlflowException
    from mlflow.utils.validation import _validate_metric_name, _validate_param_name, _validate_tag_name

    from ndcg_mlflow.spec import system_name_problem

    try:
        _validate_param_name(f"data.systems.{name}")
        _validate_metric_name(f"{name}.ndcg_at_10.ci_high")
        _validate_tag_name(f"ndcg_mlflow.data.system.{name}.sha256")
        accepted = True
    except MlflowException:
        accepted = False
    assert (system_name_problem(name) is None) == accepted, system_name_problem(name)


def _spec_file(tmp_path: Path) -> Path:
    import yaml

    path = tmp_path / "s.yaml"
    path.write_text("# the team's spec\n" + yaml.safe_dump(BASE, sort_keys=False))
    return path


def test_set_overrides_the_file_and_is_recorded(tmp_path):
    path = _spec_file(tmp_path)
    spec = load_spec(
        path,
        overrides=[
            "metric.cutoffs=[5,10]",
            "data.systems.candidate=runs/pr-123.run",
            "data.systems.dense-v2.1.format=tsv",
            "mlflow.tags={team: search}",
        ],
    )
    assert spec.metric.cutoffs == (5, 10)
    assert dict(spec.systems)["candidate"].declared == "runs/pr-123.run"
    assert dict(spec.systems)["dense-v2.1"].format == "tsv"  # a key holding dots is matched whole
    assert spec.mlflow.tags == (("team", "search"),)
    # the recorded spec is what ran: it parses back to the same spec, and its digest differs from the file's
    again = load_spec(_write(tmp_path / "again.yaml", spec.recorded_text))
    assert again.resolved() == spec.resolved()
    assert "--set metric.cutoffs=[5,10]" in spec.recorded_text
    assert spec.sha256 != load_spec(path).sha256


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "override, match",
    [
        (
            "metric.cutoffs=[5,x]",
            r"at key 'metric.cutoffs\[1\]': must be a positive integer.*\(the value at "
            r"'metric.cutoffs' came from --set metric.cutoffs=\[5,x\]\)",
        ),
        ("metric.gain.x=1", r"at key 'metric.gain': --set metric.gain.x: metric.gain is not a mapping"),
        ("metric.tie=average", r"'metric.tie': unknown key \(did you mean 'ties'\?\).*came from --set"),
        ("data.systems.v@2=a.run", r"'data.systems.v@2': .*MLflow refuses '@'.*came from --set"),
        ("cutoffs", r"--set 'cutoffs': expected KEY=VALUE"),
        ("metric..gain=linear", r"expected KEY=VALUE with KEY a dotted key path"),
        ("metric.cutoffs=[5", r"--set metric.cutoffs: not valid YAML"),
    ],
)
def test_set_errors_name_the_key_path_and_the_option(tmp_path, override, match):
    with pytest.raises(SpecError, match=match):
        load_spec(_spec_file(tmp_path), overrides=[override])


@pytest.mark.parametrize("name", ["a\nb", "a\n", "a\rb", "a\u2028b", "a\x85b", "a\u2029", "a\x0bb"])
def test_a_system_name_holding_a_line_break_is_refused_in_a_message_of_one_line(tmp_path, name):
    """A line break in a system name (MLflow's own check lets a final LF through) is refused naming the key, and
    the message, key path included, stays on one line."""
    with pytest.raises(SpecError) as err:
        load_spec(spec_with("data.systems", {name: "a.run"}), base_dir=tmp_path)
    text = str(err.value)
    assert len(text.splitlines()) == 1, text
    assert "at key 'data.systems.a\\" in text and "MLflow refuses" in text


@pytest.mark.parametrize("letter, longest", [("\u00e9", 116), ("\u4e2d", 77), ("\U0001d400", 58), ("x", 150)])
def test_a_system_name_whose_file_name_is_too_long_is_refused_up_front(tmp_path, letter, longest):
    """A system's files are named after it: a name whose longest file name (``<name>.scored.parquet.partial``)
    exceeds 255 bytes of UTF-8 is refused when the spec is read, naming the key; the longest accepted name is
    written (its files exist under the output folder)."""
    from ndcg_mlflow import evaluate
    from ndcg_mlflow.outputs import write_outputs
    from ndcg_mlflow.spec import MAX_SYSTEM_NAME

    too_long = letter * (longest + 1)
    if len(too_long) <= MAX_SYSTEM_NAME:
        with pytest.raises(
            SpecError,
            match=r"a file name holds at most 255 bytes of UTF-8; this name makes one of "
            r"2\d\d bytes",
        ):
            load_spec(spec_with("data.systems", {too_long: "a.run"}), base_dir=tmp_path)
    name = letter * longest
    spec = load_spec(spec_with("data.systems", {name: "a.run"}), base_dir=tmp_path)
    spec_text = copy.deepcopy(BASE)
    spec_text["data"] = {"qrels": "q.txt", "systems": {name: "a.run"}}
    (tmp_path / "q.txt").write_text("q1 0 d1 1\n")
    (tmp_path / "a.run").write_text("q1 Q0 d1 1 1 t\n")
    result = evaluate(spec_text, base_dir=tmp_path)
    out = write_outputs(result, tmp_path / "out", reports=False)
    assert (out / "systems" / f"{name}.per_query.csv").exists()
    assert spec.system_names == (name,)


def _with_statistics(**over) -> dict:
    raw = copy.deepcopy(BASE)
    raw["uncertainty"] = {"resamples": 1000, "confidence": 0.95, "method": "percentile", "seed": 7}
    raw["comparison"] = {
        "baseline": "bm25",
        "test": "both",
        "correction": "holm",
        "wins_losses": 5,
        "tie_tolerance": 1e-9,
        "risk_alpha": [1, 5],
    }
    for path, value in over.items():
        node = raw
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    return raw


def _python(value):
    """``value`` with each numpy value written as the Python value it holds, here by hand."""
    if isinstance(value, np.ndarray):
        return [_python(v) for v in value]
    if isinstance(value, list):
        return [_python(v) for v in value]
    if isinstance(value, dict):
        return {_python(k): _python(v) for k, v in value.items()}
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


@pytest.mark.parametrize(
    "over",
    [
        {"metric.cutoffs": [np.int64(10), np.int32(5), "all"]},
        {"uncertainty.confidence": np.float64(0.95)},
        {"comparison.tie_tolerance": np.float32(0.5)},
        {"uncertainty.resamples": np.int64(1000), "uncertainty.seed": np.uint64(2**62 + 1)},
        {"comparison.risk_alpha": np.array([1.0, 5.0])},
        {"comparison.risk_alpha": [np.float64(0.30000000000000004), np.float16(2)]},
        {"metric.gain": {np.int64(3): np.float64(7.0), 0: 0, 1: 1, 2: np.int8(3)}},
    ],
)
def test_numpy_numbers_in_a_spec_mapping_are_those_numbers(tmp_path, over):
    """A spec given as a mapping holding numpy values: the same spec as with the Python numbers they hold, recorded
    as YAML that reads back as them (not a RepresenterError)."""
    import yaml

    spec = load_spec(_with_statistics(**over), base_dir=tmp_path)
    plain = {k: _python(v) for k, v in over.items()}
    want = load_spec(_with_statistics(**plain), base_dir=tmp_path)
    assert spec.resolved() == want.resolved()
    assert spec.text == want.text and yaml.safe_load(spec.text) == yaml.safe_load(want.text)


def test_a_mapping_nested_too_deeply_is_a_spec_error_with_numpy_loaded(tmp_path):
    deep: dict = {}
    node = deep
    for _ in range(5000):
        node["a"] = {}
        node = node["a"]
    node["x"] = np.float64(1.0)
    with pytest.raises(SpecError, match="at key 'a': unknown key"):
        load_spec(deep, base_dir=tmp_path)


@pytest.mark.parametrize(
    "call, says",
    [
        (lambda s: ndcg_mlflow.evaluate(None), "the spec must be a YAML file's path"),
        (lambda s: ndcg_mlflow.evaluate(123), "got int"),
        (lambda s: ndcg_mlflow.evaluate([s]), "got list"),
        (lambda s: ndcg_mlflow.load_spec(5), "got int"),
        (lambda s: ndcg_mlflow.evaluate(s, base_dir=5), "base_dir must be a folder's path"),
        (lambda s: ndcg_mlflow.load_spec(s, overrides=[5]), "overrides must be a list of KEY=VALUE texts"),
        (lambda s: ndcg_mlflow.load_spec(s, overrides="metric.cutoffs=[5]"), "overrides must be a list"),
    ],
)
def test_a_spec_argument_of_the_wrong_type_is_a_spec_error(call, says):
    """The public functions' spec, base_dir and overrides of a wrong type: a SpecError saying what is expected,
    not a TypeError from deep inside (os.fspath) or an AttributeError."""
    with pytest.raises(ndcg_mlflow.SpecError, match=re.escape(says)):
        call(str(CONFIGS / "demo.yaml"))


@pytest.mark.parametrize(
    ("key", "text", "number"),
    [
        ("decision.guardrails.regressions.delta", "1e-3", "1.0e-3"),
        ("decision.guardrails.regressions.max_share", "5E-2", "5.0E-2"),
        ("decision.margin", "+1e-2", "+1.0e-2"),
        ("decision.margin", "1.0e308", "1.0e+308"),  # (a dot, but no sign after the e)
        ("decision.guardrails.regressions.delta", "2.5E3", "2.5E+3"),
        ("decision.guardrails.regressions.max_share", "7e5", "7.0e+5"),
    ],
)
def test_a_number_yaml_reads_as_text_is_refused_saying_how_to_write_it(tmp_path, key, text, number):
    """YAML 1.1 reads a number with an exponent but no dot (1e-3) as a string: the refusal says so and how to
    write the number, where it said only that a string was given."""
    values = {"decision.guardrails.regressions.delta": "0.1", "decision.guardrails.regressions.max_share": "0.1"}
    values["decision.margin"] = "0.01"
    values[key] = text
    spec = (CONFIGS / "demo.yaml").read_text(encoding="utf-8") + (
        "decision:\n  key: ndcg_at_10\n  rule: non_inferiority\n"
        f"  margin: {values['decision.margin']}\n  guardrails:\n    regressions:\n"
        f"      delta: {values['decision.guardrails.regressions.delta']}\n"
        f"      max_share: {values['decision.guardrails.regressions.max_share']}\n"
    )
    (tmp_path / "s.yaml").write_text(spec, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "s.yaml", base_dir=CONFIGS)
    message = str(info.value)
    assert key in message and f"'{text}' (a string)" in message
    assert f"write {number}" in message
    assert isinstance(yaml.safe_load(number), float)  # (what the hint says YAML reads as the number)
