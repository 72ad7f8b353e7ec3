"""What several test modules share: TREC writers and spec builders, the CLI in a subprocess, a real
``mlflow server`` (benchmarks/_servers.py, which benchmarks/fault_times.py uses too) and the MLflow lookups
of the tracking tests."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "configs" / "demo"
DEMO_RUNS = ("bm25.run", "reranker_v2.run", "dense_ties.run")
# trec_eval's own test files and expected outputs: the test/ folder of a trec_eval checkout, named by
# NDCG_MLFLOW_TREC_EVAL_TESTS (default ../shared/conformance/trec_eval beside the repository)
TREC_EVAL_ENV = "NDCG_MLFLOW_TREC_EVAL_TESTS"
TREC_EVAL_DATA = Path(os.environ.get(TREC_EVAL_ENV) or REPO.parent / "shared" / "conformance" / "trec_eval")


def trec_eval_missing() -> str | None:
    """Why the trec_eval conformance tests skip (an actionable reason), or None when the data are there."""
    if (TREC_EVAL_DATA / "out.test.aq").is_file():
        return None
    return (
        f"trec_eval conformance data not found at {TREC_EVAL_DATA} (no out.test.aq there): clone "
        f"https://github.com/usnistgov/trec_eval and set {TREC_EVAL_ENV}=<checkout>/test "
        f"(CONTRIBUTING.md: 'Conformance data')"
    )


MEAS_PARAMS_GAIN = "1=3,2=9,4=4.5"  # as trec_eval prints `-mndcg.1=3,2=9,4=4.5` in the measure name

if str(REPO / "benchmarks") not in sys.path:
    sys.path.append(str(REPO / "benchmarks"))

from _servers import MlflowServer, clean_env, cli_command, free_port  # noqa: E402

__all__ = [
    "DEMO",
    "DEMO_RUNS",
    "REPO",
    "TREC_EVAL_DATA",
    "MlflowServer",
    "assert_local_results_complete",
    "assert_one_complete_set",
    "clean_env",
    "cli_command",
    "client_for",
    "examples",
    "free_port",
    "metric_spec",
    "parse_trec_eval_output",
    "doc_block",
    "run_cli",
    "runs_of_experiment",
    "runs_of_key",
    "trec_eval_missing",
    "write_qrels",
    "write_run",
    "write_spec",
    "local_spark",
]


# --------------------------------------------------------------------------- Hypothesis


def java_problem() -> str | None:
    """Why Spark cannot start here (no Java, or ``java -version`` failing), else None."""
    java = shutil.which("java")
    if java is None:
        return "Java is not installed (the Spark engine needs Java 17: java -version)"
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    return None if out.returncode == 0 else f"java -version fails: {out.stderr.strip()[:200]}"


def local_spark(cores: int = 2):
    """A module's SparkSession for the Spark tests (a generator for a module-scoped fixture): ``local[cores]``, a
    1 GB driver, 4 shuffle partitions, no UI, UTC; stopped after the module."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("ndcg-mlflow-tests")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def examples(thorough: int) -> int:
    """How many examples a property or fuzz test runs: ``thorough`` under the ``thorough`` profile (the full run),
    a tenth of it (at least 10) under ``quick`` (the edit loop); tests/conftest.py chooses the profile."""
    return thorough if settings.get_current_profile_name() == "thorough" else max(10, thorough // 10)


# --------------------------------------------------------------------------- TREC files and specs


def write_qrels(folder: Path, judgments: dict, name: str = "qrels.txt") -> str:
    """``{qid: {doc: grade}}`` as TREC qrels ``folder/name``; returns ``name``."""
    lines = [f"{q} 0 {d} {g}" for q, docs in judgments.items() for d, g in docs.items()]
    (folder / name).write_text("\n".join(lines) + "\n")
    return name


def write_run(folder: Path, ranking: dict, name: str = "sys.run") -> str:
    """``{qid: [doc, ...]}`` (best first) or ``{qid: [(doc, score), ...]}`` as a TREC run ``folder/name`` with
    ranks 1..n and, where no score is given, scores n..1; returns ``name``."""
    lines = []
    for q, docs in ranking.items():
        n = len(docs)
        for i, item in enumerate(docs):
            doc, score = item if isinstance(item, tuple) else (item, n - i)
            lines.append(f"{q} Q0 {doc} {i + 1} {score} sys")
    (folder / name).write_text("\n".join(lines) + "\n")
    return name


def metric_spec(
    qrels,
    systems,
    *,
    name: str,
    gain="exponential",
    cutoffs=(3,),
    ties="displayed_order",
    ideal="judged_catalog",
    empty_ideal="exclude",
    unjudged="zero",
    missing_queries="zero",
    weights="uniform",
    qset=None,
) -> dict:
    """A spec (as a dict) with every metric field given; ``systems`` a path (system ``sys``) or ``{name: path}``."""
    if isinstance(systems, str):
        systems = {"sys": systems}
    queries = {"weights": weights}
    if qset is not None:
        queries["set"] = qset
    return {
        "spec_version": 1,
        "name": name,
        "metric": {
            "gain": gain,
            "cutoffs": list(cutoffs),
            "discount": "log2",
            "ties": ties,
            "ideal": ideal,
            "empty_ideal": empty_ideal,
            "unjudged": unjudged,
            "missing_queries": missing_queries,
        },
        "queries": queries,
        "data": {"qrels": qrels, "systems": dict(systems)},
    }


def write_spec(folder: Path, name: str, *, systems: int = 3, experiment: str | None = None, extra: str = "") -> Path:
    """A quick spec on the demo data (no resampling) in ``folder``; ``systems`` names cycle the demo runs."""
    data = folder / "demo"
    if not data.exists():
        shutil.copytree(DEMO, data)
    lines = [f"    s{i:02d}: demo/{DEMO_RUNS[i % 3]}" for i in range(systems)]
    text = (
        f"spec_version: 1\nname: {name}\n"
        "metric: {gain: exponential, cutoffs: [5, 10, all], discount: log2, ties: displayed_order,\n"
        "         ideal: judged_catalog, empty_ideal: exclude, unjudged: zero, missing_queries: zero}\n"
        "queries: {weights: uniform}\n"
        "data:\n  qrels: demo/qrels.tsv\n  systems:\n" + "\n".join(lines) + "\n"
        f"mlflow: {{experiment: {experiment or name}}}\n" + extra
    )
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


_MEASURE = re.compile(r"^ndcg(?:_cut_(\d+)|_(.+))?$")


def parse_trec_eval_output(name: str) -> dict[tuple[str, str], float]:
    """``{(cutoff label, qid or 'all'): value}`` for every ndcg / ndcg_cut_K line of a trec_eval output in
    TREC_EVAL_DATA.

    ``ndcg`` and ``ndcg_<gain params>`` (as ``-mndcg.1=3,...`` prints it) are the no-cutoff value ('all');
    ``ndcg_cut_K`` is cutoff K. Other measures (``ndcg_rel``, ``Rndcg``, ...) are ignored.
    """
    out: dict[tuple[str, str], float] = {}
    for line in (TREC_EVAL_DATA / name).read_text().splitlines():
        if not line.strip():
            continue
        measure, qid, value = (part.strip() for part in line.split("\t"))
        m = _MEASURE.match(measure)
        if not m or (m.group(2) is not None and m.group(2) != MEAS_PARAMS_GAIN):
            continue  # ndcg_rel and any other ndcg_* variant
        key = (m.group(1) or "all", qid)
        assert key not in out, f"{name}: {measure} {qid} listed twice"
        out[key] = float(value)
    return out


# --------------------------------------------------------------------------- the documentation


def doc_block(page: str, heading: str) -> str:
    """The first python block of the docs page ``page`` (``docs/<page>``) after ``heading``."""
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    after = text[text.index(heading) :]
    start = after.index("```python\n") + len("```python\n")
    return after[start : after.index("```", start)]


# --------------------------------------------------------------------------- the CLI in a subprocess


def run_cli(*args: str, cwd: Path, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    """``ndcg-mlflow ARGS`` in a subprocess, with a timeout guard."""
    return subprocess.run(
        cli_command(*args), cwd=cwd, env=clean_env(**env), capture_output=True, text=True, timeout=timeout, check=False
    )


# --------------------------------------------------------------------------- runs in an MLflow store


def client_for(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def runs_of_key(client, run_key: str, deleted: bool = False) -> list:
    """Every run tagged with ``run_key``, in any experiment (also deleted runs when ``deleted``)."""
    from mlflow.entities import ViewType

    exps = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
    return client.search_runs(
        exps,
        filter_string=f"tags.`ndcg_mlflow.run_key` = '{run_key}'",
        run_view_type=ViewType.ALL if deleted else ViewType.ACTIVE_ONLY,
        max_results=1000,
    )


def runs_of_experiment(client, name: str, deleted: bool = True) -> list:
    """The runs of experiment ``name`` (none when it does not exist); deleted runs too unless ``deleted`` is
    False."""
    from mlflow.entities import ViewType

    exp = client.get_experiment_by_name(name)
    if exp is None:
        return []
    return client.search_runs(
        [exp.experiment_id], run_view_type=ViewType.ALL if deleted else ViewType.ACTIVE_ONLY, max_results=1000
    )


def assert_one_complete_set(client, out: Path, tmp: Path) -> None:
    """Exactly one evaluation run and one run per system carry the folder's run key, all complete,
    with the metrics and artifacts of the folder."""
    run_key = (out / "run_key.txt").read_text().strip()
    summary = json.loads((out / "summary.json").read_text())
    runs = runs_of_key(client, run_key)
    parents = [r for r in runs if r.data.tags.get("ndcg_mlflow.role") == "evaluation"]
    children = [r for r in runs if r.data.tags.get("ndcg_mlflow.role") == "system"]
    assert len(parents) == 1, [(r.info.run_id, r.info.status) for r in parents]
    assert len(runs) == 1 + len(summary["systems"])
    parent = parents[0]
    assert sorted(r.data.tags["ndcg_mlflow.system"] for r in children) == sorted(summary["systems"])
    for r in runs:
        assert r.info.status == "FINISHED", (r.info.run_id, r.info.status, r.data.tags.get("ndcg_mlflow.logging"))
        assert r.data.tags["ndcg_mlflow.logging"] == "complete"
    for child in children:
        name = child.data.tags["ndcg_mlflow.system"]
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        for key, entry in summary["systems"][name].items():
            assert child.data.metrics[key] == pytest.approx(entry["mean"], rel=1e-12)
            assert parent.data.metrics[f"{name}.{key}"] == pytest.approx(entry["mean"], rel=1e-12)
        files = {a.path for a in client.list_artifacts(child.info.run_id)}
        assert {f"{name}.per_query.csv", "summary.json"} <= files
    files = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"spec.yaml", "summary.json", "per_query.csv", "report.html", "per_query_table.json"} <= files
    got = Path(client.download_artifacts(parent.info.run_id, "summary.json", str(tmp)))
    assert got.read_bytes() == (out / "summary.json").read_bytes()


def assert_local_results_complete(out: Path) -> None:
    for name in ("summary.json", "per_query.csv", "report.html", "run_key.txt", "spec.yaml"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["systems"] and all(
        v["ndcg_at_10"]["mean"] == v["ndcg_at_10"]["mean"] for v in summary["systems"].values()
    )


# ------------------------------------------------------------------------------- segments' data (statistics, Spark)

SEGMENTS = {"head": 14, "torso": 10, "tail": 8}


def segments_data(tmp: Path, *, seed: int = 3, tail_loss: float = 0.0) -> dict:
    """Three segments of queries, graded judgments, a baseline and two candidates with random rankings; the
    ``better`` candidate puts the best document first more often, except in the tail with ``tail_loss``."""
    rng = np.random.default_rng(seed)
    queries = [(f"{seg}-{i:02d}", seg) for seg, n in SEGMENTS.items() for i in range(n)]
    (tmp / "segments.tsv").write_text("query_id\tsegment\n" + "".join(f"{q}\t{s}\n" for q, s in queries))
    qrels, runs = [], {"base": [], "better": [], "other": []}
    for q, seg in queries:
        grades = rng.integers(0, 4, size=12)
        grades[0] = 3
        qrels += [f"{q} 0 d{j} {g}\n" for j, g in enumerate(grades)]
        for name in runs:
            order = rng.permutation(12)
            lift = name == "better" and not (seg == "tail" and rng.random() < tail_loss)
            if lift:
                order = np.concatenate([[0], order[order != 0]])
            elif name == "better":
                order = np.concatenate([order[order != 0], [0]])
            runs[name] += [f"{q} Q0 d{j} {r + 1} {20 - r} t\n" for r, j in enumerate(order[:10])]
    (tmp / "qrels.txt").write_text("".join(qrels))
    for name, lines in runs.items():
        (tmp / f"{name}.run").write_text("".join(lines))
    return {"queries": queries}


def segments_spec(tmp: Path, **over) -> Path:
    raw = {
        "spec_version": 1,
        "name": "segments",
        "metric": {
            "gain": "exponential",
            "cutoffs": [5, 10],
            "discount": "log2",
            "ties": "displayed_order",
            "ideal": "judged_catalog",
            "empty_ideal": "exclude",
            "unjudged": "zero",
            "missing_queries": "zero",
        },
        "queries": {"weights": "uniform", "segments": "segments.tsv"},
        "data": {"qrels": "qrels.txt", "systems": {n: f"{n}.run" for n in ("base", "better", "other")}},
        "uncertainty": {"resamples": 2000, "confidence": 0.95, "method": "percentile", "seed": 11},
        "comparison": {
            "baseline": "base",
            "test": "both",
            "correction": "holm",
            "wins_losses": 3,
            "tie_tolerance": 1e-9,
        },
        "mlflow": {"experiment": "segments"},
    }
    for path, value in over.items():
        node = raw
        parts = path.split("__")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        if value is None:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = value
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


# ------------------------------------------------------------------------ the report's HTML (render, tracking, models)

NASTY = ["<script>alert(1)</script>", '"quotes"', "'single'", "&amp;", "|pipes|"]


class HtmlDoc(HTMLParser):
    """Tables (rows of cell texts), every start tag, and the text of ``<b>`` / ``<td>`` / ``<summary>``."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self.tags: list[tuple[str, list]] = []
        self.bold: list[str] = []
        self.cells: list[str] = []
        self.titles: list[str] = []
        self._row = self._cell = self._b = self._title = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self._row = []
            self.tables[-1].append(self._row)
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")
        elif tag == "b":
            self._b = []
        elif tag in ("title", "h1"):
            self._title = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            text = "".join(self._cell).strip()
            if self._row is not None:
                self._row.append(text)
            if tag == "td":
                self.cells.append(text)
            self._cell = None
        elif tag == "b" and self._b is not None:
            self.bold.append("".join(self._b))
            self._b = None
        elif tag in ("title", "h1") and self._title is not None:
            self.titles.append("".join(self._title))
            self._title = None

    def handle_data(self, data):
        for buf in (self._cell, self._b, self._title):
            if buf is not None:
                buf.append(data)

    def table(self, *first_heads: str) -> list[list[str]]:
        found = [t for t in self.tables if t and t[0][: len(first_heads)] == list(first_heads)]
        assert found, f"no table with heads {first_heads}"
        return found[0]


def demo_spec_text(resamples: int = 1000) -> str:
    text = (REPO / "configs" / "demo.yaml").read_text(encoding="utf-8")
    new = re.sub(r"(\n\s+resamples:\s*)\d+", rf"\g<1>{resamples}", text, count=1)
    assert new != text
    return new


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


#: the judge's name of :func:`write_escaping_spec` with a judge: every hostile piece of :data:`NASTY`
NASTY_JUDGE = " ".join(NASTY) + " [x](y) **bold**"


def write_escaping_spec(folder: Path, *, judge: bool = False) -> Path:
    """A tiny evaluation whose query ids, document ids and name are hostile to HTML and markdown.

    Five queries, each judging the same five hostile document ids (and a plain one) with rotated grades;
    ``base`` ranks the documents in list order and ``cand`` in reverse, so there are wins and losses whose
    top documents (the hostile ids) are listed in the report. With ``judge``, those judgments are a model's
    (``data.judge_qrels``, its name :data:`NASTY_JUDGE`) and the humans judge four of the queries, one grade
    apart.
    """
    folder.mkdir(parents=True, exist_ok=True)
    docs = NASTY + ["plain"]
    qrels, base, cand = [], [], []
    for i, q in enumerate(NASTY):
        for j, d in enumerate(docs):
            qrels.append({"query_id": q, "doc_id": d, "grade": (i + 2 * j) % 4})
        for r, d in enumerate(docs):
            base.append({"query_id": q, "doc_id": d, "score": float(len(docs) - r)})
        for r, d in enumerate(reversed(docs)):
            cand.append({"query_id": q, "doc_id": d, "score": float(len(docs) - r)})
    write_jsonl(folder / "qrels.jsonl", qrels)
    write_jsonl(folder / "base.jsonl", base)
    write_jsonl(folder / "cand.jsonl", cand)
    spec = {
        "spec_version": 1,
        "name": "<script>alert('name')</script> \"q\" & co",
        "metric": {
            "gain": "exponential",
            "cutoffs": [3, 10],
            "discount": "log2",
            "ties": "displayed_order",
            "ideal": "judged_catalog",
            "empty_ideal": "exclude",
            "unjudged": "zero",
            "missing_queries": "zero",
        },
        "queries": {"weights": "uniform"},
        "data": {"qrels": "qrels.jsonl", "systems": {"base": "base.jsonl", "cand": "cand.jsonl"}},
        "uncertainty": {"resamples": 200, "confidence": 0.9, "method": "percentile", "seed": 7},
        "comparison": {
            "baseline": "base",
            "test": "both",
            "correction": "holm",
            "wins_losses": 5,
            "tie_tolerance": 1e-9,
        },
        "mlflow": {"experiment": "escaping"},
    }
    if judge:
        human = [
            dict(r, grade=(r["grade"] + (r["query_id"] == NASTY[0])) % 4) for r in qrels if r["query_id"] != NASTY[1]
        ]
        write_jsonl(folder / "human.jsonl", human)
        spec["data"] = {"qrels": "human.jsonl", "judge_qrels": "qrels.jsonl", **{"systems": spec["data"]["systems"]}}
        spec["judge"] = {"estimator": "ppi++", "labelled_queries": "random", "name": NASTY_JUDGE}
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    return path
