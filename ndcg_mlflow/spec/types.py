"""The resolved, immutable spec: its frozen dataclasses and the constants of its schema.

Each metric and query rule (its choices, words, alternatives and resolved form) is declared in
:mod:`ndcg_mlflow.rules`; :mod:`.validate` builds these types from a spec's YAML.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..rules import (
    CORRECTION,
    DECISION_RULE,
    DEFINITION_KEYS,
    INTERVAL_METHOD,
    TEST,
    Gain,
    cutoff_key,
    stratify_text,
)
from ..rules import STRATIFY as STRATIFY_CHOICE
from ..rules import resolved as resolved_rules

SPEC_VERSION = 1
FORMATS = ("auto", "trec", "csv", "tsv", "jsonl", "parquet", "delta")
CI_METHODS = INTERVAL_METHOD.choices  # the statistics choices are declared in rules.py
TESTS = TEST.choices
CORRECTIONS = CORRECTION.choices
MAX_RESAMPLES = 10_000_000
# Largest cutoff (a cutoff beyond every list counts the whole list, as "all" does for the DCG) and largest
# declared catalog size: bounded only so that metric names and parameters stay short.
MAX_CUTOFF = 10**30
DECISION_RULES = DECISION_RULE.choices
STRATIFY = STRATIFY_CHOICE.choices  # uncertainty.stratify as written: "segments" resamples within each segment
RISK_ALPHA = (1.0, 5.0)  # comparison.risk_alpha's default
# Largest alpha of the tail-risk measures: a loss then weighs a million times a win, and a larger alpha only scales
# the losses' part further (URisk / alpha and TRisk tend to their limits); bounded so that the risk-adjusted
# differences, their sums and their squares stay finite numbers.
MAX_RISK_ALPHA = 1e6
SEGMENT_COLUMNS = ("query_id", "segment")  # the columns of a queries.segments file
SEGMENT_FORMATS = ("auto", "csv", "tsv", "jsonl", "parquet")


@dataclass(frozen=True)
class Metric:
    gain: Gain
    cutoffs: tuple[int | None, ...]  # None stands for "all"
    discount: str
    ties: str
    ideal: str
    empty_ideal: str
    unjudged: str
    missing_queries: str
    preset: str | None = None
    origin: tuple[tuple[str, str], ...] = ()  # field -> "spec" or "preset <name>"

    def source_of(self, field_name: str) -> str:
        return dict(self.origin).get(field_name, "spec")

    def replace(self, **changes: Any) -> Metric:
        """A copy with some rules changed (marked as changed from the declared spec)."""
        import dataclasses

        origin = dict(self.origin)
        origin.update({k: "alternative" for k in changes})
        return dataclasses.replace(self, origin=tuple(origin.items()), **changes)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(cutoff_key(k) for k in self.cutoffs)


@dataclass(frozen=True)
class Source:
    """A data source: a file (or a Parquet folder or glob) named in the spec, or a table given in memory
    (``path`` None, ``format`` ``"table"``). ``columns`` maps the tool's column names (``query_id``,
    ``doc_id``, ``grade``, ``score``, ``rank``) to the names the source uses. ``version``: the version of a
    Delta table (``format: delta``) that is read."""

    path: Path | None
    declared: str
    format: str = "auto"
    columns: tuple[tuple[str, str], ...] = ()
    # a system that is a model (``{model: URI, candidates: ...}``): the model URI as declared and the candidates
    # it scores; ``path`` is None until :mod:`ndcg_mlflow.models.systems` has written its scored rows (then their file)
    model: str | None = None
    candidates: Source | None = None
    version: int | None = None  # a Delta table's version (format delta)

    @property
    def in_memory(self) -> bool:
        return self.path is None and self.model is None

    @property
    def unscored(self) -> bool:
        """A model system whose candidates have not been scored yet."""
        return self.model is not None and self.path is None

    @property
    def file(self) -> Path:
        """``path``, for a source read from a file (a ValueError for a table given in memory)."""
        if self.path is None:
            raise ValueError(f"{self.declared} is a table given in memory, not a file")
        return self.path


IN_MEMORY = "in-memory table"
QRELS_COLUMNS = ("query_id", "doc_id", "grade")
RUN_COLUMNS = ("query_id", "doc_id", "score", "rank")
CANDIDATE_COLUMNS = ("query_id", "doc_id")  # a model's inputs keep their own names


@dataclass(frozen=True)
class Queries:
    weights: Source | None  # None means uniform
    set: Source | None
    segments: Source | None = None  # a (query_id, segment) file: every evaluated query in exactly one segment


@dataclass(frozen=True)
class MlflowSection:
    experiment: str
    tracking_uri: str | None = None
    run_name: str | None = None
    tags: tuple[tuple[str, str], ...] = ()  # custom tags set on every run the evaluation logs
    timeout: float | None = None  # seconds per HTTP request to a tracking server
    max_retries: int | None = None  # HTTP retries per request
    total_timeout: float | None = None  # seconds for the whole logging phase (default tracking.TOTAL_TIMEOUT)


@dataclass(frozen=True)
class Uncertainty:
    resamples: int
    confidence: float
    method: str
    seed: int
    stratify: bool = False  # ``stratify: segments``: each overall interval's bootstrap resamples within segments


@dataclass(frozen=True)
class Comparison:
    baseline: str
    test: str
    correction: str
    wins_losses: int
    tie_tolerance: float
    risk_alpha: tuple[float, ...] = RISK_ALPHA  # the tail-risk measures' alphas (distinct, finite, >= 0)


@dataclass(frozen=True)
class SegmentGuardrail:
    """Every segment's paired comparison must pass ``rule`` with ``margin`` (the rules of ``decision.rule``)."""

    rule: str  # superiority | non_inferiority
    margin: float  # finite, >= 0


