"""Generate the deterministic demo data set used by ``configs/demo*.yaml``.

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

Everything is derived from ``numpy.random.default_rng(SEED)``; running the
script twice produces byte-identical files. Run from anywhere with
``python configs/make_demo.py``; output goes to ``configs/demo/`` next to this
script.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SEED = 20240611
N_QUERIES = 240
N_ALL_ZERO = 7
CATALOG_SIZE = 200_000
UNJUDGED_POOL = 40  # per-query pool of unjudged candidate products
SCRAMBLED_FRACTION = 0.15

JUDGED_GRADE_P = np.array([0.45, 0.32, 0.16, 0.07])
UNJUDGED_GRADE_P = np.array([0.62, 0.26, 0.10, 0.02])

OUT_DIR = Path(__file__).resolve().parent / "demo"


def _qid(i: int) -> str:
    return f"q{i + 1:04d}"


def _pid(n: int) -> str:
    return f"P-{n:06d}"


def _order(scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Indices sorted by descending score; ties broken in random order."""
    perm = rng.permutation(len(scores))
    # stable sort on the shuffled array => equal scores keep random order
    return perm[np.argsort(-scores[perm], kind="stable")]


def _write(path: Path, lines: list[str]) -> int:
    data = "".join(line + "\n" for line in lines).encode("ascii")
    path.write_bytes(data)
    return len(data)


def main() -> None:
    rng = np.random.default_rng(SEED)
    OUT_DIR.mkdir(parents=True, exist_ok=True)

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

    raw_weights = rng.lognormal(mean=0.0, sigma=1.3, size=N_QUERIES)
    raw_weights = raw_weights / raw_weights.mean()

    n_judged_total = 0
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

        for d, g in zip(judged_docs, grades):
            qrels_lines.append(f"{qid}\t{_pid(int(d))}\t{int(g)}")
        n_judged_total += n_judged
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
            if tag == "reranker-v2" and qi == missing_in_reranker:
                continue
            for rank, k in enumerate(order, start=1):
                run_lines[tag].append(f"{qid} Q0 {_pid(int(ret_docs[k]))} {rank} {scores[k]:.6f} {tag}")

    dup_lines = _duplicate_groups(run_lines)
    sizes = {
        "duplicate_groups.tsv": _write(OUT_DIR / "duplicate_groups.tsv", dup_lines),
        "qrels.tsv": _write(OUT_DIR / "qrels.tsv", qrels_lines),
        "bm25.run": _write(OUT_DIR / "bm25.run", run_lines["bm25"]),
        "reranker_v2.run": _write(OUT_DIR / "reranker_v2.run", run_lines["reranker-v2"]),
        "dense_ties.run": _write(OUT_DIR / "dense_ties.run", run_lines["dense-ties"]),
        "weights.tsv": _write(OUT_DIR / "weights.tsv", weights_lines),
    }
    print(
        f"wrote {len(sizes)} files to {OUT_DIR} ({sum(sizes.values())} bytes): "
        f"{N_QUERIES} queries, {n_judged_total} judgments, "
        f"{N_ALL_ZERO} all-zero queries, reranker-v2 missing {_qid(missing_in_reranker)}, "
        f"{n_scrambled} scrambled reranker-v2 queries"
    )


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


if __name__ == "__main__":
    main()
