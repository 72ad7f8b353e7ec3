"""The companion measures on the Spark engine equal the local engine's, exactly: each query's duplicate rate at
every cutoff, their weighted means, and catalog coverage (a declared size or a catalog file), under every tie
rule, with one and several query buckets, with and without the top-K pre-filter; the local engine's refusals
are the Spark engine's; ``run --engine spark`` writes the local companion fields; beyond the driver limit the
per-query duplicate rates are the local ones and their means agree up to rounding.

The test run's one SparkSession (``local[2]``, tests/conftest.py); small random data. Skipped when
pyspark or Java is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import java_problem

import ndcg_mlflow
from ndcg_mlflow import Spark
from ndcg_mlflow.errors import DataError, SpecError
from ndcg_mlflow.result import json_safe

pytestmark = pytest.mark.integration

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'ndcg-mlflow[spark]')")


if java_problem():
    pytest.skip(java_problem() or "", allow_module_level=True)

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


# --------------------------------------------------------------------------- random data


def make_data(seed: int, n_queries: int = 40, max_docs: int = 30) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Judgments and a run: many tied scores (several tie groups cut by the cutoffs), unjudged documents,
    empty ideals, judged queries the run leaves out, run queries nobody judged, lists longer than the
    pre-filter's depth (so that it drops rows)."""
    rng = np.random.default_rng(seed)
    qrels, run = [], []
    for q in range(n_queries):
        qid = f"q{q}" + ("é" if q % 7 == 0 else "")
        docs = [f"d{j}" for j in rng.choice(80, size=int(rng.integers(1, max_docs)), replace=False)]
        judged = docs[: int(rng.integers(0, len(docs) + 1))] + [f"j{j}" for j in range(int(rng.integers(0, 3)))]
        empty = rng.random() < 0.1
        for d in judged:
            qrels.append((qid, d, 0 if empty else int(rng.integers(0, 4))))
        if not judged:
            qrels.append((qid, "only", 2))
        if rng.random() < 0.1:  # a judged query the run leaves out: nothing shown
            continue
        scores = rng.integers(0, 5, size=len(docs)) / 2.0  # many ties
        for rank, i in enumerate(rng.permutation(len(docs))):
            run.append((qid, docs[i], float(scores[i]), rank + 1))
    for q in range(2):  # queries nobody judged (their documents are not shown)
        run.append((f"unjudged-{q}", f"x{q}", 1.0, 1))
    return (
        pd.DataFrame(qrels, columns=["query_id", "doc_id", "grade"]),
        pd.DataFrame(run, columns=["query_id", "doc_id", "score", "rank"]),
    )


