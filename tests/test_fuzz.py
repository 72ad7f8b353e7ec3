"""Fuzzing the readers and the spec loader: whatever the input, the result is either valid or an
:class:`ndcg_mlflow.NdcgError` (DataError, SpecError ...) — never another exception.

Deterministic (``derandomize=True``, no example database) and small enough to run in seconds.
Property tests of the nDCG engine live elsewhere.
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ndcg_mlflow import NdcgError, Spec, load_spec
from ndcg_mlflow.readers import read_qrels, read_run

FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=120, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_counter = itertools.count()


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _write(folder: Path, suffix: str, data: bytes) -> Path:
    path = folder / f"f{next(_counter)}{suffix}"
    path.write_bytes(data)
    return path


def _check_table(table, kind: str) -> None:
    n = len(table.value)
    assert n > 0
    assert len(table.query.codes) == n and len(table.doc) == n
    assert np.isfinite(table.value).all()
    assert table.query.codes.min() >= 0 and table.query.codes.max() < len(table.query.values)
    if kind == "run" and table.rank is not None:
        assert len(table.rank) == n and np.isfinite(table.rank).all()


def _read_both(path: Path) -> None:
    """Both readers on one file: a valid table or an NdcgError, nothing else."""
    for reader, kind in ((read_qrels, "qrels"), (read_run, "run")):
        try:
            table = reader(path)
        except NdcgError as exc:
            assert str(exc)  # a message, naming the file
            assert str(path) in str(exc)
            event(f"{kind}: {type(exc).__name__}")
            continue
        _check_table(table, kind)
        event(f"{kind}: valid")


# --------------------------------------------------------------------------- readers: random bytes


@FUZZ
@given(data=st.binary(max_size=400), suffix=st.sampled_from([".txt", ".run", ".csv", ".tsv", ".jsonl"]))
def test_readers_on_random_bytes(folder, data, suffix):
    _read_both(_write(folder, suffix, data))


# --------------------------------------------------------------------------- readers: near-valid TREC text

TOKENS = st.one_of(
    st.sampled_from(["q1", "q2", "q10", "d1", "d2", "d10", "0", "Q0", "1", "2", "3", "-1", "1.5", "0.25", "-0",
                     "1e3", "1e999", "-1e999", "nan", "NaN", "inf", "-inf", "Infinity", "0x10", "1_0", "+1", ".5",
                     "5.", "1e", "tag", "é", "d\u00e9", "\u200b", "\x00", '"', "'", '""', ",", ";", "#", "\\",
                     "<b>", "&amp;", "9" * 40]),
    st.text(alphabet="abqdQ019 \t,;:\"'#\\.-+eE\u00e9\u00df\u4e2d\u200b\x00\x85\u2028\r", min_size=1, max_size=4),
)
SEPARATORS = st.sampled_from([" ", " ", "\t", "\t", "  ", " \t ", "\t\t", ","])
NEWLINES = st.sampled_from(["\n", "\n", "\n", "\r\n", "\r", "\n\n"])


@st.composite
def trec_text(draw) -> bytes:
    """Mostly well-formed qrels or run lines (one layout per file) with odd numbers, separators and line ends;
    now and then a line of random tokens."""
    layout = draw(st.sampled_from(["qrels", "run"]))
    noise = draw(st.sampled_from([0, 0, 0, 1, 3]))  # chance in 10 that a line is random tokens
    sep = draw(SEPARATORS)
    lines = []
    for _ in range(draw(st.integers(0, 10))):
        if draw(st.integers(0, 9)) >= noise:
            q, d = draw(st.sampled_from(["q1", "q2", "q3"])), f"d{draw(st.integers(1, 30))}"
            num = draw(st.sampled_from(["0", "1", "2", "3", "1.5", "-1", "0.5", "-0", "1e3", "+2", ".5", "3."])
                       if draw(st.integers(0, 20)) else st.sampled_from(["nan", "1e999", "-inf", "x"]))
            rank = str(len(lines) + 1) if draw(st.integers(0, 20)) else draw(st.sampled_from(["2.0", "1.5", "-1"]))
            fields = [q, "0", d, num] if layout == "qrels" else [q, "Q0", d, rank, num, "tag"]
            line_sep = sep if draw(st.integers(0, 5)) else draw(SEPARATORS)
        else:
            fields = draw(st.lists(TOKENS, max_size=8))
            line_sep = draw(SEPARATORS)
        lines.append(line_sep.join(fields) + draw(st.sampled_from(["", "", " ", "\t"])) + draw(NEWLINES))
    text = "".join(lines)
    if draw(st.booleans()):
        text = text.rstrip("\r\n")  # no final newline
    prefix = b"\xef\xbb\xbf" if draw(st.integers(0, 5)) == 0 else b""
    return prefix + text.encode("utf-8")


@FUZZ
@given(data=trec_text(), suffix=st.sampled_from([".txt", ".run", ".tsv"]))
def test_readers_on_near_valid_trec(folder, data, suffix):
    _read_both(_write(folder, suffix, data))


# --------------------------------------------------------------------------- readers: near-valid CSV / TSV

COLUMNS = ["query_id", "doc_id", "grade", "score", "rank", "extra"]


@st.composite
def delimited_text(draw) -> tuple[bytes, str]:
    suffix = draw(st.sampled_from([".csv", ".tsv"]))
    delim = "," if suffix == ".csv" else "\t"
    header = draw(st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=6))
    if draw(st.integers(0, 3)):
        header = draw(st.permutations(["query_id", "doc_id", draw(st.sampled_from(["grade", "score", "rank"]))]
                                      + header[:draw(st.integers(0, 2))]))
    rows = [delim.join(header)]
    for _ in range(draw(st.integers(0, 8))):
        n = len(header) + draw(st.sampled_from([0, 0, 0, 0, 0, 0, -1, 1]))
        cells = []
        for _ in range(max(n, 0)):
            cell = draw(st.sampled_from(["q1", "q2", "d1", "d2", "d3", "1", "2", "3", "0.5", "-1", " q1", "d1 "])
                        if draw(st.integers(0, 3)) else TOKENS)
            if draw(st.integers(0, 4)) == 0:  # quoted, possibly with quotes, delimiters or a newline inside
                cell = '"' + cell.replace('"', '""') + draw(st.sampled_from(["", ",", "\t", '""', "\n"])) + '"'
            cells.append(cell)
        rows.append(delim.join(cells))
    text = draw(st.sampled_from(["\n", "\n", "\n", "\r\n", "\r"])).join(rows) + draw(st.sampled_from(["", "\n", "\r\n"]))
    prefix = b"\xef\xbb\xbf" if draw(st.integers(0, 5)) == 0 else b""
    return prefix + text.encode("utf-8"), suffix


@FUZZ
@given(case=delimited_text())
def test_readers_on_near_valid_csv(folder, case):
    data, suffix = case
    _read_both(_write(folder, suffix, data))


# --------------------------------------------------------------------------- spec loader

VALID = {
    "spec_version": 1,
    "name": "fuzz",
    "metric": {"gain": "exponential", "cutoffs": [5, 10, "all"], "discount": "log2", "ties": "displayed_order",
               "ideal": "judged_catalog", "empty_ideal": "exclude", "unjudged": "zero", "missing_queries": "zero"},
    "queries": {"weights": "uniform", "set": None},
    "data": {"qrels": "demo/qrels.tsv", "systems": {"bm25": "demo/bm25.run", "rr": {"path": "rr.csv",
                                                                                    "format": "csv"}}},
    "uncertainty": {"resamples": 1000, "confidence": 0.95, "method": "bca", "seed": 1},
    "comparison": {"baseline": "bm25", "test": "both", "correction": "holm", "wins_losses": 5,
                   "tie_tolerance": 1e-9},
    "report": {"sensitivity": False},
    "companions": {"duplicates": "dups.tsv", "catalog": 1000},
    "mlflow": {"experiment": "fuzz", "tracking_uri": "http://127.0.0.1:5000", "run_name": "r", "timeout": 5,
               "max_retries": 1},
}

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["all", "uniform", "exponential", "linear", "log2", "average", "trec_eval", "bm25", "rr",
                     "zero", "exclude", "error", "csv", "", " ", "~", "~no_such_user/x", "..", "../x", "/", "nan",
                     "@", "a@b"]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.one_of(st.text(max_size=8), SCALARS),
                                                                        inner, max_size=4)), max_leaves=12)


def _paths(tree, prefix=()):
    yield prefix
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _paths(v, prefix + (i,))


ALL_PATHS = [p for p in _paths(VALID) if p]


def _mutate(tree, path, value, delete: bool):
    tree = copy.deepcopy(tree)
    node = tree
    for k in path[:-1]:
        node = node[k]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return tree


def _load(raw, folder: Path) -> None:
    try:
        spec = load_spec(raw, base_dir=folder)
    except NdcgError as exc:
        assert str(exc)
        event(type(exc).__name__)
        return
    event("valid spec")
    assert isinstance(spec, Spec)
    spec.resolved()  # a valid spec resolves and hashes
    spec.definition_digest()


def test_the_unmutated_spec_is_valid(folder):
    assert isinstance(load_spec(copy.deepcopy(VALID), base_dir=folder), Spec)


@FUZZ
@given(path=st.sampled_from(ALL_PATHS), value=VALUES, delete=st.integers(0, 6))
def test_spec_loader_on_mutated_valid_spec(folder, path, value, delete):
    _load(_mutate(VALID, path, value, delete == 0), folder)


@FUZZ
@given(raw=st.dictionaries(st.one_of(st.sampled_from(list(VALID)), st.text(max_size=8), SCALARS), VALUES,
                           max_size=8))
def test_spec_loader_on_random_nested_dicts(folder, raw):
    _load(raw, folder)


YAML_TOKENS = st.sampled_from([
    "spec_version", "name", "metric", "gain", "cutoffs", "queries", "weights", "data", "qrels", "systems",
    "mlflow", "experiment", ":", ": ", "- ", "[", "]", "{", "}", ",", "&a ", "*a", "<<: *a", "!!str ", "!!int ",
    "!!float ", "!!binary ", "!!set ", "!!python/object/apply:os.system ", "!!python/name:os.system", "? ",
    "|", ">", "'", '"', "#", "~", "null", "true", "1", "0x1F", "1e999", ".nan", ".inf", "all", "uniform",
    "2001-12-14", "\t", "  ", "\n", "\n  ", "\n    ", "---", "...", "%YAML 1.1\n", "é", "\ufeff", "\x85",
])


@FUZZ
@given(tokens=st.lists(YAML_TOKENS, max_size=40), as_bytes=st.binary(max_size=6))
def test_spec_loader_on_yaml_ish_text(folder, tokens, as_bytes):
    path = _write(folder, ".yaml", "".join(tokens).encode("utf-8") + as_bytes)
    _load(path, folder)


@FUZZ
@given(path=st.sampled_from(ALL_PATHS), value=VALUES)
def test_spec_loader_on_mutated_spec_files(folder, path, value):
    """The same mutations through a YAML file (the CLI's path), including anchors when a value repeats."""
    raw = _mutate(VALID, path, value, False)
    try:
        text = yaml.safe_dump(raw, sort_keys=False)
    except yaml.YAMLError:
        return
    _load(_write(folder, ".yaml", text.encode("utf-8")), folder)

