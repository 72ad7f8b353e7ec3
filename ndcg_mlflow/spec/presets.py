"""Other tools' nDCG definitions, field by field, as spec presets.

``metric.preset: trec_eval`` fills every metric field with that tool's choice;
fields written beside the preset override it. Each field carries what the tool
does and where its source says so. Where a tool cannot be reproduced (an
unspecified tie order, a behaviour that changed between versions), the note
says so instead of pretending.

The ``ranx`` entry exists for ``explain``'s comparison table only: its tie order
is unspecified, so no preset claims to reproduce it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..rules import METRIC_FIELDS as FIELDS  # noqa: F401 - the metric rules, declared in ndcg_mlflow.rules


@dataclass(frozen=True)
class Preset:
    name: str
    title: str
    values: dict  # spec field -> raw spec value (as it would be written in YAML)
    notes: dict  # spec field -> what the tool does, with its source
    caveats: tuple[str, ...] = ()
    reproducible: bool = True


TREC_EVAL = Preset(
    name="trec_eval",
    title="NIST trec_eval `ndcg` / `ndcg_cut` (also pytrec_eval and ir_measures' default nDCG)",
    values={
        "gain": "linear",
        "cutoffs": [5, 10, 15, 20, 30, 100, 200, 500, 1000, "all"],
        "discount": "log2",
        "ties": "id_descending",
        "ideal": "judged_catalog",
        "empty_ideal": "zero",
        "unjudged": "zero",
        "missing_queries": "exclude",
    },
    notes={
        "gain": "the judged grade itself is the gain; grades <= 0 earn nothing (m_ndcg.c; a gain table is "
        "`-m ndcg.1=3,2=9`, grades it does not list keep their own value)",
        "cutoffs": "`ndcg_cut` reports 5, 10, 15, 20, 30, 100, 200, 500, 1000; `ndcg` is the whole list "
        "(m_ndcg_cut.c, m_ndcg.c)",
        "discount": "gain / log2(rank + 1) (m_ndcg.c)",
        "ties": "documents are sorted by score descending, equal scores by document id descending (strcmp); "
        "the rank column is ignored (form_res_rels.c)",
        "ideal": "every judged document of the query, sorted by gain (m_ndcg.c)",
        "empty_ideal": "a query with no relevant document scores 0 (m_ndcg.c)",
        "unjudged": "a returned document without a judgment earns 0 (-J would condense)",
        "missing_queries": "a judged query absent from the run is left out of `all`; `-c` scores it 0 "
        "(use missing_queries: zero)",
    },
    caveats=(
        "trec_eval prints 4 decimals; this tool keeps full precision.",
        "cutoff 23.4 is read by trec_eval as 23; here cutoffs are integers.",
    ),
)

GDEVAL = Preset(
    name="gdeval",
    title="TREC Web track gdeval.pl (ir_measures' nDCG(dcg='exp-log2'))",
    values={
        "gain": "exponential",
        "cutoffs": [20],
        "discount": "log2",
        "ties": "id_descending",
        "ideal": "judged_catalog",
        "empty_ideal": "exclude",
        "unjudged": "zero",
        "missing_queries": "exclude",
    },
    notes={
        "gain": "2^grade - 1; only judgments > 0 are kept, so negative grades earn 0 (gdeval.pl, sub dcg and the "
        "qrels loop; grades above 4 are refused)",
        "cutoffs": "one depth k per call (`gdeval.pl qrels run k`); the Web track reported k = 20",
        "discount": "gain / ln(rank + 1): the natural log, which changes DCG by the constant factor ln 2 but not "
        "nDCG (both DCG and ideal DCG use it); DCG values here are in log2 units",
        "ties": "run sorted by topic, score descending, then document id descending (gdeval.pl, sub runOrder)",
        "ideal": "the positive judgments of the topic sorted by grade (gdeval.pl, qrelsOrder and dcg)",
        "empty_ideal": "a topic with no positive judgment is not reported (gdeval.pl, topicDone checks $seen)",
        "unjudged": "an unjudged document's gain is 0",
        "missing_queries": "only topics present in the run are reported",
    },
    caveats=(
        "gdeval requires numeric topic ids and Q0 in the run; this tool accepts any ids.",
        "gdeval counts a document listed twice; this tool refuses such a run.",
    ),
)

SKLEARN = Preset(
    name="sklearn",
    title="scikit-learn `sklearn.metrics.ndcg_score(..., ignore_ties=False)`",
    values={
        "gain": "linear",
        "cutoffs": ["all"],
        "discount": "log2",
        "ties": "average",
        "ideal": "candidates",
        "empty_ideal": "zero",
        "unjudged": "zero",
        "missing_queries": "exclude",
    },
    notes={
        "gain": "y_true values are used as gains as given (metrics/_ranking.py, _dcg_sample_scores); negative "
        "y_true is refused by recent versions, here negative grades earn 0",
        "cutoffs": "k=None: the whole list",
        "discount": "1 / log2(rank + 1) (_dcg_sample_scores, log_base=2)",
        "ties": "ignore_ties=False averages the gains of tied scores over their positions (_tie_averaged_dcg, "
        "McSherry & Najork 2008)",
        "ideal": "the y_true of the scored items only (the returned candidates), sorted descending",
        "empty_ideal": "a sample whose ideal DCG is 0 scores 0 (_ndcg_sample_scores: all_irrelevant)",
        "unjudged": "the caller gives every scored item a y_true; unjudged items are usually 0",
        "missing_queries": "only the samples passed are scored",
    },
)

TORCHMETRICS = Preset(
    name="torchmetrics",
    title="TorchMetrics `RetrievalNormalizedDCG()` (default empty_target_action='neg')",
    values={
        "gain": "linear",
        "cutoffs": ["all"],
        "discount": "log2",
        "ties": "average",
        "ideal": "candidates",
        "empty_ideal": "zero",
        "unjudged": "zero",
        "missing_queries": "exclude",
    },
    notes={
        "gain": "the target values are the gains (functional/retrieval/ndcg.py, _dcg_sample_scores)",
        "cutoffs": "top_k=None: the whole list",
        "discount": "1 / log2(rank + 1)",
        "ties": "tied predictions are averaged: _tie_average_dcg is a translation of scikit-learn's (current "
        "versions; early versions sorted ties arbitrarily)",
        "ideal": "the targets of the documents of the query that were passed, sorted descending",
        "empty_ideal": "empty_target_action='neg': a query without a positive target counts as 0.0",
        "unjudged": "every passed document has a target; unjudged documents are usually passed as 0",
        "missing_queries": "only the queries present in the indexes are averaged",
    },
    caveats=(
        "Recent TorchMetrics versions mask predictions <= 0 to -inf before ranking (they tie at the "
        "bottom and a query whose predictions are all <= 0 scores 0); this preset follows the documented "
        "definition and does not reproduce that masking: shift scores to be positive to compare.",
        "The functional form flattens 2-D inputs into one ranking; the module (with indexes) is per query.",
    ),
)

RANX = Preset(
    name="ranx",
    title="ranx `ndcg` (Järvelin, linear gain) / `ndcg_burges` (exponential gain)",
    values={
        "gain": "linear",
        "cutoffs": ["all"],
        "discount": "log2",
        "ties": None,
        "ideal": "judged_catalog",
        "empty_ideal": "zero",
        "unjudged": "zero",
        "missing_queries": None,
    },
    notes={
        "gain": "`ndcg`: the grade (Järvelin & Kekäläinen); `ndcg_burges`: 2^grade - 1; judgments below rel_lvl=1 "
        "are dropped (metrics/ndcg.py, clean_qrels)",
        "cutoffs": "k=0: the whole list",
        "discount": "1 / log2(rank + 1)",
        "ties": "unspecified: runs are sorted by score with no documented tie rule, so tied documents may come "
        "in any order — no preset can reproduce it",
        "ideal": "the relevant judgments of the query (`_idcg` over the qrels)",
        "empty_ideal": "an ideal DCG of 0 is replaced by 1, so the query scores 0 (`_ndcg`)",
        "unjudged": "unjudged documents earn 0",
        "missing_queries": "runs and qrels must hold the same queries unless make_comparable fills them in with "
        "empty rankings (scored 0)",
    },
    reproducible=False,
)

PRESETS = {p.name: p for p in (TREC_EVAL, GDEVAL, SKLEARN, TORCHMETRICS)}
TOOLS = (TREC_EVAL, GDEVAL, SKLEARN, TORCHMETRICS, RANX)