def second_system(run: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Another system: fewer queries, the scores shuffled (other documents on top)."""
    other = run.sample(frac=0.8, random_state=seed).reset_index(drop=True)
    other["score"] = np.random.default_rng(seed).permutation(other["score"].to_numpy())
    return other


def write_companion_files(folder: Path, seed: int) -> None:
    """``groups.tsv``: most documents in a few duplicate groups (some left out: groups of their own);
    ``catalog.txt``: some shown documents, some never shown, one listed twice."""
    rng = np.random.default_rng(seed)
    docs = [f"d{j}" for j in range(80)] + ["j0", "j1", "j2", "only"]
    lines = ["doc_id\tgroup"] + [f"{d}\tG{rng.integers(0, 10)}" for d in docs if rng.random() < 0.75]
    (folder / "groups.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    catalog = [d for d in docs if rng.random() < 0.5] + ["never-1", "never-2", docs[0]]
    (folder / "catalog.txt").write_text("\n".join(catalog) + "\n", encoding="utf-8")


def spec_of(
    *, ties: str, cutoffs, catalog, unjudged="zero", ideal="judged_catalog", missing_queries="zero", queries=None
) -> dict:
    return {
        "spec_version": 1,
        "name": "spark-companions",
        "metric": {
            "gain": "exponential",
            "cutoffs": list(cutoffs),
            "discount": "log2",
            "ties": ties,
            "ideal": ideal,
            "empty_ideal": "exclude",
            "unjudged": unjudged,
            "missing_queries": missing_queries,
        },
        "queries": queries or {"weights": "uniform"},
        "companions": {"duplicates": "groups.tsv", "catalog": catalog},
    }


def both(spark, spec, qrels, systems, *, buckets, base_dir, **options):
    local = ndcg_mlflow.evaluate(spec, qrels=qrels, systems=systems, base_dir=base_dir)
    frames = {name: spark.createDataFrame(df) for name, df in systems.items()}
    remote = ndcg_mlflow.evaluate(
        spec,
        engine=Spark(spark, buckets=buckets, **options),
        qrels=spark.createDataFrame(qrels),
        systems=frames,
        base_dir=base_dir,
    )
    return local, remote


def assert_same_companions(local, remote) -> None:
    """The per-query duplicate rates, their means and the coverage of every system and cutoff are the local
    engine's, bit for bit (NaN where the local engine has NaN), and so is the per-query table."""
    assert remote.engine == "spark" and local.engine == "local"
    assert list(local.query_ids) == list(remote.query_ids)
    for name, sr in local.systems.items():
        other = remote.systems[name]
        assert sr.duplicate_rate is not None and other.duplicate_rate is not None
        np.testing.assert_array_equal(sr.duplicate_rate, other.duplicate_rate)
        for key, m in sr.means.items():
            assert list(other.means[key]) == list(m)  # the same fields, in the same order
            for field in {"duplicate_rate", "catalog_coverage", "mean"} & set(m):
                a, b = m[field], other.means[key][field]
                assert a == b or (np.isnan(a) and np.isnan(b)), (name, key, field, a, b)
    pd.testing.assert_frame_equal(local.per_query, remote.per_query, check_exact=True)
    assert "duplicate_rate" in remote.per_query.columns
    assert [(f.role, f.sha256, f.rows) for f in local.files if f.role.startswith("companions")] == [
        (f.role, f.sha256, f.rows) for f in remote.files if f.role.startswith("companions")
    ]
    assert json.dumps(json_safe(local.summary["systems"])) == json.dumps(json_safe(remote.summary["systems"]))


# --------------------------------------------------------------------------- the same numbers

CASES = [
    # (ties, buckets, cutoffs, catalog ("file" or a size), other rules)
    ("id_ascending", 1, (1, 3, 10, "all"), "file", {}),
    ("id_ascending", 3, (2, 5), 400, {"unjudged": "condense"}),
    ("id_descending", 3, (1, 3, 10, "all"), 400, {"ideal": "candidates", "missing_queries": "exclude"}),
    ("id_descending", 1, (3,), "file", {}),
    ("displayed_order", 3, (2, 10), "file", {"unjudged": "condense"}),
    ("displayed_order", 1, (1, 5, "all"), 400, {"weights": True}),
    ("average", 3, (1, 3, 10, "all"), "file", {}),
    ("average", 1, (3, 7), 400, {"unjudged": "condense", "weights": True}),
    ("average", 3, (4,), "file", {"missing_queries": "exclude"}),
]


@pytest.mark.parametrize(
    "ties, buckets, cutoffs, catalog, rules", CASES, ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)]
)
def test_companions_equal_the_local_engine(spark, tmp_path, ties, buckets, cutoffs, catalog, rules):
    i = [c[:4] for c in CASES].index((ties, buckets, cutoffs, catalog))
    qrels, run = make_data(seed=300 + i)
    write_companion_files(tmp_path, seed=i)
    rules = dict(rules)
    queries = None
    if rules.pop("weights", False):
        rng = np.random.default_rng(i)
        ids = sorted(set(qrels["query_id"]))
        (tmp_path / "w.txt").write_text("".join(f"{q} {rng.integers(1, 9) / 4}\n" for q in ids), encoding="utf-8")
        queries = {"weights": "w.txt"}
    spec = spec_of(
        ties=ties, cutoffs=cutoffs, catalog="catalog.txt" if catalog == "file" else catalog, queries=queries, **rules
    )
    local, remote = both(spark, spec, qrels, {"a": run, "b": second_system(run, i)}, buckets=buckets, base_dir=tmp_path)
    # the data reach what the measures count: repeated groups in the top K, queries showing nothing (NaN),
    # coverage growing with K
    rates = local.systems["a"].duplicate_rate
    assert (rates > 0).any() and np.isnan(rates).any() and (rates[~np.isnan(rates)] == 0).any()
    cover = [m["catalog_coverage"] for m in local.systems["a"].means.values()]
    assert 0 < cover[0] <= cover[-1] <= 1
    finite = "all" not in cutoffs
    info = remote.engine_info
    assert info["prefilter"]["applied"] is finite
    if finite:  # the pre-filter dropped rows that cannot reach a top K: the measures still see every shown row
        assert info["systems"]["a"]["rows_shuffled"] < info["systems"]["a"]["rows"]
    assert_same_companions(local, remote)


