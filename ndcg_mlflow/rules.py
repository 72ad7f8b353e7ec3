"""Each metric rule declared once: its choices, their plain words, its alternatives, its resolved form.

A rule is one field of the spec that changes an nDCG number: the eight ``metric`` fields (gain, cutoffs,
discount, ties, ideal, empty_ideal, unjudged, missing_queries) and the two ``queries`` fields (weights, set).
:data:`RULES` holds each one's

- choices (the named values the spec accepts; gain also takes a table, cutoffs a list, queries a path),
- the plain words ``explain`` prints for a value (:meth:`Rule.words`),
- the alternatives ``sensitivity`` recomputes under (:meth:`Rule.alternatives`),
- the resolved form, one text per rule: an MLflow parameter and a line of ``summary.json`` (:meth:`Rule.resolve`),
- the parse of that form back to the value (:meth:`Rule.parse`) and to the spec's own (YAML) form
  (:meth:`Rule.raw`), with which ``compare`` rebuilds the definition of a logged run.

Validation (:mod:`ndcg_mlflow.spec`), ``explain``, ``sensitivity``, ``Spec.resolved()`` and ``compare`` read
this table. :data:`DEFINITION_KEYS` (the resolved keys of every rule) is what the definition digest covers and
what ``compare`` requires to be equal.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Gain:
    """How a grade becomes a gain: ``exponential`` (2^g - 1), ``linear`` (g), or a table."""

    kind: str
    table: tuple[tuple[float, float], ...] = ()

    @property
    def is_table(self) -> bool:
        return self.kind == "table"

    @property
    def is_exponential(self) -> bool:
        return self.kind == "exponential"

    def describe(self) -> str:
        if self.is_table:
            return json.dumps({_num(k): _num(v) for k, v in self.table})
        return self.kind


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else float(x)


# --------------------------------------------------------------------------- metric keys and labels
# A cutoff has three names: the cutoff itself (``10``, ``None`` for the whole list), its metric key
# (``ndcg_at_10``, ``ndcg_at_all``: MLflow forbids ``@`` in a metric name) and its label (``nDCG@10``). They are
# built and parsed here only; ``cutoff_of_key(cutoff_key(k)) == k`` for every cutoff.

KEY_PREFIX = "ndcg_at_"
NAME = "nDCG"
HEADLINE_CUTOFF = 10  # the cutoff shown first (wins and losses, figures) when declared; else the first cutoff


def cutoff_label(k: int | None) -> str:
    """The cutoff in text: ``10``, ``all``."""
    return "all" if k is None else str(k)


def cutoff_of_label(label: str) -> int | None:
    """The inverse of :func:`cutoff_label`: ``"10"`` -> 10, ``"all"`` -> None."""
    if label == "all":
        return None
    if label.isascii() and label.isdigit() and label == str(int(label)) and int(label) > 0:
        return int(label)
    raise ValueError(f"{label!r} is not a cutoff (a positive integer or 'all')")


def cutoff_key(k: int | None) -> str:
    """The metric key of a cutoff: ``ndcg_at_10``, ``ndcg_at_all`` (MLflow forbids ``@``)."""
    return KEY_PREFIX + cutoff_label(k)


def shortest_text(x: Any) -> str:
    """A number as the shortest text that reads back as the same double (``1``, ``0.3``, ``1.0000001``,
    ``0.30000000000000004``, ``1e-05``), never ``-0``: two different numbers never share it. The one definition
    of a number's exact text, for keys built from a number (``risk.alpha_text``) and for people
    (``render.format.exact``)."""
    v = float(x)
    if v == 0:
        v = 0.0  # (-0.0 is 0)
    text = repr(v)
    return text[:-2] if text.endswith(".0") else text


def key_label(key: str) -> str:
    """The cutoff label of a metric key: ``ndcg_at_10`` -> ``10``; anything but a metric key is an error."""
    if not key.startswith(KEY_PREFIX):
        raise ValueError(f"{key!r} is not an nDCG metric key ({KEY_PREFIX}<K> or {KEY_PREFIX}all)")
    label = key[len(KEY_PREFIX) :]
    cutoff_of_label(label)
    return label


def cutoff_of_key(key: str) -> int | None:
    """The cutoff of a metric key: ``ndcg_at_10`` -> 10, ``ndcg_at_all`` -> None."""
    return cutoff_of_label(key_label(key))


def key_of_text(text: str, keys: Sequence[str]) -> str | None:
    """One of ``keys`` as a person writes it: the key itself (``ndcg_at_10``), its cutoff (``10``, ``all``) or its
    name (``nDCG@10``, any case); None when it names none of them."""
    if text in keys:
        return text
    head = NAME.lower() + "@"
    label = text[len(head) :] if text.lower().startswith(head) else text
    try:
        key = cutoff_key(cutoff_of_label(label))
    except ValueError:
        return None
    return key if key in keys else None


KEY_FORMS = f"a key ({KEY_PREFIX}10), its cutoff (10) or its name ({NAME}@10)"  # what key_of_text reads


def metric_name(key: str, escape: Callable[[str], str] = str) -> str:
    """The label of a metric key for people: ``ndcg_at_10`` -> ``nDCG@10``; ``escape`` is applied to the cutoff
    (markdown escaping would turn the ``@`` itself into ``\\@``)."""
    return f"{NAME}@{escape(key_label(key))}"


def companion_key(key: str, measure: str) -> str:
    """The metric key of a measure reported beside nDCG at the same cutoff: ``judged_coverage_at_10``."""
    return f"{measure}_at_{key_label(key)}"


def headline_key(keys: Sequence[str]) -> str:
    """The key shown first: nDCG@10 if declared, else the first cutoff."""
    head = cutoff_key(HEADLINE_CUTOFF)
    return head if head in keys else keys[0]


STOPS = "error"  # a choice that stops the evaluation: never an alternative for sensitivity


@dataclass(frozen=True)
class Rule:
    name: str  # the field name in its section
    section: str  # "metric" or "queries"
    choices: tuple[str, ...]  # the named values
    # plain words of each choice; a "{}" in them is filled with the value (the declared path of a queries rule)
    words_of: Mapping[str, str]
    resolve: Callable[[Any], str]  # value -> resolved text
    parse: Callable[[str], Any]  # resolved text -> value
    raw: Callable[[Any], Any] = lambda v: v  # value -> the spec's (YAML) form
    alternatives_of: Callable[[Any], list] | None = None  # value -> other values (sensitivity)
    key_of: Callable[[Any], str] = str  # value -> its entry in words_of
    words_fn: Callable[[Any], str] | None = None  # the words of a value not given by one entry of words_of

    @property
    def key(self) -> str:
        """The resolved key (MLflow parameter name): ``metric.ties``, ``queries.weights``."""
        return f"{self.section}.{self.name}"

    def words(self, value: Any) -> str:
        if self.words_fn is not None:
            return self.words_fn(value)
        return self.words_of[self.key_of(value)].format(value)

    def alternatives(self, value: Any) -> list:
        """Every other value sensitivity recomputes under, in declaration order (never one that stops)."""
        if self.alternatives_of is not None:
            return self.alternatives_of(value)
        return [c for c in self.choices if c != value and c != STOPS]


def _choice_rule(name: str, words: dict[str, str]) -> Rule:
    """A metric rule whose value is one of its named choices, resolved as itself (validation is the spec's)."""
    return Rule(name, "metric", tuple(words), words, resolve=str, parse=str)


# --------------------------------------------------------------------------- gain

GAIN_NAMES = ("exponential", "linear")


def _gain_parse(text: str) -> Gain:
    if text in GAIN_NAMES:
        return Gain(text)
    table = json.loads(text)
    if not isinstance(table, dict):
        raise ValueError(f"metric.gain {text!r} is neither a named gain nor a table")
    return Gain("table", tuple(sorted((float(k), float(v)) for k, v in table.items())))


def _gain_raw(gain: Gain) -> Any:
    return {g: v for g, v in gain.table} if gain.is_table else gain.kind


def _gain_alternatives(gain: Gain) -> list[Gain]:
    return [Gain(k) for k in GAIN_NAMES if Gain(k) != gain]


GAIN = Rule(
    "gain",
    "metric",
    GAIN_NAMES,
    {
        "exponential": "a grade g earns 2^g - 1 (negative grades earn 0)",
        "linear": "a grade g earns g (negative grades earn 0)",
        "table": "each grade earns the gain the table declares; a grade the table lacks is an error",
    },
    resolve=lambda g: g.describe(),
    parse=_gain_parse,
    raw=_gain_raw,
    alternatives_of=_gain_alternatives,
    key_of=lambda g: g.kind,
)

# --------------------------------------------------------------------------- cutoffs


def _cutoffs_parse(text: str) -> tuple[int | None, ...]:
    return tuple(cutoff_of_label(c) for c in text.split(","))


def _cutoffs_words(cutoffs: tuple[int | None, ...]) -> str:
    return "; ".join(CUTOFF_WORDS["all" if k is None else "k"].format(k) for k in cutoffs)


CUTOFF_WORDS = {
    "all": "all: DCG over the whole returned list against the ideal over every judged (or returned) document",
    "k": "{0}: DCG of the top {0} against the ideal top {0}",
}


CUTOFFS = Rule(
    "cutoffs",
    "metric",
    ("all",),
    CUTOFF_WORDS,
    resolve=lambda cutoffs: ",".join(cutoff_label(k) for k in cutoffs),
    parse=_cutoffs_parse,
    raw=lambda cutoffs: ["all" if k is None else k for k in cutoffs],
    alternatives_of=lambda cutoffs: [],
    words_fn=_cutoffs_words,
)

# --------------------------------------------------------------------------- the named choices

DISCOUNT = _choice_rule(
    "discount",
    {
        "log2": "rank i counts 1 / log2(i + 1): rank 1 keeps all its gain, rank 2 about 0.631, rank 3 0.5",
    },
)
TIES = _choice_rule(
    "ties",
    {
        "displayed_order": "equal scores keep the order the run shows them in (its rank column, else its line order)",
        "id_ascending": "equal scores are ordered by document id, ascending plain string order ('d10' before 'd9')",
        "id_descending": "equal scores are ordered by document id, descending plain string order (as trec_eval does)",
        "average": "each group of equal scores earns its mean gain at each of its positions (McSherry & Najork 2008), "
        "also when a cutoff cuts the group",
    },
)
IDEAL = _choice_rule(
    "ideal",
    {
        "judged_catalog": "the ideal is the best ordering of every judged document of the query: a relevant document "
        "the system never returned lowers the score",
        "candidates": "the ideal is the best ordering of the documents the system returned: the score measures "
        "ordering only, not what retrieval missed",
    },
)
EMPTY_IDEAL = _choice_rule(
    "empty_ideal",
    {
        "exclude": "a query whose ideal DCG is 0 has no nDCG: empty in the table, left out of the mean, counted",
        "zero": "a query whose ideal DCG is 0 scores 0 and is averaged in",
        "one": "a query whose ideal DCG is 0 scores 1 and is averaged in",
        "error": "a query whose ideal DCG is 0 stops the evaluation, naming the queries",
    },
)
UNJUDGED = _choice_rule(
    "unjudged",
    {
        "zero": "a returned document without a judgment earns 0 and keeps its position",
        "condense": "a returned document without a judgment is removed before cutting at K (condensed lists, "
        "trec_eval -J)",
        "error": "a returned document without a judgment stops the evaluation",
    },
)
MISSING_QUERIES = _choice_rule(
    "missing_queries",
    {
        "zero": "a query of the evaluated set that a run does not return at all scores 0",
        "exclude": "a query of the evaluated set that a run does not return at all is left out and counted",
        "error": "a query of the evaluated set that a run does not return at all stops the evaluation",
    },
)

# --------------------------------------------------------------------------- queries: a choice or a path


def _path_rule(name: str, default: str, raw_default: str | None, words: dict[str, str]) -> Rule:
    """A ``queries`` rule whose value is ``None`` (the default: resolved as ``default``, written in a spec as
    ``raw_default``) or the declared path of a file."""
    return Rule(
        name,
        "queries",
        (default,),
        words,
        resolve=lambda declared: default if declared is None else declared,
        parse=lambda text: None if text == default else text,
        raw=lambda declared: raw_default if declared is None else declared,
        alternatives_of=lambda declared: [],
        key_of=lambda declared: default if declared is None else "path",
    )


WEIGHTS = _path_rule(
    "weights",
    "uniform",
    "uniform",
    {
        "uniform": "uniform: the mean is the plain average over the queries not excluded",
        "path": "from {}; the mean is sum(w * nDCG) / sum(w) over the queries not excluded",
    },
)
QUERY_SET = _path_rule(
    "set",
    "null",
    None,
    {
        "null": "every judged query",
        "path": "the declared set in {}",
    },
)

# --------------------------------------------------------------------------- what each choice implies
# Every module asks these; none compares a rule's value with a literal.


def stops(value: Any) -> bool:
    """The choice stops the evaluation (``error``) where its case arises, naming the queries or documents."""
    return value == STOPS


def keeps_displayed_order(ties: str) -> bool:
    """Equal scores keep the order the run shows them in: its rank column, else its rows' order."""
    return ties == "displayed_order"


def averages_ties(ties: str) -> bool:
    """Each group of equal scores earns its mean gain at each of its positions (the rows' order within a group
    then decides only which documents a top list shows)."""
    return ties == "average"


def id_tiebreak(ties: str) -> bool | None:
    """Equal scores are ordered by document id: whether descending (``id_descending``); None for another rule."""
    return {"id_ascending": False, "id_descending": True}.get(ties)


def needs_row_order(ties: str, sensitivity: bool = False) -> bool:
    """The numbers depend on the run's displayed order (a rank column, else the rows' order): under
    ``displayed_order``, or when sensitivity recomputes under an alternative that keeps it."""
    return keeps_displayed_order(ties) or (
        sensitivity and any(keeps_displayed_order(t) for t in TIES.alternatives(ties))
    )


def ideal_of_catalog(ideal: str) -> bool:
    """The ideal list is made of every judged document of the query (``judged_catalog``), not only the returned."""
    return ideal == "judged_catalog"


def condenses(unjudged: str) -> bool:
    """Returned documents without a judgment are removed before ranks are counted (``condense``)."""
    return unjudged == "condense"


def excludes(value: Any) -> bool:
    """The case's queries have no value: left out of the mean and counted (``exclude``)."""
    return value == "exclude"


def empty_ideal_score(empty_ideal: str) -> float:
    """The nDCG of a query whose ideal DCG is 0: 0 (``zero``), 1 (``one``), else none (NaN: ``exclude``, and
    ``error``, which the caller applies)."""
    return {"zero": 0.0, "one": 1.0}.get(empty_ideal, math.nan)


def missing_score(missing_queries: str) -> float:
    """The nDCG of a query the run does not return: 0 (``zero``), else none (NaN: ``exclude``, and ``error``)."""
    return 0.0 if missing_queries == "zero" else math.nan


# --------------------------------------------------------------------------- the statistics choices
# The spec's statistics and decision choices, each a named value resolved as itself (an MLflow parameter, a line
# of summary.json): declared here once, with what each choice implies. Validation, ``explain``, ``compare``, the
# statistics of both engines, the report and the spec reference read them; none compares a value with a literal.


@dataclass(frozen=True)
class Choice:
    """A statistics or decision field of the spec whose value is one of its named choices."""

    key: str  # the key path in the spec (and the resolved key): ``uncertainty.method``
    choices: tuple[str, ...]  # the named values, the default (where the field may be left out) first

    @property
    def default(self) -> str:
        return self.choices[0]


PERCENTILE, BCA, STUDENTIZED = "percentile", "bca", "studentized"
RANDOMIZATION, T_TEST, BOTH_TESTS = "randomization", "t_test", "both"
HOLM, BONFERRONI, BENJAMINI_HOCHBERG, NO_CORRECTION = "holm", "bonferroni", "benjamini_hochberg", "none"
SUPERIORITY, NON_INFERIORITY = "superiority", "non_inferiority"
UNSTRATIFIED, BY_SEGMENT = "none", "segments"
PPI_PLUS_PLUS, PPI, HUMAN_ONLY = "ppi++", "ppi", "human_only"
RANDOM_SUBSET = "random"

INTERVAL_METHOD = Choice("uncertainty.method", (BCA, PERCENTILE, STUDENTIZED))
TEST = Choice("comparison.test", (RANDOMIZATION, T_TEST, BOTH_TESTS))
CORRECTION = Choice("comparison.correction", (HOLM, BONFERRONI, BENJAMINI_HOCHBERG, NO_CORRECTION))
DECISION_RULE = Choice("decision.rule", (SUPERIORITY, NON_INFERIORITY))
GUARDRAIL_RULE = Choice("decision.guardrails.segments.rule", DECISION_RULE.choices)  # the rules of decision.rule
STRATIFY = Choice("uncertainty.stratify", (UNSTRATIFIED, BY_SEGMENT))
JUDGE_ESTIMATOR = Choice("judge.estimator", (PPI_PLUS_PLUS, PPI, HUMAN_ONLY))
LABELLED_QUERIES = Choice("judge.labelled_queries", (RANDOM_SUBSET, BY_SEGMENT))
STATISTICS_CHOICES: dict[str, Choice] = {
    c.key: c
    for c in (
        INTERVAL_METHOD,
        STRATIFY,
        TEST,
        CORRECTION,
        DECISION_RULE,
        GUARDRAIL_RULE,
        JUDGE_ESTIMATOR,
        LABELLED_QUERIES,
    )
}


def percentile_interval(method: str) -> bool:
    """The interval's ends are the bootstrap distribution's quantiles (``percentile``)."""
    return method == PERCENTILE


def bca_interval(method: str) -> bool:
    """The quantiles are corrected for bias and acceleration (``bca``)."""
    return method == BCA


def studentizes(method: str) -> bool:
    """The interval is theta -/+ a bootstrap-t quantile times the standard error (``studentized``): each resample
    needs its own standard error."""
    return method == STUDENTIZED


def randomizes(test: str) -> bool:
    """The paired randomization (sign-flip) test is computed (``randomization``, ``both``)."""
    return test in (RANDOMIZATION, BOTH_TESTS)


def t_tests(test: str) -> bool:
    """The paired t-test is computed (``t_test``, ``both``)."""
    return test in (T_TEST, BOTH_TESTS)


def corrected_test(test: str) -> str:
    """The test whose p-values are corrected (and that the decision reads): the randomization test when it is
    computed, else the t-test."""
    return RANDOMIZATION if randomizes(test) else T_TEST


def corrects(correction: str) -> bool:
    """The p-values are corrected for the family (every choice but ``none``)."""
    return correction != NO_CORRECTION


def bonferroni(correction: str) -> bool:
    return correction == BONFERRONI


def holm(correction: str) -> bool:
    return correction == HOLM


def benjamini_hochberg(correction: str) -> bool:
    return correction == BENJAMINI_HOCHBERG


def superiority(rule: str) -> bool:
    """The candidate must beat the baseline by more than the margin (``superiority``); else it must not lose by
    more than the margin (``non_inferiority``)."""
    return rule == SUPERIORITY


def non_inferiority(rule: str) -> bool:
    return rule == NON_INFERIORITY


def stratifies(stratify: str | None) -> bool:
    """``uncertainty.stratify`` as written (or logged; None: left out): each overall interval resamples within
    segments (``segments``)."""
    return stratify == BY_SEGMENT


def fixed_lambda(estimator: str) -> float | None:
    """The weight of the judge's labels an estimator fixes (``ppi``: 1, the classic prediction-powered estimate;
    ``human_only``: 0, the labelled queries alone), or None when it is chosen from the data to minimise the
    variance (``ppi++``)."""
    return {PPI: 1.0, HUMAN_ONLY: 0.0}.get(estimator)


def stratifies_labels(labelled_queries: str) -> bool:
    """The human-labelled queries were drawn within each segment (``segments``): one weight of the judge's labels
    per segment, the segments combined by their weight; else a simple random sample of all the evaluated queries
    (``random``)."""
    return labelled_queries == BY_SEGMENT


def stratify_text(stratified: bool) -> str:
    """The resolved (and written) form of the spec's stratify flag."""
    return BY_SEGMENT if stratified else UNSTRATIFIED


METRIC_RULES = (GAIN, CUTOFFS, DISCOUNT, TIES, IDEAL, EMPTY_IDEAL, UNJUDGED, MISSING_QUERIES)
QUERY_RULES = (WEIGHTS, QUERY_SET)
RULES: dict[str, Rule] = {r.key: r for r in METRIC_RULES + QUERY_RULES}
METRIC_FIELDS = tuple(r.name for r in METRIC_RULES)
# What defines the numbers: the definition digest covers these resolved keys, and ``compare`` refuses two runs
# whose values of them differ. Not the data paths, the preset's name (its fields are here), or the statistics.
DEFINITION_KEYS = tuple(RULES)


def rule_values(spec) -> dict[str, Any]:
    """Each rule's value in a spec, by resolved key."""
    m, q = spec.metric, spec.queries
    out = {r.key: getattr(m, r.name) for r in METRIC_RULES}
    out[WEIGHTS.key] = q.weights.declared if q.weights else None
    out[QUERY_SET.key] = q.set.declared if q.set else None
    return out


def resolved(spec) -> dict[str, str]:
    """Each rule's resolved form, by resolved key."""
    return {key: RULES[key].resolve(value) for key, value in rule_values(spec).items()}


def raw_definition(params: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The ``metric`` and ``queries`` sections of a spec, rebuilt from resolved params (those logged to MLflow).
    The metric fields are required; a query field absent from ``params`` takes its default."""
    out: dict[str, dict[str, Any]] = {"metric": {}, "queries": {}}
    for rule in METRIC_RULES:
        out["metric"][rule.name] = rule.raw(rule.parse(params[rule.key]))
    for rule in QUERY_RULES:
        out["queries"][rule.name] = rule.raw(rule.parse(params.get(rule.key, rule.choices[0])))
    return out
