"""ndcg_mlflow.render.format: numbers, missing values and tables, one rule per medium."""

from __future__ import annotations

import ast
import math

import numpy as np
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from ndcg_mlflow.escapes import term_stream
from ndcg_mlflow.render.format import (
    EMPTY,
    FILE,
    TERMINAL,
    distinct,
    distinct_share,
    exact,
    exact_share,
    is_missing,
    listing,
    md_table,
    number,
    p_value,
    queries_line,
    share,
    term_text,
    text_table,
)


@pytest.mark.parametrize("x", [None, float("nan"), np.nan, np.float64("nan"), np.float32("nan")])
def test_a_missing_number_is_written_by_the_rule_of_its_medium(x):
    assert is_missing(x)
    assert number(x) == p_value(x) == share(x) == FILE == "–"
    assert number(x, missing=TERMINAL) == p_value(x, missing=TERMINAL) == "undefined"


@pytest.mark.parametrize("x", [0, 0.0, -0.0, 1, math.inf, -math.inf, np.float64(0.5), np.int64(3), False])
def test_a_number_is_never_missing(x):
    assert not is_missing(x)


def test_numbers():
    assert number(0.61814) == "0.6181" and number(0.61815, 3) == "0.618"
    assert number(0.0766, signed=True) == "+0.0766" and number(-0.00004, signed=True) == "-0.0000"
    assert number(np.float64(1 / 3)) == "0.3333" and number(1) == "1.0000"
    assert share(0.1244, signed=True) == "+12.4%" and share(-0.5) == "-50.0%"


@pytest.mark.parametrize(
    "p, text",
    [(1.0, "1.0000"), (0.0366, "0.0366"), (1e-4, "0.0001"), (9.99e-5, "1.0e-04"), (2e-5, "2.0e-05"), (0.0, "0.0e+00")],
)
def test_p_values_keep_one_significant_digit_below_1e_4(p, text):
    assert p_value(p) == text


def test_an_empty_list_is_none():
    assert listing([]) == EMPTY == "none"
    assert listing(["d1", "d2"]) == "d1, d2"


def test_text_table_pads_labels_left_and_numbers_right():
    lines = text_table(["system", "nDCG@10", "n"], [["bm25", "0.6181", "233"], ["reranker-v2", "0.7", "1"]])
    assert lines == ["system       nDCG@10    n", "bm25          0.6181  233", "reranker-v2      0.7    1"]
    assert text_table(["a", "b"], [["xyz", "1"]], left=2, indent="  ") == ["  a    b", "  xyz  1"]


def test_md_table_rows_and_alignment():
    assert md_table(["system", "mean"], [["bm25", "0.6181"], ["", "–"]], "lr") == [
        "| system | mean |",
        "| --- | ---: |",
        "| bm25 | 0.6181 |",
        "|  | – |",
    ]
    assert md_table(["a"], [], "l") == ["| a |", "| --- |"]
    with pytest.raises(ValueError, match="one 'l' or 'r' per column"):
        md_table(["a", "b"], [], "l")
    with pytest.raises(ValueError, match="row 1 has 1 cells for 2 columns"):
        md_table(["a", "b"], [["1", "2"], ["3"]], "lr")


