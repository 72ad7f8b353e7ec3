"""The demo: two specs and their data, which ``ndcg-mlflow demo`` writes into a folder (``configs/`` holds the
copy the tests read).

Scenario: a small product-search engine. A catalog of products (ids
``P-000000`` .. ``P-199999``) is queried by 240 queries (``q0001`` ..
``q0240``). Each query has 15-40 judged products with graded relevance
0 (irrelevant) .. 3 (exact match); the grade distribution is skewed (many
0s and 1s, few 3s) and varies per query. Seven queries have only 0 grades,
so their ideal DCG is 0 (exercises ``empty_ideal``).

Three systems are written as TREC run files (``qid Q0 docid rank score tag``),
each returning 20-50 products per query, of which roughly 10-30% are
unjudged (products that are not in the qrels of that query; exercises
``unjudged``):

* ``bm25.run`` (tag ``bm25``): lexical baseline, score = noisy increasing
  function of the (hidden) grade.
* ``reranker_v2.run`` (tag ``reranker-v2``): less noise than bm25, hence better
  on average, but on ~15% of queries its ranking is scrambled
  (anti-correlated with relevance) and clearly worse than bm25. One judged
  query with non-zero grades is missing entirely from this run (exercises
  ``missing_queries``).
* ``dense_ties.run`` (tag ``dense-ties``): scores rounded to one decimal, so
  there are many tied scores (exercises ``ties``). Within a group of equal
  scores the listed order is random, i.e. not sorted by doc id.

Unjudged documents get a hidden grade (drawn from a lower-relevance
distribution) that drives their scores, like real unjudged products.

``weights.tsv`` gives every judged query a positive, traffic-like (lognormal,
heavily skewed) weight, normalised to mean 1.

Everything is derived from ``numpy.random.default_rng(SEED)``: every run
writes byte-identical files (``tests/cli/test_cli.py`` compares them with
``configs/``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import NdcgError
from .paths import shown_path

SEED = 20240611
N_QUERIES = 240
N_ALL_ZERO = 7
CATALOG_SIZE = 200_000
UNJUDGED_POOL = 40  # per-query pool of unjudged candidate products
SCRAMBLED_FRACTION = 0.15

JUDGED_GRADE_P = np.array([0.45, 0.32, 0.16, 0.07])
UNJUDGED_GRADE_P = np.array([0.62, 0.26, 0.10, 0.02])

DATA = "demo"  # the data's folder, beside the specs

DEMO_SPEC = """\
# The demo's spec, written by `ndcg-mlflow demo` (its data in demo/).
spec_version: 1
name: demo-product-search
metric:
  gain: exponential            # gain = 2^grade - 1 (rewards exact matches strongly)
  cutoffs: [5, 10, all]        # cutoffs 5, 10 and the full list
  discount: log2               # discount = 1 / log2(rank + 1)
  ties: displayed_order        # tied scores: trust the rank order shown in the run file
  ideal: judged_catalog        # ideal ranking built from all judged docs of the query
  empty_ideal: exclude         # queries with ideal DCG = 0 (all grades 0) are left out
  unjudged: zero               # unjudged retrieved docs count as grade 0
  missing_queries: zero        # judged query absent from a run scores nDCG = 0
queries:
  weights: uniform
  set: null
data:
  qrels: demo/qrels.tsv
  systems:
    bm25: demo/bm25.run
    reranker-v2: demo/reranker_v2.run
    dense-ties: demo/dense_ties.run
uncertainty:
  resamples: 10000             # bootstrap resamples of queries
  confidence: 0.95
  method: bca                  # bca | percentile | studentized
  seed: 20261130
comparison:
  baseline: bm25               # every other system is compared with it
  test: randomization          # randomization (paired sign-flip) | t_test | both
  correction: holm             # over all (candidate, cutoff) comparisons
  wins_losses: 10              # largest per-query wins and losses listed
  tie_tolerance: 1.0e-9        # |difference| at or below this is a tie