@dataclass(frozen=True)
class RegressionGuardrail:
    """At most ``max_share`` of the evaluated queries may lose more than ``delta`` of nDCG to the baseline."""

    delta: float  # in (0, 1): a loss of nDCG that a query can have
    max_share: float  # in (0, 1)


@dataclass(frozen=True)
class Guardrails:
    """The checks a decision adds beyond the overall comparison (each optional)."""

    segments: SegmentGuardrail | None = None  # needs queries.segments
    regressions: RegressionGuardrail | None = None


@dataclass(frozen=True)
class Decision:
    """The declared rule that turns a comparison into a pass or a fail (see :mod:`ndcg_mlflow.statistics.decision`)."""

    key: str  # a compared metric key, such as ndcg_at_10
    rule: str  # superiority | non_inferiority
    margin: float  # >= 0
    max_p: float | None = None  # optional bound on the corrected p-value
    guardrails: Guardrails = Guardrails()


@dataclass(frozen=True)
class Report:
    sensitivity: bool


@dataclass(frozen=True)
class Companions:
    """Companion measures reported beside nDCG: duplicate rate in the top K and catalog coverage."""

    duplicates: Source | None = None  # file mapping doc_id -> duplicate group
    catalog_size: int | None = None
    catalog: Source | None = None  # file listing the catalog's doc ids


@dataclass(frozen=True)
class Judge:
    """Judgments from a model beside the human ones: ``data.qrels`` holds the human judgments of the labelled
    queries, ``judgments`` (``data.judge_qrels``) the model's of every evaluated query; ``estimator`` combines them
    (:mod:`ndcg_mlflow.statistics.judge`), ``labelled_queries`` says how the labelled queries were drawn and
    ``name`` names the judge (free text, recorded with the results)."""

    judgments: Source
    estimator: str  # ppi++ | ppi | human_only (rules.JUDGE_ESTIMATOR)
    labelled_queries: str  # random | segments (rules.LABELLED_QUERIES)
    name: str | None = None