def test_no_module_writes_its_own_missing_mark():
    """The missing marks live in format.py: no other module has a string that is one of them, so a new table
    cannot drift from the rule ("none" aside: it is also a spec value, ``correction: none``)."""
    import ast
    from pathlib import Path

    import ndcg_mlflow

    package = Path(ndcg_mlflow.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "format.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in ("–", "—", "undefined", "n/a"):
                found.append(f"{path.relative_to(package)}:{node.lineno}: {node.value!r}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("test", ["randomization", "t_test", "both"])
def test_terminal_summary_shows_the_p_values_of_the_declared_tests_and_undefined_ones_as_undefined(tmp_path, test):
    """One query: the t-test is undefined (below 2 queries), written 'undefined'; the column of a test the spec
    does not declare is left out (it was a column of '-')."""
    from helpers import metric_spec, write_qrels, write_run

    import ndcg_mlflow
    from ndcg_mlflow.render.terminal import format_summary

    qrels = write_qrels(tmp_path, {"q1": {"d1": 1, "d2": 2}})
    a = write_run(tmp_path, {"q1": ["d1", "d2"]}, "a.run")
    b = write_run(tmp_path, {"q1": ["d2", "d1"]}, "b.run")
    raw = metric_spec(qrels, {"a": a, "b": b}, name="one", cutoffs=(10,))
    raw["uncertainty"] = {"resamples": 100, "confidence": 0.9, "method": "percentile", "seed": 1}
    raw["comparison"] = {"baseline": "a", "test": test, "correction": "holm", "wins_losses": 3, "tie_tolerance": 1e-9}
    result = ndcg_mlflow.evaluate(raw, base_dir=tmp_path)
    lines = format_summary(result).splitlines()
    # the answer first: b against a at nDCG@10, its corrected p-value and wins, ties and losses
    assert lines[0] == "one — each candidate against baseline a at nDCG@10"
    assert lines[1].split() == ["candidate", "delta", "interval", "p_corr", "W/T/L"] and lines[2].startswith("b ")
    head = next(i for i, line in enumerate(lines) if line.startswith("all comparisons")) + 1
    heads = lines[head].split()
    want = {"randomization": ["p_rand"], "t_test": ["p_t"], "both": ["p_rand", "p_t"]}[test]
    assert heads == ["candidate", "cutoff", "delta", "interval", *want, "p_corr", "d_z", "W/T/L"]
    cells = lines[head + 1].split()
    assert cells[:3] == ["b", "10", number(result.mean("b", 10) - result.mean("a", 10), signed=True)]
    cell = dict(zip(heads, cells[:3] + [" ".join(cells[3:5])] + cells[5:]))  # the interval "[lo, hi]" is two words
    assert len(cell) == len(heads) == len(cells) - 1
    if "p_t" in want:  # one query: the t-test is undefined
        assert cell["p_t"] == "undefined"
    if "p_rand" in want:  # the exact randomization test of one difference: both signs give it, p = 1
        assert cell["p_rand"] == "1.0000"
    assert "-" not in cells


# --------------------------------------------------------------------------- query counts and where to look


def _counts(evaluated: int, excluded: int, empty: int, missing: int) -> dict:
    return {
        "ndcg_at_10": {"n_evaluated": evaluated, "n_excluded": excluded, "n_empty_ideal": empty, "n_missing": missing}
    }


def test_the_query_line_tells_the_set_from_the_evaluated():
    spec = {"queries.set": "null", "metric.empty_ideal": "exclude", "metric.missing_queries": "zero"}
    s = {"n_queries": 240, "spec": spec, "systems": {"a": _counts(233, 7, 7, 0), "b": _counts(233, 7, 7, 1)}}
    assert queries_line(s) == (
        "240 queries in the evaluation (every judged query); each mean is over the 233 "
        "evaluated, 7 are excluded: 7 with an empty ideal (ideal DCG 0: nothing relevant "
        "to find; metric.empty_ideal: exclude)."
    )
    # excluded for both reasons
    spec2 = dict(spec, **{"metric.missing_queries": "exclude", "queries.set": "eval_queries.txt"})
    s2 = {"n_queries": 10, "spec": spec2, "systems": {"a": _counts(6, 4, 1, 3)}}
    assert queries_line(s2) == (
        "10 queries in the evaluation (the query set eval_queries.txt); each mean is over "
        "the 6 evaluated, 4 are excluded: 1 with an empty ideal (ideal DCG 0: nothing "
        "relevant to find; metric.empty_ideal: exclude) and 3 that the runs do not answer "
        "(metric.missing_queries: exclude)."
    )
    # counts that differ by system: a range, and the table's columns named
    s3 = {"n_queries": 10, "spec": spec2, "systems": {"a": _counts(6, 4, 1, 3), "b": _counts(9, 1, 1, 0)}}
    assert queries_line(s3).endswith(
        "each system's means are over its evaluated queries, 6 to 9 of them (the "
        "evaluated and excluded columns give each system's counts)."
    )
    # nothing excluded; one query
    s4 = {"n_queries": 1, "spec": spec, "systems": {"a": _counts(1, 0, 0, 0)}}
    assert queries_line(s4) == (
        "1 query in the evaluation (every judged query); every mean is over all 1 (none excluded)."
    )
    # reasons that do not add up to the excluded count are not given
    s5 = {"n_queries": 10, "spec": spec, "systems": {"a": _counts(7, 3, 1, 0)}}
    assert queries_line(s5).endswith("each mean is over the 7 evaluated, 3 are excluded.")


@pytest.mark.parametrize(
    "uri, expected",
    [
        (
            "sqlite:///mlflow.db",
            "MLflow UI: ndcg-mlflow ui --backend-store-uri sqlite:///{cwd}/mlflow.db\n"
            "  then open http://127.0.0.1:5000/#/experiments/7/runs/abc",
        ),
        (
            "sqlite:////data/runs/mlflow.db",
            "MLflow UI: ndcg-mlflow ui --backend-store-uri sqlite:////data/runs/mlflow.db\n"
            "  then open http://127.0.0.1:5000/#/experiments/7/runs/abc",
        ),
        ("http://user:secret@mlflow.example:5000/", "MLflow UI: http://mlflow.example:5000/#/experiments/7/runs/abc"),
        ("https://mlflow.example/ml", "MLflow UI: https://mlflow.example/ml/#/experiments/7/runs/abc"),
        # the run's page is the fragment: after the path and the query, in place of a fragment given
        ("https://host/path?o=1", "MLflow UI: https://host/path/?o=1#/experiments/7/runs/abc"),
        ("https://host/path/?o=1&p=2", "MLflow UI: https://host/path/?o=1&p=2#/experiments/7/runs/abc"),
        ("https://host?o=1", "MLflow UI: https://host/?o=1#/experiments/7/runs/abc"),
        ("https://host/path#old", "MLflow UI: https://host/path/#/experiments/7/runs/abc"),
        ("https://host/path?o=1#old?x", "MLflow UI: https://host/path/?o=1#/experiments/7/runs/abc"),
        ("http://u:pw@host:8080/p?token=abc", "MLflow UI: http://host:8080/p/?token=REDACTED#/experiments/7/runs/abc"),
        (
            "file:///srv/mlruns",
            "MLflow UI: ndcg-mlflow ui --backend-store-uri file:///srv/mlruns\n"
            "  then open http://127.0.0.1:5000/#/experiments/7/runs/abc",
        ),
        (
            "my runs",
            "MLflow UI: ndcg-mlflow ui --backend-store-uri file://{cwd}/my%20runs\n"
            "  then open http://127.0.0.1:5000/#/experiments/7/runs/abc",
        ),
        (
            "sqlite:///my dir/mlflow.db",
            "MLflow UI: ndcg-mlflow ui --backend-store-uri 'sqlite:///{cwd}/my dir/mlflow.db'\n"
            "  then open http://127.0.0.1:5000/#/experiments/7/runs/abc",
        ),
        ("databricks", "MLflow UI: run abc in experiment 7 of databricks"),
    ],
)
def test_how_to_open_the_mlflow_ui(uri, expected, tmp_path, monkeypatch):
    from ndcg_mlflow.render.terminal import mlflow_ui_hint

    monkeypatch.chdir(tmp_path)
    cwd = str(tmp_path.resolve())
    assert mlflow_ui_hint(uri, "7", "abc") == expected.format(cwd=cwd)


def test_a_servers_link_without_an_experiment_keeps_its_query_after_the_path():
    from ndcg_mlflow.render.terminal import mlflow_ui_hint

    assert mlflow_ui_hint("https://host/path?o=1#old", None, "abc") == "MLflow UI: https://host/path/?o=1 (run abc)"


@pytest.mark.parametrize(
    "uri, store",
    [
        ("sqlite:///my dir/mlflow.db", "sqlite:///{cwd}/my dir/mlflow.db"),
        ("file:///srv/mlruns", "file:///srv/mlruns"),
        ("my runs", "file://{cwd}/my%20runs"),
    ],
)
def test_the_ui_command_printed_runs_mlflows_ui_from_the_tools_own_interpreter(uri, store, tmp_path, monkeypatch):
    """The hint's command parses with the tool's own parser, and ``ndcg-mlflow ui`` runs ``mlflow ui`` on the
    same store with the interpreter running the tool (``python -m mlflow``), not a ``mlflow`` found on PATH."""
    import shlex
    import sys

    from ndcg_mlflow.arguments import build_parser
    from ndcg_mlflow.cli import ui_command
    from ndcg_mlflow.render.terminal import mlflow_ui_hint

    monkeypatch.chdir(tmp_path)
    first = mlflow_ui_hint(uri, "7", "abc").splitlines()[0]
    words = shlex.split(first.removeprefix("MLflow UI: "))
    assert words[:2] == ["ndcg-mlflow", "ui"]
    argv = ui_command(build_parser().parse_args(words[1:]))
    assert argv == [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", store.format(cwd=tmp_path.resolve())]


# --------------------------------------------------------------------------- numbers compared and spec values


@pytest.mark.parametrize(
    ("x", "text"),
    [(1, "1"), (1.0000001, "1.0000001"), (0.30000000000000004, "0.30000000000000004"), (0.3, "0.3"), (-0.0, "0")],
)
def test_exact_writes_the_shortest_text_that_reads_back(x, text):
    assert exact(x) == text and float(text) == x
    assert (
        exact(-0.0, signed=True) == "+0"
        and exact(0.25, signed=True) == "+0.25"
        and exact(-0.25, signed=True) == "-0.25"
    )


def test_two_different_numbers_never_print_alike():
    r = np.random.default_rng(4)
    for x in np.concatenate([r.random(200), r.random(200) * 1e-9, [0.1 + 0.2, 1 - 1e-16, 5e-324]]):
        y = np.nextafter(x, 2.0)
        assert exact(x) != exact(y) and float(exact(x)) == x
        a, b = distinct(x, y)
        assert a != b.lstrip("+") and (float(a) < float(b)) == (x < y)
        a, b = distinct_share(x, y)
        assert a != b
    assert distinct(0.5, 0.5) == ("0.5", "+0.5")


@pytest.mark.parametrize(
    ("value", "bound", "shown"),
    [
        (0.2813, 0.28124, ("28.13%", "28.124%")),
        (0.28124, 0.28124, ("28.124%", "28.124%")),
        (0.05, 0.1, ("5.0%", "10%")),
        (0.281240001, 0.28124, ("28.1240001%", "28.124%")),
    ],
)
def test_a_share_and_its_bound_as_percentages(value, bound, shown):
    assert distinct_share(value, bound) == shown
    assert exact_share(0.28124) == "28.124%" and exact_share(0.95) == "95%" and exact_share(0.975) == "97.5%"


def test_explain_writes_each_risk_alpha_as_given():
    from ndcg_mlflow.render.explain import risk_words

    assert risk_words((1, 1.0000001, 0.30000000000000004, 0.3)).endswith("1, 1.0000001, 0.30000000000000004, 0.3")


# what a terminal may act on: the C0 and C1 controls, DEL, line and paragraph separators, bidirectional controls
_ACTS = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, 0x200E, 0x200F]}
_ACTS |= {chr(c) for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]}
_ACTS |= {chr(c) for c in range(0xD800, 0xE000)}  # lone surrogates: no UTF-8 output can hold them