def test_without_the_prefilter_and_only_one_measure(spark, tmp_path):
    """Duplicates alone, then a catalog size alone, with the pre-filter turned off: the other measure is absent on
    both engines."""
    qrels, run = make_data(seed=41)
    write_companion_files(tmp_path, seed=41)
    spec = spec_of(ties="id_ascending", cutoffs=(3, 10), catalog=1000)
    del spec["companions"]["catalog"]
    local, remote = both(spark, spec, qrels, {"a": run}, buckets=3, base_dir=tmp_path, prefilter=False)
    assert not remote.engine_info["prefilter"]["applied"]
    assert_same_companions(local, remote)
    assert all("catalog_coverage" not in m for m in remote.systems["a"].means.values())
    spec = spec_of(ties="id_ascending", cutoffs=(3, 10), catalog=1000)
    del spec["companions"]["duplicates"]
    local, remote = both(spark, spec, qrels, {"a": run}, buckets=3, base_dir=tmp_path)
    assert remote.systems["a"].duplicate_rate is None and "duplicate_rate" not in remote.per_query.columns
    pd.testing.assert_frame_equal(local.per_query, remote.per_query, check_exact=True)
    for key, m in local.systems["a"].means.items():
        assert remote.systems["a"].means[key]["catalog_coverage"] == m["catalog_coverage"]
        assert "duplicate_rate" not in remote.systems["a"].means[key]


# --------------------------------------------------------------------------- refusals


def _errors(spark, spec, qrels, systems, base_dir, exc):
    with pytest.raises(exc) as local:
        ndcg_mlflow.evaluate(spec, qrels=qrels, systems=systems, base_dir=base_dir)
    with pytest.raises(exc) as remote:
        ndcg_mlflow.evaluate(
            spec,
            engine=Spark(spark, buckets=2),
            qrels=qrels,
            base_dir=base_dir,
            systems={n: spark.createDataFrame(df) for n, df in systems.items()},
        )
    return str(local.value), str(remote.value)


def test_a_catalog_size_below_the_documents_shown_is_refused_as_locally(spark, tmp_path):
    """System 'a' shows a few documents, 'b' more than the declared size at its deeper cutoff only: both engines
    refuse with the same message, naming 'b' and that cutoff."""
    qrels, run = make_data(seed=51)
    write_companion_files(tmp_path, seed=51)
    small = run[run["query_id"] == run["query_id"].iloc[0]].head(3)
    for cutoffs, where in (((1, 10), "top 10"), ((3, "all"), "whole lists")):
        spec = spec_of(ties="id_descending", cutoffs=cutoffs, catalog=10**6)
        counts = ndcg_mlflow.evaluate(spec, qrels=qrels, systems={"b": run}, base_dir=tmp_path).systems["b"].means
        shown = [round(m["catalog_coverage"] * 10**6) for m in counts.values()]
        assert 3 <= shown[0] < shown[1]
        spec["companions"]["catalog"] = shown[0]  # what 'b' shows at the first cutoff: not refused there
        a, b = _errors(spark, spec, qrels, {"a": small, "b": run}, tmp_path, SpecError)
        assert a == b
        assert "companions.catalog" in a and "system 'b'" in a and where in a and f"shows {shown[1]} " in a