@dataclass(frozen=True)
class Spec:
    spec_version: int
    name: str
    metric: Metric
    queries: Queries
    qrels: Source
    systems: tuple[tuple[str, Source], ...]
    mlflow: MlflowSection
    uncertainty: Uncertainty | None = None
    comparison: Comparison | None = None
    report: Report | None = None
    companions: Companions | None = None
    decision: Decision | None = None
    judge: Judge | None = None
    source: Path | None = None
    text: str = field(default="", repr=False)
    recorded: str | None = field(default=None, repr=False)  # recorded_text, when parse_spec made it

    @property
    def recorded_text(self) -> str:
        """The spec text as recorded (``spec.yaml``, uploaded as an artifact): the text as given when neither it
        nor any value of it holds credentials; otherwise the spec's values without credentials
        (:func:`ndcg_mlflow.uris.redact` on every string), as YAML under a comment saying so (see
        :func:`recorded_spec_text`)."""
        from .yamltext import recorded_spec_text

        return recorded_spec_text(None, self.text) if self.recorded is None else self.recorded

    @property
    def sha256(self) -> str:
        """sha256 of :attr:`recorded_text` (equal to the spec file's own sha256 when it holds no credentials and
        no ``--set`` was applied)."""
        return hashlib.sha256(self.recorded_text.encode("utf-8")).hexdigest()

    @property
    def sensitivity(self) -> bool:
        return bool(self.report and self.report.sensitivity)

    @property
    def system_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.systems)

    def resolved(self) -> dict[str, Any]:
        """Every resolved field as a flat ``{key.path: value}`` mapping (MLflow params)."""
        m = self.metric
        out: dict[str, Any] = {
            "spec_version": self.spec_version,
            "name": self.name,
            "metric.preset": m.preset or "none",
            **resolved_rules(self),  # metric.gain ... metric.missing_queries, queries.weights, queries.set
        }
        segments = self.queries.segments
        if segments is not None:  # (only when declared: every other spec's params stay as they were)
            out["queries.segments"] = segments.declared
            if segments.columns:
                out["queries.segments.columns"] = _mapping_text(segments.columns)
        out["data.qrels"] = self.qrels.declared
        if self.qrels.columns:
            out["data.qrels.columns"] = _mapping_text(self.qrels.columns)
        if self.qrels.version is not None:
            out["data.qrels.version"] = self.qrels.version
        for name, src in self.systems:
            if src.model is not None and src.candidates is not None:
                out[f"data.systems.{name}.model"] = src.model
                out[f"data.systems.{name}.candidates"] = src.candidates.declared
                if src.candidates.columns:
                    out[f"data.systems.{name}.candidates.columns"] = _mapping_text(src.candidates.columns)
                if src.candidates.version is not None:
                    out[f"data.systems.{name}.candidates.version"] = src.candidates.version
                continue
            out[f"data.systems.{name}"] = src.declared
            if src.columns:
                out[f"data.systems.{name}.columns"] = _mapping_text(src.columns)
            if src.version is not None:  # a Delta table: the version read is part of the data's identity
                out[f"data.systems.{name}.version"] = src.version
        if self.uncertainty is not None:
            u = self.uncertainty
            out.update(
                {
                    "uncertainty.resamples": u.resamples,
                    "uncertainty.confidence": u.confidence,
                    "uncertainty.method": u.method,
                    "uncertainty.seed": u.seed,
                }
            )
            if u.stratify:
                out["uncertainty.stratify"] = stratify_text(u.stratify)
        if self.comparison is not None:
            c = self.comparison
            out.update(
                {
                    "comparison.baseline": c.baseline,
                    "comparison.test": c.test,
                    "comparison.correction": c.correction,
                    "comparison.wins_losses": c.wins_losses,
                    "comparison.tie_tolerance": c.tie_tolerance,
                }
            )
            if c.risk_alpha != RISK_ALPHA:
                out["comparison.risk_alpha"] = ",".join(_number_text(a) for a in c.risk_alpha)
        if self.decision is not None:
            d = self.decision
            out.update(
                {
                    "decision.key": d.key,
                    "decision.rule": d.rule,
                    "decision.margin": d.margin,
                    "decision.max_p": "none" if d.max_p is None else d.max_p,
                }
            )
            g = d.guardrails
            if g.segments is not None:
                out["decision.guardrails.segments.rule"] = g.segments.rule
                out["decision.guardrails.segments.margin"] = g.segments.margin
            if g.regressions is not None:
                out["decision.guardrails.regressions.delta"] = g.regressions.delta
                out["decision.guardrails.regressions.max_share"] = g.regressions.max_share
        if self.judge is not None:
            j = self.judge
            out["data.judge_qrels"] = j.judgments.declared
            if j.judgments.columns:
                out["data.judge_qrels.columns"] = _mapping_text(j.judgments.columns)
            if j.judgments.version is not None:
                out["data.judge_qrels.version"] = j.judgments.version
            out["judge.estimator"] = j.estimator
            out["judge.labelled_queries"] = j.labelled_queries
            if j.name is not None:
                out["judge.name"] = j.name
        if self.report is not None:
            out["report.sensitivity"] = self.report.sensitivity
        if self.companions is not None:
            comp = self.companions
            if comp.duplicates is not None:
                out["companions.duplicates"] = comp.duplicates.declared
            if comp.catalog is not None or comp.catalog_size is not None:
                out["companions.catalog"] = comp.catalog.declared if comp.catalog else comp.catalog_size
        out["mlflow.experiment"] = self.mlflow.experiment
        return out

    def definition_digest(self) -> str:
        """Digest of what defines the numbers: the resolved metric and query rules
        (:data:`~ndcg_mlflow.rules.DEFINITION_KEYS`, which ``compare`` also requires to be equal), not the data."""
        resolved = self.resolved()
        keep = {k: resolved[k] for k in DEFINITION_KEYS}
        blob = json.dumps(keep, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()


def _number_text(x: float) -> str:
    """A number as written, exactly: ``5`` for 5.0, else the shortest text that reads back as the same double."""
    return str(int(x)) if x.is_integer() and abs(x) < 2**53 else repr(x)


def _mapping_text(columns: tuple[tuple[str, str], ...]) -> str:
    return ",".join(f"{k}={v}" for k, v in columns)


@dataclass(frozen=True)
class InMemory:
    """Which data are given as tables rather than declared in the spec's data section."""

    qrels: bool = False
    systems: tuple[str, ...] | None = None
