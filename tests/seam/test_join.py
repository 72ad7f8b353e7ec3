"""The join of a run to its judgments through (query, doc) keys: a key shared by unequal pairs never gives a
row another pair's grade, and never hides a duplicate or invents one."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import examples, metric_spec, write_qrels, write_run
from hypothesis import given, settings
from hypothesis import strategies as st

import ndcg_mlflow
from ndcg_mlflow import DataError
from ndcg_mlflow import join as join_module
from ndcg_mlflow.readers import hashing

COLUMNS = [
    "system",
    "query_id",
    "cutoff",
    "ndcg",
    "dcg",
    "idcg",
    "idcg_candidates",
    "judged_coverage",
    "n_returned",
    "status",
]


def weak_hashes(array):
    """A hash under which every two ids of one length collide (the keys of unequal pairs are then often equal)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lengths = pc.binary_length(array.cast(pa.string()) if not pa.types.is_string(array.type) else array)
    return np.asarray(lengths.to_pylist(), dtype=np.uint64)


def use_weak_hashes(monkeypatch):
    """Every id hashed by :func:`weak_hashes`: also the files' document ids, which the C reader would otherwise
    hash as it parses them (with the real hash)."""
    monkeypatch.setenv("NDCG_MLFLOW_PURE_PYTHON", "1")
    monkeypatch.setattr(hashing, "string_hashes", weak_hashes)


def evaluate(tmp_path, judgments, ranking, **metric):
    qrels = write_qrels(tmp_path, judgments)
    run = write_run(tmp_path, ranking)
    spec = metric_spec(qrels, run, name="join", cutoffs=(1, 3, "all"), **metric)
    return ndcg_mlflow.evaluate(spec, base_dir=tmp_path).per_query[COLUMNS].reset_index(drop=True)


def count_exact_joins(monkeypatch) -> list:
    """Record the calls of the exact join (Arrow's lookup of the run's doc ids among the judged ones)."""
    calls: list = []
    real = join_module.doc_codes

    def counted(strings, value_set):
        calls.append(len(strings))
        return real(strings, value_set)

    monkeypatch.setattr(join_module, "doc_codes", counted)
    return calls


def test_keys_join_a_run_without_the_exact_lookup_and_give_the_closed_form(tmp_path, monkeypatch):
    calls = count_exact_joins(monkeypatch)
    got = evaluate(
        tmp_path, {"q1": {"A": 3, "B": 1}, "q2": {"C": 2}}, {"q1": ["X", "B", "A"], "q2": ["C", "A"]}, gain="linear"
    )
    assert calls == []  # the run's rows went through the keys, and no exact keys of the judgments were made
    q1 = got[(got.query_id == "q1") & (got.cutoff == 3)].iloc[0]
    assert q1.dcg == pytest.approx(1 / np.log2(3) + 3 / 2)
    assert q1.idcg == pytest.approx(3 + 1 / np.log2(3))
    assert q1.judged_coverage == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    "ranking",
    [
        {"q1": ["X", "BB", "A", "CCC"], "q22": ["Z", "D"]},  # X shares A's key, Z D's: the keys find them, the ids not
        {"q1": ["BB", "A"], "q22": ["D", "QQ"]},  # no run row shares a key it should not
    ],
)
def test_a_key_shared_by_unequal_pairs_gives_no_row_another_pairs_grade(tmp_path, monkeypatch, ranking):
    judgments = {"q1": {"A": 3, "BB": 1}, "q22": {"D": 2}}  # (query ids of two lengths: keys of two queries)
    expect = evaluate(tmp_path, judgments, ranking)
    use_weak_hashes(monkeypatch)
    calls = count_exact_joins(monkeypatch)
    got = evaluate(tmp_path, judgments, ranking)
    assert got.equals(expect)
    unjudged = "X" in ranking["q1"]
    # a false match sends the run to the exact join: the judgments' exact keys are made then (one lookup), and the
    # run's doc ids are looked up among them (another)
    assert len(calls) == (2 if unjudged else 0)