def test_malformed_companion_files_are_refused_as_locally(spark, tmp_path):
    qrels, run = make_data(seed=52)
    (tmp_path / "groups.tsv").write_text("d1 G1\nd2 G1\nd1 G2\n", encoding="utf-8")
    spec = spec_of(ties="average", cutoffs=(3,), catalog=500)
    a, b = _errors(spark, spec, qrels, {"a": run}, tmp_path, DataError)
    assert a == b and "listed twice" in a
    (tmp_path / "groups.tsv").write_text("d1 G1\n", encoding="utf-8")
    (tmp_path / "catalog.txt").write_text("\n", encoding="utf-8")
    spec = spec_of(ties="average", cutoffs=(3,), catalog="catalog.txt")
    a, b = _errors(spark, spec, qrels, {"a": run}, tmp_path, DataError)
    assert a == b and "empty" in a


# --------------------------------------------------------------------------- beyond the driver limit


def test_beyond_the_driver_limit_the_per_query_rates_are_the_local_ones(spark, tmp_path):
    """The grouped path: each query's duplicate rate in the Parquet table is the local one; the means of the
    rates come from per-group sums (equal up to rounding); the coverage is the local one, exactly."""
    from ndcg_mlflow.engines.spark import evaluate_grouped

    qrels, run = make_data(seed=61)
    write_companion_files(tmp_path, seed=61)
    other = second_system(run, 61)
    for catalog, cutoffs in (("catalog.txt", (1, 3, 10, "all")), (500, (2, 5))):
        spec = spec_of(ties="id_ascending", cutoffs=cutoffs, catalog=catalog)
        local = ndcg_mlflow.evaluate(spec, qrels=qrels, systems={"a": run, "b": other}, base_dir=tmp_path)
        out = tmp_path / f"per_query_{catalog}"
        grouped = evaluate_grouped(
            spec,
            per_query_path=out,
            spark=spark,
            qrels=spark.createDataFrame(qrels),
            systems={"a": spark.createDataFrame(run), "b": spark.createDataFrame(other)},
            base_dir=tmp_path,
            buckets=3,
            groups=7,
        )
        table = pd.concat([pd.read_parquet(out / f"system={n}").assign(system=n) for n in ("a", "b")])
        mine = local.per_query.astype({"cutoff": str})
        merged = mine.merge(table.astype({"cutoff": str}), on=["system", "query_id", "cutoff"], suffixes=("", "_spark"))
        assert len(merged) == len(local.per_query)
        np.testing.assert_array_equal(
            merged["duplicate_rate"].to_numpy(dtype=float), merged["duplicate_rate_spark"].to_numpy(dtype=float)
        )
        for name, sr in local.systems.items():
            for key, m in sr.means.items():
                g = grouped.summary["systems"][name][key]
                assert g["catalog_coverage"] == m["catalog_coverage"]
                assert g["duplicate_rate"] == pytest.approx(m["duplicate_rate"], rel=1e-12, abs=1e-15)
        assert [r for r in grouped.summary["files"] if r.startswith("companions")] == [
            r for r in local.summary["files"] if r.startswith("companions")
        ]


# --------------------------------------------------------------------------- tied rows in the input's order