companions:                    # reported beside nDCG (see the nDCG explainer)
  duplicates: demo/duplicate_groups.tsv   # doc_id -> near-duplicate group: duplicate rate in the top K
  catalog: 200000              # catalog size: share of the catalog shown in the top K over all queries
report:
  sensitivity: true            # recompute under every alternative of each rule, one at a time
mlflow:
  experiment: demo-product-search
"""

# the judge's spec: the demo's, its judgments from a model for every query and human judgments for a random quarter
# of them, without companions or sensitivity
JUDGE_SPEC = (
    DEMO_SPEC.replace(
        DEMO_SPEC[: DEMO_SPEC.index("metric:")],
        "# Judge demo spec: the demo's runs, judged by a model for every query and by humans for a random quarter.\n"
        "spec_version: 1\nname: demo-product-search-judge\n",
    )
    .replace(
        "empty_ideal: exclude         # queries with ideal DCG = 0 (all grades 0) are left out",
        "empty_ideal: zero            # queries with ideal DCG = 0 (all grades 0) score 0",
    )
    .replace(
        "  qrels: demo/qrels.tsv\n",
        "  qrels: demo/human_qrels.tsv  # human judgments of 60 queries drawn at random\n"
        "  judge_qrels: demo/judge_qrels.tsv  # a model's judgments of every query\n",
    )
    .replace(
        "companions:",
        "judge:\n"
        "  estimator: ppi++             # ppi++ | ppi | human_only\n"
        "  labelled_queries: random     # the human-judged queries are a simple random sample\n"
        "  name: demo-judge             # the judge's model and prompt, recorded with the results\n"
        "companions:",
    )
    .replace(DEMO_SPEC[DEMO_SPEC.index("companions:") : DEMO_SPEC.index("mlflow:")], "")
)
N_LABELLED = 60  # the judge demo's human-labelled queries
JUDGE_SEED = SEED + 11

# the weighted spec: the demo's, its queries weighted by traffic and its ties averaged, without companions or
# sensitivity
WEIGHTED_SPEC = (
    DEMO_SPEC.replace(
        DEMO_SPEC[: DEMO_SPEC.index("metric:")],
        "# Weighted demo spec: same data as demo.yaml, queries weighted by traffic.\nspec_version: 1\n"
        "name: demo-product-search-weighted\n",
    )
    .replace(
        "ties: displayed_order        # tied scores: trust the rank order shown in the run file",
        "ties: average                # tied scores: average DCG over all orders of the tie group",
    )
    .replace(
        "  weights: uniform\n", "  weights: demo/weights.tsv    # per-query traffic weights (query_id<TAB>weight)\n"
    )
    .replace(DEMO_SPEC[DEMO_SPEC.index("companions:") : DEMO_SPEC.index("mlflow:")], "")
)


def _qid(i: int) -> str:
    return f"q{i + 1:04d}"


def _pid(n: int) -> str:
    return f"P-{n:06d}"


def _order(scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Indices sorted by descending score; ties broken in random order."""
    perm = rng.permutation(len(scores))
    # stable sort on the shuffled array => equal scores keep random order
    return perm[np.argsort(-scores[perm], kind="stable")]