def test_judgments_sharing_keys_join_exactly(tmp_path, monkeypatch):
    judgments = {"q1": {"A": 3, "B": 1, "C": 2}}  # one length: every judgment of q1 has the same weak key
    ranking = {"q1": ["C", "D", "A", "B"]}
    expect = evaluate(tmp_path, judgments, ranking)
    use_weak_hashes(monkeypatch)
    got = evaluate(tmp_path, judgments, ranking)
    assert got.equals(expect)
    q1 = got[got.cutoff == "all"].iloc[0]
    assert q1.dcg == pytest.approx(3 + 7 / 2 + 1 / np.log2(5))  # C (3), A (7) at rank 3, B (1) at rank 4


def test_random_runs_under_a_weak_hash_give_the_same_numbers(tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    pool = ["a", "b", "cc", "dd", "e", "ff", "ggg", "h", "ii", "jjj"]
    judgments = {
        f"q{i}": {d: int(rng.integers(0, 4)) for d in rng.choice(pool, size=4, replace=False)} for i in range(12)
    }
    ranking = {
        f"q{i}": [
            (str(d), float(s)) for d, s in zip(rng.choice(pool, size=6, replace=False), rng.integers(0, 3, size=6))
        ]
        for i in range(14)
    }  # q12 and q13 are not judged
    for ties in ("id_ascending", "average"):
        monkeypatch.undo()
        expect = evaluate(tmp_path, judgments, ranking, ties=ties)
        use_weak_hashes(monkeypatch)
        assert evaluate(tmp_path, judgments, ranking, ties=ties).equals(expect)


def test_the_duplicate_check_tells_shared_keys_from_repeated_documents(tmp_path, monkeypatch):
    use_weak_hashes(monkeypatch)
    judgments = {"q1": {"A": 1}}
    fine = evaluate(tmp_path, judgments, {"q1": ["A", "B", "C"]})  # one key, three documents
    assert (fine.n_returned == 3).all()
    write_qrels(tmp_path, judgments)
    (tmp_path / "dup.run").write_text("q1 Q0 A 1 3 s\nq1 Q0 B 2 2 s\nq1 Q0 A 3 1 s\n")
    with pytest.raises(DataError, match=r"dup\.run:3: document 'A' is listed twice for query 'q1' \(first at line 1\)"):
        ndcg_mlflow.evaluate(metric_spec("qrels.txt", "dup.run", name="join"), base_dir=tmp_path)


def test_doc_id_ranks_follow_pythons_string_order():
    """Arrow sorts the UTF-8 bytes; their order is the code points' (Python's), astral characters and all."""
    import pyarrow as pa

    rng = np.random.default_rng(3)
    alphabet = ["a", "B", "z", "0", "é", "\u00a0", "\uffff", "\U0001f600", "\u4e2d", "~", " "]
    words = sorted({"".join(rng.choice(alphabet, size=int(rng.integers(1, 5)))) for _ in range(400)})
    shuffled = [words[i] for i in rng.permutation(len(words))]
    ranks = join_module.string_ranks(pa.chunked_array([shuffled[:150], shuffled[150:]]))
    assert [shuffled[i] for i in np.argsort(ranks)] == words


def test_the_key_join_gives_the_rows_of_the_exact_join(tmp_path, monkeypatch):
    """Random runs with unjudged documents, judged documents never returned, queries outside the judgments and
    judged queries the run misses: the same per-query numbers and top lists with the keys' join as with the
    exact join alone."""
    rng = np.random.default_rng(9)
    docs = [f"d{i}" for i in range(60)] + ["0", "7", "07", "x\u00a0y", "é"]
    judgments = {
        f"q{i}": {str(d): int(rng.integers(0, 4)) for d in rng.choice(docs, size=8, replace=False)} for i in range(30)
    }
    ranking = {
        f"q{i}": [
            (str(d), float(s)) for d, s in zip(rng.choice(docs, size=12, replace=False), rng.integers(0, 5, size=12))
        ]
        for i in range(5, 40)
    }
    qrels, run = write_qrels(tmp_path, judgments), write_run(tmp_path, ranking)

    def evaluate_all():
        spec = metric_spec(qrels, run, name="join", cutoffs=(1, 5, "all"), ties="id_descending")
        result = ndcg_mlflow.evaluate(spec, base_dir=tmp_path)
        top = result.systems["sys"].top
        return result.per_query[COLUMNS], (
            top.query.tolist(),
            top.position.tolist(),
            top.doc,
            np.nan_to_num(top.grade, nan=-1).tolist(),
        )

    keyed = evaluate_all()
    real = join_module.pair_index

    def exact_only(*args):
        index = real(*args)
        index.pair_keys = None
        return index

    monkeypatch.setattr(join_module, "pair_index", exact_only)
    exact = evaluate_all()
    assert keyed[0].equals(exact[0])
    assert keyed[1] == exact[1]


def test_a_run_read_for_the_join_carries_its_keys_and_the_join_takes_them(tmp_path):
    from ndcg_mlflow.readers import read_run

    path = tmp_path / write_run(tmp_path, {"q1": ["A", "B"], "q2": ["A"]})
    assert read_run(path).pair_keys is None  # (8 bytes a row, kept only when asked for)
    run = read_run(path, pair_keys=True)
    np.testing.assert_array_equal(run.pair_keys, hashing.pair_hashes(run))
    assert len(set(run.pair_keys.tolist())) == 3


def _naive_duplicates(queries: list[str], docs: list[str]) -> list[tuple[int, int]]:
    """(first row, later row) of every repeated (query, doc) pair, each later row with the row before it."""
    last: dict[tuple[str, str], int] = {}
    out = []
    for row, pair in enumerate(zip(queries, docs)):
        if pair in last:
            out.append((last[pair], row))
        last[pair] = row
    return sorted(out, key=lambda p: p[1])


@pytest.mark.parametrize("grouped", [True, False])
@pytest.mark.parametrize("weak", [False, True])
@pytest.mark.parametrize("pure", ["", "1"])
def test_the_duplicate_check_finds_every_repeat_a_set_finds(monkeypatch, grouped, weak, pure):
    """Segments of whole queries (tiny here, so a table has many and queries straddle their target) or one sort
    of a shuffled table, under the real hash and one where every two ids of a length collide, each query's keys
    in the C pass's hash table or sorted (``pure``): the duplicates found are those a set of (query, doc) pairs
    finds, and a table without repeats has none."""
    import pyarrow as pa

    from ndcg_mlflow.readers.table import Strings, Table, encode_id_list

    monkeypatch.setenv("NDCG_MLFLOW_PURE_PYTHON", pure)
    monkeypatch.setattr(hashing, "SEGMENT_ROWS", 7)
    monkeypatch.setattr(hashing, "REPEAT_ROWS", 9)  # (the C pass leaves queries of more rows to the sorts)
    if weak:
        use_weak_hashes(monkeypatch)
    rng = np.random.default_rng(11 + grouped + 2 * weak)
    for trial in range(60):
        n_queries = int(rng.integers(1, 12))
        repeat_in = int(rng.integers(0, n_queries)) if trial % 2 else -1  # one repeated pair in half the tables
        queries, docs = [], []
        for q in range(n_queries):
            size = int(rng.integers(2, 20))
            pool = [f"d{j}" for j in range(int(rng.integers(size, size + 5)))]
            chosen = list(rng.choice(pool, size=size, replace=False))
            if q == repeat_in:  # the last document repeats the first: both ends of the query's rows
                chosen[-1] = chosen[0]
            queries += [f"q{q}"] * size
            docs += chosen
        if not grouped:
            order = rng.permutation(len(queries))
            queries, docs = [queries[i] for i in order], [docs[i] for i in order]
        table = Table("t", "run", encode_id_list(queries), Strings(pa.array(docs)), np.zeros(len(docs)), None, "table")
        if grouped:
            assert hashing.query_segments(table.query.codes) is not None
        first, later = hashing.duplicate_pairs(table)
        got = sorted(zip(first.tolist(), later.tolist()), key=lambda p: p[1])
        assert got == _naive_duplicates(queries, docs)


def test_query_segments_cut_only_between_queries():
    codes = np.repeat(np.arange(6, dtype=np.int32), [3, 9, 1, 1, 5, 2])
    bounds = hashing.query_segments(codes, target=4)
    assert bounds.tolist() == [0, 12, 19, 21]  # cuts at the first query start at or after 4, 8, 12, 16, 20
    assert hashing.query_segments(codes[::-1].copy(), target=4) is not None
    assert hashing.query_segments(np.array([0, 0, 1, 0], dtype=np.int32)) is None  # query 0 in two places


@pytest.mark.parametrize(
    "rules, other",
    [
        ({"unjudged": "error"}, "has no judgment"),
        ({"missing_queries": "error"}, "returns nothing for"),
        ({}, "returns none of the"),
    ],
)
def test_a_duplicate_comes_before_the_joins_errors(tmp_path, rules, other):
    """The duplicate check of a run file goes on beside the join and the kernel: a document listed twice is the
    error even when the join or the kernel would stop the run too (an unjudged document under unjudged: error, a
    judged query left out under missing_queries: error, no evaluated query returned), as when the check came
    first; without the duplicate those are the errors."""
    write_qrels(tmp_path, {"q1": {"A": 1}, "q2": {"B": 1}})
    query = "zz" if not rules else "q1"  # (no rule: the run answers no evaluated query)
    clean = f"{query} Q0 A 1 3 s\n{query} Q0 X 2 2 s\n"
    (tmp_path / "clean.run").write_text(clean)
    (tmp_path / "dup.run").write_text(clean + f"{query} Q0 A 3 1 s\n")
    with pytest.raises(ndcg_mlflow.NdcgError, match=other):
        ndcg_mlflow.evaluate(metric_spec("qrels.txt", "clean.run", name="join", **rules), base_dir=tmp_path)
    with pytest.raises(DataError, match=rf"dup\.run:3: document 'A' is listed twice for query '{query}'"):
        ndcg_mlflow.evaluate(metric_spec("qrels.txt", "dup.run", name="join", **rules), base_dir=tmp_path)


def test_the_judgments_errors_come_before_the_first_runs(tmp_path):
    """The first run is read while the judgments are: an error of the judgments (or of the query set, found after
    them) is still the error when the run has one of its own, as when the run was read after them."""
    (tmp_path / "bad.qrels").write_text("q1 0 A 1\nq1 0 B x\n")
    write_qrels(tmp_path, {"q1": {"A": 1}})
    (tmp_path / "set.txt").write_text("q1\nq9\n")
    (tmp_path / "dup.run").write_text("q1 Q0 A 1 3 s\nq1 Q0 A 2 2 s\n")
    with pytest.raises(DataError, match=r"bad\.qrels:2"):
        ndcg_mlflow.evaluate(metric_spec("bad.qrels", "dup.run", name="join"), base_dir=tmp_path)
    with pytest.raises(ndcg_mlflow.NdcgError, match="q9"):
        ndcg_mlflow.evaluate(metric_spec("qrels.txt", "dup.run", name="join", qset="set.txt"), base_dir=tmp_path)
    with pytest.raises(DataError, match=r"dup\.run:2: document 'A' is listed twice"):
        ndcg_mlflow.evaluate(metric_spec("qrels.txt", "dup.run", name="join"), base_dir=tmp_path)


@settings(derandomize=True, database=None, deadline=None, max_examples=examples(200))
@given(
    pairs=st.lists(
        st.tuples(st.text(max_size=4), st.text(max_size=4)) | st.text(max_size=4).map(lambda x: (x, x)), max_size=12
    ),
    cut=st.integers(0, 3),
    wide=st.booleans(),
)
def test_same_strings_is_python_equality_row_by_row(pairs, cut, wide):
    """Both arrays sliced (offsets not at 0), of either width of Arrow string: ``["ab", "c"]`` and ``["a",
    "bc"]`` hold the same bytes and are not the same strings."""
    import pyarrow as pa

    from ndcg_mlflow.readers.table import same_strings

    kind = pa.large_string() if wide else pa.string()
    a = pa.array(["pad"] * cut + [x for x, _ in pairs], type=kind).slice(cut)
    b = pa.array(["x"] + [y for _, y in pairs], type=kind).slice(1)
    assert same_strings(a, b) == ([x for x, _ in pairs] == [y for _, y in pairs])
    assert same_strings(a, a)
    assert not same_strings(a, b.slice(1)) or not pairs