@settings(max_examples=examples(500), deadline=None)
@given(st.text(st.one_of(st.sampled_from(sorted(_ACTS) + ["\\", "x", "é", "😀"]), st.characters()), max_size=30))
def test_terminal_text_shows_every_control_character_and_reads_back(text):
    """A label in the terminal: nothing a terminal acts on is left (one line, no escape sequence), and the shown
    text, read as the body of a Python string literal, is the label again."""
    shown = term_text(text)
    assert not (_ACTS & set(shown))
    assert ast.literal_eval('"' + shown.replace('"', '\\"') + '"') == text
    streamed = term_stream(text)
    assert not ((_ACTS - {"\n", "\t"}) & set(streamed))
    assert streamed.count("\n") == text.count("\n") and streamed.count("\t") == text.count("\t")  # (the layout)


def test_terminal_escapes_by_hand():
    assert term_text("a\x1b[31mred\x07\r\n\t\\x1b\u202e\x9b") == "a\\x1b[31mred\\x07\\r\\n\\t\\\\x1b\\u202e\\x9b"
    assert term_stream("line\n\tx\x1b[2J\\") == "line\n\tx\\x1b[2J\\"


# what a page may act on rather than show: _ACTS but the white space a page lays out as a space (tab, line feed,
# form feed, carriage return)
_PAGE_ACTS = _ACTS - {"\t", "\n", "\x0c", "\r"}