def test_a_bucket_ranks_tied_rows_in_the_input_order_whatever_order_they_arrive_in(tmp_path):
    """Under ``ties: average`` a cutoff cutting a tied group shows the group's first rows in the input's order
    (the local engine's stable sort keeps the file's): a bucket receiving its rows in another order (as a shuffle
    may deliver them) puts them back in their ``_order`` first, so its duplicate rates are the local ones."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ndcg_mlflow.companions import read_duplicate_groups
    from ndcg_mlflow.engines.outcome import display_depth
    from ndcg_mlflow.engines.spark import companion_measures as comps
    from ndcg_mlflow.engines.spark.buckets import bucket_rows

    qrels, run = make_data(seed=71)
    write_companion_files(tmp_path, seed=71)
    spec_dict = spec_of(ties="average", cutoffs=(1, 3), catalog=500)
    local = ndcg_mlflow.evaluate(spec_dict, qrels=qrels, systems={"a": run}, base_dir=tmp_path)
    metric = local.spec.metric

    dup = read_duplicate_groups(tmp_path / "groups.tsv")
    group = dict(zip(dup.docs.to_pylist(), dup.group.tolist()))
    plan = comps.CompanionPlan(True, False, (1, 3), 3)
    evaluated = qrels[qrels["query_id"].isin(set(local.query_ids))]
    judged = pa.table(
        {
            "query_id": pa.array(evaluated["query_id"], pa.string()),
            "doc_id": pa.array(evaluated["doc_id"], pa.string()),
            "grade": pa.array(evaluated["grade"].astype(float), pa.float64()),
        }
    )
    shuffled = run.sample(frac=1.0, random_state=3).reset_index()  # "index": the row's place in the input

    def rates(with_order: bool) -> np.ndarray:
        table = pa.table(
            {
                "query_id": pa.array(shuffled["query_id"], pa.string()),
                "doc_id": pa.array(shuffled["doc_id"], pa.string()),
                "score": pa.array(shuffled["score"], pa.float64()),
                "rank": pa.array(shuffled["rank"].astype(float), pa.float64()),
                "_extra": pa.array(np.zeros(len(shuffled), dtype=np.int64)),
                "_chunk": pa.array(np.zeros(len(shuffled), dtype=np.int64)),
                "_group": pa.array([group.get(d) for d in shuffled["doc_id"]], pa.int64()),
            }
        )
        if with_order:
            table = table.append_column("_order", pa.array(shuffled["index"].to_numpy(dtype=np.int64)))
        out = bucket_rows(table, judged, "a", "a", metric, display_depth(metric), False, companions=plan)
        rows = out.filter(pc.equal(out.column("kind"), "query"))
        at = {q: i for i, q in enumerate(local.query_ids)}
        result = np.empty((len(local.query_ids), 2))
        for q, r in zip(rows.column("query_id").to_pylist(), rows.column("duplicate_rate").to_pylist()):
            result[at[q]] = r
        return result

    np.testing.assert_array_equal(rates(True), local.systems["a"].duplicate_rate)
    assert not np.array_equal(rates(False), local.systems["a"].duplicate_rate, equal_nan=True)  # the order matters


@pytest.mark.parametrize("cutoffs", [(1, 3, 10), (2, 5, "all")])
def test_tied_rows_in_the_files_order_across_files_and_blocks(spark, tmp_path, cutoffs):
    """Under ``ties: average`` the order of tied rows decides which documents of a tied group cut by a cutoff the
    top lists and the companion measures show. A run of many small Parquet files (packed several to a task, in
    no name order) and a CSV file: every number, duplicate rate, coverage and top list is the
    local engine's, which reads the files' rows in order (with and without the pre-filter)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    qrels, run = make_data(seed=91)
    write_companion_files(tmp_path, 91)
    qrels.to_csv(tmp_path / "qrels.csv", index=False)
    folder = tmp_path / "run.parquet"
    folder.mkdir()
    cuts = np.linspace(0, len(run), 13).astype(int) + 1  # queries' rows split across files
    cuts[0], cuts[-1] = 0, len(run)
    for i in reversed(range(12)):
        pq.write_table(
            pa.Table.from_pandas(run.iloc[cuts[i] : cuts[i + 1]], preserve_index=False),
            folder / f"part-{i:02d}.parquet",
            row_group_size=16,
        )
    run.sample(frac=1.0, random_state=3).to_csv(tmp_path / "run.csv", index=False)
    spec = spec_of(ties="average", cutoffs=cutoffs, catalog="catalog.txt")
    spec["data"] = {"qrels": "qrels.csv", "systems": {"p": "run.parquet", "c": "run.csv"}}
    local = ndcg_mlflow.evaluate(spec, base_dir=tmp_path)
    conf = {"spark.sql.files.maxPartitionBytes": "20000", "spark.sql.files.openCostInBytes": "0"}
    before = {k: spark.conf.get(k) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        from pyspark.sql import functions as F

        per_task = (
            spark.read.parquet(str(folder))
            .select(F.spark_partition_id().alias("t"), F.input_file_name().alias("f"))
            .distinct()
        )
        assert per_task.groupBy("t").count().agg(F.max("count")).collect()[0][0] > 1  # files packed
        remote = ndcg_mlflow.evaluate(spec, engine=Spark(spark, buckets=3), base_dir=tmp_path)
    finally:
        for k, v in before.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
    assert_same_companions(local, remote)
    for name, sr in local.systems.items():
        a, b = sr.top, remote.systems[name].top
        np.testing.assert_array_equal(a.query, b.query)
        assert a.doc == b.doc  # the documents shown, in the order shown