def _text(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode("ascii")


def write_demo(folder: Path) -> Path:
    """The demo's specs (``demo.yaml``, ``demo_weighted.yaml``) and data (``demo/``) written into ``folder``; the
    path of ``demo.yaml``. A file already there with other contents is refused (exit 2), not replaced: the files
    are always the same, so writing into a folder twice leaves it as it is."""
    files = {
        "demo.yaml": DEMO_SPEC.encode(),
        "demo_weighted.yaml": WEIGHTED_SPEC.encode(),
        "demo_judge.yaml": JUDGE_SPEC.encode(),
    }
    files.update((f"{DATA}/{name}", data) for name, data in demo_data().items())
    for name, data in files.items():
        path = folder / name
        if path.exists() and (not path.is_file() or path.read_bytes() != data):
            raise NdcgError(
                f"{shown_path(path)} is there and is not the demo's: give another folder (--dir), or move it away."
            )
    try:
        for name, data in files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                path.write_bytes(data)
    except OSError as exc:
        raise NdcgError(
            f"cannot write the demo into {shown_path(folder)}: {exc.strerror or exc} ({exc.filename})."
        ) from None
    return folder / "demo.yaml"


def demo_data() -> dict[str, bytes]:
    """The demo's data files, by name."""
    rng = np.random.default_rng(SEED)

    all_zero = set(rng.choice(N_QUERIES, size=N_ALL_ZERO, replace=False).tolist())
    nonzero = [i for i in range(N_QUERIES) if i not in all_zero]
    missing_in_reranker = int(rng.choice(nonzero))
    n_scrambled = int(round(SCRAMBLED_FRACTION * N_QUERIES))
    scrambled = set(
        rng.choice(
            [i for i in nonzero if i != missing_in_reranker],
            size=n_scrambled,
            replace=False,
        ).tolist()
    )

    qrels_lines = ["query_id\tdoc_id\tgrade"]
    run_lines: dict[str, list[str]] = {"bm25": [], "reranker-v2": [], "dense-ties": []}
    weights_lines = ["query_id\tweight"]

    hidden: dict[str, dict[str, int]] = {}  # query -> every judged or returned product's grade (the judge's input)
    favoured: set[tuple[str, str]] = set()  # the reranker's top 10 products of each query, which the judge favours

    raw_weights = rng.lognormal(mean=0.0, sigma=1.3, size=N_QUERIES)
    raw_weights = raw_weights / raw_weights.mean()

    for qi in range(N_QUERIES):
        qid = _qid(qi)
        n_judged = int(rng.integers(15, 41))
        docs = rng.choice(CATALOG_SIZE, size=n_judged + UNJUDGED_POOL, replace=False)
        judged_docs = np.sort(docs[:n_judged])
        pool_docs = docs[n_judged:]

        if qi in all_zero:
            grades = np.zeros(n_judged, dtype=int)
        else:
            p = rng.dirichlet(20.0 * JUDGED_GRADE_P)
            grades = rng.choice(4, size=n_judged, p=p)
            if grades.max() == 0:
                grades[rng.integers(n_judged)] = int(rng.integers(1, 3))
        pool_grades = rng.choice(4, size=UNJUDGED_POOL, p=UNJUDGED_GRADE_P)

        seen = hidden.setdefault(qid, {})
        for d, g in zip(judged_docs, grades):
            qrels_lines.append(f"{qid}\t{_pid(int(d))}\t{int(g)}")
            seen[_pid(int(d))] = int(g)
        weights_lines.append(f"{qid}\t{raw_weights[qi]:.6f}")

        for tag in ("bm25", "reranker-v2", "dense-ties"):
            # per-system draws are always made (even for the missing query)
            # so that the stream of random numbers does not depend on it
            frac_unj = rng.uniform(0.10, 0.30)
            hi = min(50, int(np.ceil(n_judged / (1.0 - frac_unj))))
            n_ret = int(rng.integers(20, max(20, hi) + 1))
            n_unj = int(round(frac_unj * n_ret))
            n_jud = min(n_ret - n_unj, n_judged)
            n_unj = n_ret - n_jud
            assert 0 < n_unj <= UNJUDGED_POOL
            j_idx = rng.choice(n_judged, size=n_jud, replace=False)
            u_idx = rng.choice(UNJUDGED_POOL, size=n_unj, replace=False)
            ret_docs = np.concatenate([judged_docs[j_idx], pool_docs[u_idx]])
            g = np.concatenate([grades[j_idx], pool_grades[u_idx]]).astype(float)
            noise = rng.standard_normal(n_ret)

            if tag == "bm25":
                x = 10.0 + 2.2 * g + 3.0 * noise
                scores = np.log1p(np.exp(x))  # positive, BM25-like magnitude
            elif tag == "reranker-v2":
                if qi in scrambled:
                    scores = -0.9 * g + 0.8 * noise
                else:
                    scores = 1.5 * g + 0.6 * noise
            else:
                scores = np.clip(0.45 + 0.08 * g + 0.10 * noise, 0.0, 1.0)
                scores = np.round(scores, 1)

            scores = np.round(scores, 6)  # what gets printed
            order = _order(scores, rng)
            for k in range(n_ret):
                seen.setdefault(_pid(int(ret_docs[k])), int(g[k]))
            if tag == "reranker-v2":
                favoured.update((qid, _pid(int(ret_docs[k]))) for k in order[:10])
            if tag == "reranker-v2" and qi == missing_in_reranker:
                continue
            for rank, k in enumerate(order, start=1):
                run_lines[tag].append(f"{qid} Q0 {_pid(int(ret_docs[k]))} {rank} {scores[k]:.6f} {tag}")

    return {
        "duplicate_groups.tsv": _text(_duplicate_groups(run_lines)),
        "qrels.tsv": _text(qrels_lines),
        "bm25.run": _text(run_lines["bm25"]),
        "reranker_v2.run": _text(run_lines["reranker-v2"]),
        "dense_ties.run": _text(run_lines["dense-ties"]),
        "weights.tsv": _text(weights_lines),
        **_judge_files(qrels_lines, hidden, favoured),
    }


def _judge_files(
    qrels_lines: list[str], hidden: dict[str, dict[str, int]], favoured: set[tuple[str, str]]
) -> dict[str, bytes]:
    """The judge demo's judgments: a model's grade of every judged or returned product of every query (the true
    grade moved one step up or down at random, and one step up more often for the reranker's top 10: a judge
    that favours one system), and the human judgments of ``N_LABELLED`` queries drawn at random (the demo's
    judgments of those queries). Its own seed, so the other files do not change."""
    rng = np.random.default_rng(JUDGE_SEED)
    labelled = set(rng.choice(sorted(hidden), size=N_LABELLED, replace=False).tolist())
    judge_lines = ["query_id\tdoc_id\tgrade"]
    for qid in sorted(hidden):
        for doc, grade in sorted(hidden[qid].items()):
            step = rng.choice([-1, 0, 1], p=[0.15, 0.6, 0.25])
            if (qid, doc) in favoured and rng.random() < 0.3:
                step += 1
            judge_lines.append(f"{qid}\t{doc}\t{int(np.clip(grade + step, 0, 3))}")
    human_lines = qrels_lines[:1] + [line for line in qrels_lines[1:] if line.split("\t", 1)[0] in labelled]
    return {"human_qrels.tsv": _text(human_lines), "judge_qrels.tsv": _text(judge_lines)}


def _duplicate_groups(run_lines: dict[str, list[str]]) -> list[str]:
    """Near-duplicate product groups (variants of one product), for the duplicate-rate companion measure.

    About one returned product in six joins the group of another product returned for the same
    query; the generator has its own seed so the runs and judgments above do not change.
    """
    rng = np.random.default_rng(SEED + 7)
    per_query: dict[str, list[str]] = {}
    for tag in sorted(run_lines):
        for line in run_lines[tag]:
            qid, _, doc, *_ = line.split(" ")
            docs = per_query.setdefault(qid, [])
            if doc not in docs:
                docs.append(doc)
    group_of: dict[str, str] = {}
    for qid in sorted(per_query):
        docs = per_query[qid]
        for doc in docs:
            if doc in group_of or rng.random() >= 1 / 6:
                continue
            other = docs[int(rng.integers(len(docs)))]
            if other != doc:
                group = group_of.setdefault(other, f"G-{other[2:]}")
                group_of[doc] = group
    lines = ["doc_id\tgroup"] + [f"{doc}\t{group}" for doc, group in sorted(group_of.items())]
    return lines