@settings(max_examples=examples(500), deadline=None)
@given(st.text(st.one_of(st.sampled_from(sorted(_ACTS) + ["<", "&", "x", "é"]), st.characters()), max_size=30))
def test_markdown_html_and_svg_show_every_control_character_as_a_replacement(text):
    """A label in markdown, HTML and SVG: what the terminal escapes (escape sequences, C1 controls such as CSI
    U+009B, the bidirectional overrides and isolates that would reorder the rest of the line) is U+FFFD in each,
    one character for one, as every other medium but the terminal shows it."""
    from ndcg_mlflow.render.format import html_text, md_html, md_text
    from ndcg_mlflow.render.svg import xml_text

    for escape in (md_text, md_html, html_text, xml_text):
        shown = escape(text)
        assert not (_PAGE_ACTS & set(shown)), (escape.__name__, shown)
    assert html_text(text).count("\ufffd") == sum(c in _PAGE_ACTS for c in text) + text.count("\ufffd")


def test_bidirectional_controls_by_hand():
    from ndcg_mlflow.render.format import html_text, md_text
    from ndcg_mlflow.render.svg import xml_text

    label = "seg\u202eLIAF\u2066x\u2069\x9b"
    assert html_text(label) == xml_text(label) == "seg\ufffdLIAF\ufffdx\ufffd\ufffd"
    assert md_text(label) == "seg\ufffdLIAF\ufffdx\ufffd\ufffd"


@pytest.mark.parametrize("name", ["my runs", "a%20b", "50% off", "#1"])
def test_the_ui_line_names_the_folder_mlflow_wrote_for_a_file_uri(name, tmp_path, monkeypatch):
    """A ``file:`` URI is percent-encoded: the store the hint prints is read by MLflow (its own URI-to-path
    function) as the folder the run's URI named, not that folder's name encoded a second time."""
    import shlex
    from pathlib import Path

    from mlflow.utils.file_utils import local_file_uri_to_path

    from ndcg_mlflow.render.terminal import mlflow_ui_hint

    monkeypatch.chdir(tmp_path)
    uri = (tmp_path / name / "mlruns").as_uri()
    store = shlex.split(mlflow_ui_hint(uri, "7", "abc").splitlines()[0])[-1]
    assert Path(local_file_uri_to_path(store)) == Path(local_file_uri_to_path(uri)) == tmp_path / name / "mlruns"
