"""Spec validation: every error names the key path and what was expected; nothing is defaulted silently."""

from __future__ import annotations

import copy

import pytest

from ndcg_mlflow import SpecError, load_spec
from ndcg_mlflow.spec import cutoff_key

BASE = {
    "spec_version": 1,
    "name": "t",
    "metric": {"gain": "exponential", "cutoffs": [5, 10, "all"], "discount": "log2", "ties": "displayed_order",
               "ideal": "judged_catalog", "empty_ideal": "exclude", "unjudged": "zero", "missing_queries": "zero"},
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


@pytest.mark.parametrize("path, value, match", [
    ("metric.cuttoffs", [5], r"at key 'metric.cuttoffs': unknown key \(did you mean 'cutoffs'\?\)"),
    ("metric.tie", "average", r"'metric.tie': unknown key \(did you mean 'ties'\?\)"),
    ("extra", 1, r"at key 'extra': unknown key"),
    ("metric.ties", "avg", r"'metric.ties': must be one of displayed_order, id_ascending, id_descending, average"),
    ("metric.ties", "id_ascendng", r"did you mean 'id_ascending'"),
    ("metric.gain", "exp", r"'metric.gain': must be exponential, linear, or a table"),
    ("metric.gain", {1: "high"}, r"'metric.gain\[1\]': a gain must be a finite number. Got 'high'"),
    ("metric.gain", {}, r"'metric.gain': a gain table must map at least one grade"),
    ("metric.cutoffs", [10, 0], r"'metric.cutoffs\[1\]': must be a positive integer or 'all'. Got 0"),
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
    ("data.systems", {"bad name!": "x.run"}, r"'data.systems.bad name!': a system name must"),
    ("data.qrels", 5, r"'data.qrels': must be a file path"),
    ("data.qrels", {"path": "q", "format": "xml"}, r"'data.qrels.format': must be one of auto, trec"),
    ("queries.weight", "uniform", r"did you mean 'weights'"),
    ("mlflow.experimnt", "x", r"did you mean 'experiment'"),
])
def test_bad_values_name_the_key(tmp_path, path, value, match):
    with pytest.raises(SpecError, match=match):
        load_spec(spec_with(path, value), base_dir=tmp_path)


@pytest.mark.parametrize("path", ["metric.gain", "metric.cutoffs", "metric.discount", "metric.ties",
                                  "metric.ideal", "metric.empty_ideal", "metric.unjudged",
                                  "metric.missing_queries", "queries.weights", "data.qrels", "metric"])
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
