"""The evaluation spec: schema, validation and the resolved, immutable form.

A spec fixes every choice that changes an nDCG number before any system is
compared. Validation runs before any data is read: unknown keys are errors
(with a "did you mean"), every ``metric`` field and ``queries.weights`` is
required, and each error names the key path and what was expected. Each metric and query rule (its
choices, words, alternatives and resolved form) is declared in :mod:`ndcg_mlflow.rules`.

Version 1::

    spec_version: 1
    name: demo-product-search
    metric:
      gain: exponential          # exponential | linear | {grade: gain, ...}
      cutoffs: [5, 10, all]
      discount: log2
      ties: displayed_order      # displayed_order | id_ascending | id_descending | average
      ideal: judged_catalog      # judged_catalog | candidates
      empty_ideal: exclude       # exclude | zero | one | error
      unjudged: zero             # zero | condense | error
      missing_queries: zero      # zero | exclude | error
    queries:
      weights: uniform           # uniform | path to a (query_id, weight) file
      set: null                  # optional path to a list of query ids
    data:                        # may be left out when the data are given as tables (evaluate_tables)
      qrels: demo/qrels.tsv      # a path (a Parquet folder or glob too), or
                                 # {path: ..., format: trec|csv|tsv|jsonl|parquet, columns: {query_id: ...}}
                                 # or a Delta table: {path: ..., format: delta, version: N}
      systems:
        bm25: demo/bm25.run
    mlflow:
      experiment: demo-product-search
      run_name: nightly            # optional: the evaluation run's name
      tags: {team: search}         # optional: custom tags on every run logged
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import SpecError, did_you_mean
from .rules import DEFINITION_KEYS, METRIC_FIELDS, METRIC_RULES, RULES, Gain, cutoff_key, cutoff_label
from .rules import resolved as resolved_rules

SPEC_VERSION = 1
MAX_SPEC_BYTES = 1_000_000

# each metric rule's choices, declared in :mod:`ndcg_mlflow.rules`
GAINS = RULES["metric.gain"].choices
DISCOUNTS = RULES["metric.discount"].choices
TIES = RULES["metric.ties"].choices
IDEALS = RULES["metric.ideal"].choices
EMPTY_IDEAL = RULES["metric.empty_ideal"].choices
UNJUDGED = RULES["metric.unjudged"].choices
MISSING = RULES["metric.missing_queries"].choices
FORMATS = ("auto", "trec", "csv", "tsv", "jsonl", "parquet", "delta")
CI_METHODS = ("bca", "percentile", "studentized")
TESTS = ("randomization", "t_test", "both")
CORRECTIONS = ("holm", "bonferroni", "benjamini_hochberg", "none")
MAX_RESAMPLES = 10_000_000
# Largest cutoff (a cutoff beyond every list counts the whole list, as "all" does for the DCG) and largest
# declared catalog size: bounded only so that metric names and parameters stay short.
MAX_CUTOFF = 10**30

# MLflow's rule for metric, param and tag keys (mlflow/utils/validation.py, outside Windows) and its key length
_MLFLOW_KEY = re.compile(r"[/\w.\- :]*")  # (fullmatch: "$" would also match before a final line feed)
MAX_MLFLOW_KEY = 250
MAX_TAG_VALUE = 8000  # MLflow's limit on a tag value
MAX_SYSTEM_NAME = 150  # the longest key built from a system name adds at most 100 characters to it
RESERVED_TAG_PREFIXES = ("mlflow.", "ndcg_mlflow.")


# --------------------------------------------------------------------------- types


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
    # it scores; ``path`` is None until :mod:`ndcg_mlflow.models` has written its scored rows (then their file)
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


@dataclass(frozen=True)
class Comparison:
    baseline: str
    test: str
    correction: str
    wins_losses: int
    tie_tolerance: float


@dataclass(frozen=True)
class Decision:
    """The declared rule that turns a comparison into a pass or a fail (see :mod:`ndcg_mlflow.decision`)."""

    key: str  # a compared metric key, such as ndcg_at_10
    rule: str  # superiority | non_inferiority
    margin: float  # >= 0
    max_p: float | None = None  # optional bound on the corrected p-value


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
    source: Path | None = None
    text: str = field(default="", repr=False)
    recorded: str | None = field(default=None, repr=False)  # recorded_text, when parse_spec made it

    @property
    def recorded_text(self) -> str:
        """The spec text as recorded (``spec.yaml``, uploaded as an artifact): the text as given when neither it
        nor any value of it holds credentials; otherwise the spec's values without credentials
        (:func:`ndcg_mlflow.uris.redact` on every string), as YAML under a comment saying so (see
        :func:`recorded_spec_text`)."""
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
            "data.qrels": self.qrels.declared,
        }
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


def _mapping_text(columns: tuple[tuple[str, str], ...]) -> str:
    return ",".join(f"{k}={v}" for k, v in columns)


# --------------------------------------------------------------------------- schema helpers


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }.get(type(value), type(value).__name__)


def _short_repr(value: Any) -> str:
    """A bounded repr: never walks more than a few levels and items of a (possibly huge) value."""
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxdict, r.maxtuple, r.maxset = 3, 6, 6, 6, 6
    r.maxstring = r.maxother = r.maxlong = 70
    try:
        text = r.repr(value)
    except ValueError:  # an integer too long to print (Python refuses more than 4300 digits)
        text = f"<an integer of {value.bit_length()} bits>" if isinstance(value, int) else "<unprintable>"
    return text if len(text) <= 80 else text[:77] + "..."


def _got(value: Any) -> str:
    return f"Got {_short_repr(value)} ({_type_name(value)}) instead."


class _Ctx:
    def __init__(self, source: str | None, base_dir: Path):
        self.source = source
        self.base_dir = base_dir

    def fail(self, path: str, message: str) -> SpecError:
        return SpecError(path, message, self.source)


def _mapping(
    ctx: _Ctx, value: Any, path: str, required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ctx.fail(path, f"expected a mapping with keys {', '.join(required + optional)}. {_got(value)}")
    allowed = required + optional
    for key in value:
        if not isinstance(key, str):
            raise ctx.fail(path, f"keys must be strings; found key {key!r}.")
        if key not in allowed:
            where = f"{path}.{key}" if path else key
            raise ctx.fail(where, f"unknown key{did_you_mean(key, allowed)}; allowed keys here: {', '.join(allowed)}.")
    for key in required:
        if key not in value:
            where = f"{path}.{key}" if path else key
            raise ctx.fail(where, "missing required key (no default is assumed: it changes the numbers).")
    return value


def _choice(ctx: _Ctx, value: Any, path: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        hint = did_you_mean(value, choices) if isinstance(value, str) else ""
        raise ctx.fail(path, f"must be one of {', '.join(choices)}{hint}. {_got(value)}")
    return value


def _text(ctx: _Ctx, value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ctx.fail(path, f"must be a non-empty string. {_got(value)}")
    return value


def _finite(ctx: _Ctx, value: Any, path: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ctx.fail(path, f"{what} must be a finite number. {_got(value)}")
    try:
        number = float(value)  # an integer beyond the largest float overflows here
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ctx.fail(path, f"{what} must be a finite number (at most 1.8e308 in size). {_got(value)}")
    return number


# --------------------------------------------------------------------------- sections


def _gain(ctx: _Ctx, value: Any, path: str) -> Gain:
    if isinstance(value, dict):
        if not value:
            raise ctx.fail(path, "a gain table must map at least one grade to a gain.")
        pairs = []
        for grade, gain in value.items():
            where = f"{path}[{_short_repr(grade)}]"
            g = _finite(ctx, grade, where, "a grade (table key)")
            v = _finite(ctx, gain, where, "a gain")
            pairs.append((g, v))
        pairs.sort()
        return Gain("table", tuple(pairs))
    if isinstance(value, str) and value in GAINS:
        return Gain(value)
    hint = did_you_mean(value, GAINS) if isinstance(value, str) else ""
    raise ctx.fail(
        path, f"must be exponential, linear, or a table such as {{0: 0, 1: 1, 2: 3, 3: 7}}{hint}. {_got(value)}"
    )


def _cutoffs(ctx: _Ctx, value: Any, path: str) -> tuple[int | None, ...]:
    if not isinstance(value, list) or not value:
        raise ctx.fail(path, f"must be a non-empty list of positive integers or 'all'. {_got(value)}")
    out: list[int | None] = []
    for i, item in enumerate(value):
        if item == "all" and isinstance(item, str):
            k = None
        elif isinstance(item, int) and not isinstance(item, bool) and 1 <= item <= MAX_CUTOFF:
            k = item
        else:
            raise ctx.fail(f"{path}[{i}]", f"must be a positive integer (at most 10^30) or 'all'. {_got(item)}")
        if k in out:
            raise ctx.fail(f"{path}[{i}]", f"cutoff {cutoff_label(k)} is listed twice.")
        out.append(k)
    return tuple(out)


def _metric(ctx: _Ctx, value: Any) -> Metric:
    from .presets import PRESETS

    preset_name = value.get("preset") if isinstance(value, dict) else None
    origin = {}
    if preset_name is not None:
        if not isinstance(preset_name, str) or preset_name not in PRESETS:
            hint = did_you_mean(preset_name, tuple(PRESETS)) if isinstance(preset_name, str) else ""
            raise ctx.fail("metric.preset", f"must be one of {', '.join(PRESETS)}{hint}. {_got(preset_name)}")
        preset = PRESETS[preset_name]
        merged = dict(preset.values)
        origin = {k: f"preset {preset_name}" for k in METRIC_FIELDS}
        for k, v in value.items():
            if k != "preset":
                merged[k] = v
                origin[k] = "spec"
        _mapping(ctx, {k: v for k, v in value.items()}, "metric", ("preset",), METRIC_FIELDS)
        m = merged
    else:
        m = _mapping(ctx, value, "metric", METRIC_FIELDS, ("preset",))
        origin = {k: "spec" for k in METRIC_FIELDS}
    return Metric(
        preset=preset_name,
        origin=tuple(origin.items()),
        gain=_gain(ctx, m["gain"], "metric.gain"),
        cutoffs=_cutoffs(ctx, m["cutoffs"], "metric.cutoffs"),
        **{
            r.name: _choice(ctx, m[r.name], r.key, r.choices)
            for r in METRIC_RULES  # the rules of named choices
            if r.name not in ("gain", "cutoffs")
        },
    )


def _columns(ctx: _Ctx, value: Any, path: str, names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """A column mapping ``{query_id: userID, ...}``: the tool's names to the source's names."""
    if not isinstance(value, dict) or not value:
        raise ctx.fail(path, f"must map some of {', '.join(names)} to the column names the source uses. {_got(value)}")
    out = []
    for key, name in value.items():
        if key not in names:
            hint = did_you_mean(key, names) if isinstance(key, str) else ""
            raise ctx.fail(
                f"{path}.{_key_text(key)}", f"unknown column{hint}; a column mapping here names {', '.join(names)}."
            )
        out.append((key, _text(ctx, name, f"{path}.{key}")))
    given = [n for _, n in out]
    for n in given:
        if given.count(n) > 1:
            raise ctx.fail(
                path, f"column {n!r} is mapped to {given.count(n)} names; each source column serves one purpose."
            )
    return tuple(out)


def _source(ctx: _Ctx, value: Any, path: str, columns: tuple[str, ...] = ()) -> Source:
    mapping: tuple[tuple[str, str], ...] = ()
    version = None
    if isinstance(value, dict):
        m = _mapping(ctx, value, path, ("path",), ("format", "columns", "version") if columns else ("format",))
        declared = _text(ctx, m["path"], f"{path}.path")
        fmt = _choice(ctx, m.get("format", "auto"), f"{path}.format", FORMATS if columns else FORMATS[:-1])
        if fmt == "delta":
            if "version" not in m:
                raise ctx.fail(
                    f"{path}.version",
                    "missing required key: the version of the Delta table to read "
                    "(no default is assumed: the latest version changes with every "
                    "write).",
                )
            version = _int(ctx, m["version"], f"{path}.version", 0)
        elif "version" in m:
            raise ctx.fail(
                f"{path}.version",
                f"a version is read from a Delta table (format: delta); this source's format is {fmt}.",
            )
        if "columns" in m:
            mapping = _columns(ctx, m["columns"], f"{path}.columns", columns)
            if fmt == "trec":
                raise ctx.fail(
                    f"{path}.columns",
                    "TREC files have no column names to map; a column mapping is "
                    "for csv, tsv, jsonl and parquet sources.",
                )
    elif isinstance(value, str) and value.strip():
        declared, fmt = value, "auto"
    else:
        raise ctx.fail(path, f"must be a file path, or a mapping {{path: ..., format: ...}}. {_got(value)}")
    try:
        p = Path(declared).expanduser()
    except RuntimeError:  # ~user that does not exist
        raise ctx.fail(path, f"cannot expand the home directory in {declared!r}.") from None
    if not p.is_absolute():
        p = ctx.base_dir / p
    return Source(path=p, declared=declared, format=fmt, columns=mapping, version=version)


def _queries(ctx: _Ctx, value: Any) -> Queries:
    q = _mapping(ctx, value, "queries", ("weights",), ("set",))
    w = q["weights"]
    weights = None if w == "uniform" else _source(ctx, w, "queries.weights")
    s = q.get("set")
    qset = None if s is None else _source(ctx, s, "queries.set")
    return Queries(weights=weights, set=qset)


def mlflow_key_problem(key: str) -> str | None:
    """Why MLflow refuses ``key`` as a metric, param or tag key, or None. MLflow's own rule
    (``mlflow.utils.validation``): letters, digits (of any script), ``_ - . / :`` and spaces; not a name that
    resolves to another one as a file path (``a//b``, ``a/``, ``./a``, ``/a``, ``../a``); at most 250
    characters."""
    import posixpath

    if not key:
        return "it is empty"
    if not _MLFLOW_KEY.fullmatch(key):
        bad = sorted({c for c in key if not _MLFLOW_KEY.fullmatch(c)})
        return (
            f"MLflow refuses {', '.join(repr(c) for c in bad)} in metric, param and tag keys (they may hold "
            f"letters, digits, '_', '-', '.', '/', ':' and spaces)"
        )
    norm = posixpath.normpath(key)
    if norm != key:
        return (
            f"MLflow reads keys as file paths and refuses one that resolves to another name ({key!r} "
            f"resolves to {norm!r})"
        )
    if norm == "." or norm.startswith(("..", "/")):
        return "MLflow reads keys as file paths and refuses one that is '.' or starts with '..' or '/'"
    if len(key) > MAX_MLFLOW_KEY:
        return f"MLflow keys hold at most {MAX_MLFLOW_KEY} characters; this one has {len(key)}"
    return None


def system_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot name a system, or None. A system name is part of MLflow param, metric and tag keys
    (``data.systems.<name>``, ``<name>.ndcg_at_10`` on the evaluation's run, ``ndcg_mlflow.data.system.<name>.sha256``),
    so it follows MLflow's rule for keys (:func:`mlflow_key_problem`) and nothing more."""
    if not isinstance(name, str) or not name:
        return f"a system name is a non-empty string. {_got(name)}"
    if len(name) > MAX_SYSTEM_NAME:
        return (
            f"a system name has at most {MAX_SYSTEM_NAME} characters (it is part of MLflow keys, which hold at "
            f"most {MAX_MLFLOW_KEY}); this one has {len(name)}."
        )
    longest = max(SYSTEM_FILE_SUFFIXES, key=len)
    size = len(system_file_stem(name).encode("utf-8", "surrogatepass")) + len(f".{longest}{PARTIAL_SUFFIX}")
    if size > MAX_FILE_NAME:
        return (
            f"a system name is the name of its files (such as 'systems/<name>.{longest}', written as "
            f"'<name>.{longest}{PARTIAL_SUFFIX}' first), and a file name holds at most {MAX_FILE_NAME} bytes of "
            f"UTF-8; this name makes one of {size} bytes (letters outside ASCII take 2 to 4 bytes each)."
        )
    for key in (f"data.systems.{name}", f"{name}.{cutoff_key(None)}.ci_high", f"ndcg_mlflow.data.system.{name}.sha256"):
        problem = mlflow_key_problem(key)
        if problem:
            return f"the system name becomes part of MLflow keys such as {key!r}, and {problem}."
    return None


MAX_FILE_NAME = 255  # bytes of one file name (NAME_MAX of Linux's file systems, and of most others)
SYSTEM_FILE_SUFFIXES = ("per_query.csv", "top.csv", "scored.parquet")  # systems/<stem>.<suffix>
PARTIAL_SUFFIX = ".partial"  # a file is written under its name and this, then renamed


def system_file_stem(name: str) -> str:
    """The file name stem of a system's files (``systems/<stem>.per_query.csv``, and the artifacts of its MLflow
    run): its name, with each ``/`` (allowed in a system name, as MLflow allows it in keys) written as ``~``
    (which a system name cannot hold, so two names never share a stem)."""
    return name.replace("/", "~")


def _system_name(ctx: _Ctx, name: Any) -> None:
    problem = system_name_problem(name)
    if problem:
        raise ctx.fail(f"data.systems.{_key_text(name)}", problem)


def tag_problem(key: Any, value: Any) -> str | None:
    """Why a custom tag (``mlflow.tags`` of the spec, ``--tag``) cannot be set, or None: a string key that MLflow
    accepts (:func:`mlflow_key_problem`) outside the reserved ``mlflow.`` and ``ndcg_mlflow.`` names, and a string
    value of at most 8000 characters."""
    if not isinstance(key, str):
        return f"a tag key is a string. {_got(key)}"
    problem = mlflow_key_problem(key)
    if problem:
        return f"not a usable MLflow tag key: {problem}."
    if key.startswith(RESERVED_TAG_PREFIXES):
        return (
            f"tag keys starting with {' or '.join(repr(p) for p in RESERVED_TAG_PREFIXES)} are reserved (MLflow's "
            f"own tags and this tool's); choose another key."
        )
    if not isinstance(value, str):
        return f'a tag value is a string (in YAML, quote it: "{value}"). {_got(value)}'
    if len(value) > MAX_TAG_VALUE:
        return f"MLflow tag values hold at most {MAX_TAG_VALUE} characters; this one has {len(value)}."
    return None


def _data(ctx: _Ctx, value: Any, tables: InMemory | None) -> tuple[Source, tuple[tuple[str, Source], ...]]:
    """The data section; tables given in memory take the place of ``data.qrels`` and ``data.systems``, and the
    section may then be left out (only when both are given)."""
    has_qrels = tables is not None and tables.qrels
    names = tables.systems if tables is not None else None
    if value is None:
        if not has_qrels or names is None:
            given = "the judgments" if has_qrels else "the systems' rows" if names is not None else None
            raise ctx.fail(
                "data",
                "missing required key (no default is assumed: it changes the numbers)"
                + (f"; only {given} were given as tables, so the files of the rest are needed." if given else "."),
            )
        d: dict[str, Any] = {}
    else:
        d = _mapping(
            ctx, value, "data", () if has_qrels or names is not None else ("qrels", "systems"), ("qrels", "systems")
        )
        for key, in_tables in (("qrels", has_qrels), ("systems", names is not None)):
            if key not in d and not in_tables:
                raise ctx.fail(f"data.{key}", "missing required key (no default is assumed: it changes the numbers).")
    if has_qrels:
        qrels = Source(None, IN_MEMORY, "table")
    else:
        qrels = _source(ctx, d["qrels"], "data.qrels", QRELS_COLUMNS)
    out = []
    if names is not None:
        if not names:
            raise ctx.fail("data.systems", "must map at least one system name to its rows; no table was given.")
        for name in names:
            _system_name(ctx, name)
            out.append((name, Source(None, IN_MEMORY, "table")))
        return qrels, tuple(out)
    systems = d["systems"]
    if not isinstance(systems, dict) or not systems:
        raise ctx.fail("data.systems", f"must map at least one system name to its run file. {_got(systems)}")
    for name, src in systems.items():
        _system_name(ctx, name)
        if isinstance(src, dict) and "model" in src:
            out.append((name, _model_system(ctx, src, f"data.systems.{name}")))
        else:
            out.append((name, _source(ctx, src, f"data.systems.{name}", RUN_COLUMNS)))
    return qrels, tuple(out)


def _model_system(ctx: _Ctx, value: dict, path: str) -> Source:
    """``{model: URI, candidates: SOURCE}``: a model that scores the candidates (the shape only; the URI is
    resolved, and the model loaded, by :mod:`ndcg_mlflow.models`)."""
    from .uris import model_uri_problem

    m = _mapping(ctx, value, path, ("model", "candidates"))
    uri = _text(ctx, m["model"], f"{path}.model")
    problem = model_uri_problem(uri)
    if problem:
        raise ctx.fail(f"{path}.model", problem)
    candidates = _source(ctx, m["candidates"], f"{path}.candidates", CANDIDATE_COLUMNS)
    if candidates.format == "trec":
        raise ctx.fail(
            f"{path}.candidates.format",
            "candidates are a table (csv, tsv, jsonl or parquet) holding "
            "query_id, doc_id and the model's input columns, not TREC text.",
        )
    return Source(path=None, declared=uri, format="model", model=uri, candidates=candidates)


@dataclass(frozen=True)
class InMemory:
    """Which data are given as tables rather than declared in the spec's data section."""

    qrels: bool = False
    systems: tuple[str, ...] | None = None


MAX_EXPERIMENT_NAME = 500  # MLflow's limit on an experiment name (mlflow.utils.validation)


def experiment_name_problem(experiment: str) -> str | None:
    """Why MLflow would refuse ``experiment`` as an experiment name, or None."""
    if len(experiment) > MAX_EXPERIMENT_NAME:
        return (
            f"an MLflow experiment name has at most {MAX_EXPERIMENT_NAME} characters; this one has {len(experiment)}."
        )
    return None


def _mlflow(ctx: _Ctx, value: Any, name: str) -> MlflowSection:
    if value is None:
        problem = experiment_name_problem(name)
        if problem:  # the experiment defaults to the spec's name
            raise ctx.fail(
                "mlflow.experiment", f"not given, so it is the spec's name, but {problem} Give mlflow.experiment."
            )
        return MlflowSection(experiment=name)
    m = _mapping(
        ctx,
        value,
        "mlflow",
        ("experiment",),
        ("tracking_uri", "run_name", "tags", "timeout", "max_retries", "total_timeout"),
    )
    uri = m.get("tracking_uri")
    tags = m.get("tags")
    if tags is not None and not isinstance(tags, dict):
        raise ctx.fail(
            "mlflow.tags", f"must be a mapping of tag keys to string values, such as {{team: search}}. {_got(tags)}"
        )
    for key, tag_value in (tags or {}).items():
        problem = tag_problem(key, tag_value)
        if problem:
            raise ctx.fail(f"mlflow.tags.{_key_text(key)}", problem)
    run_name = m.get("run_name")
    timeout = m.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600
    ):
        raise ctx.fail("mlflow.timeout", f"must be a number of seconds in (0, 3600]. {_got(timeout)}")
    total = m.get("total_timeout")
    if total is not None and (isinstance(total, bool) or not isinstance(total, (int, float)) or not 0 < total <= 86400):
        raise ctx.fail("mlflow.total_timeout", f"must be a number of seconds in (0, 86400]. {_got(total)}")
    retries = m.get("max_retries")
    experiment = _text(ctx, m["experiment"], "mlflow.experiment")
    problem = experiment_name_problem(experiment)
    if problem:
        raise ctx.fail("mlflow.experiment", problem)
    from .uris import redact, store_problem

    if uri is not None:
        problem = store_problem(_text(ctx, uri, "mlflow.tracking_uri"))
        if problem:
            raise ctx.fail("mlflow.tracking_uri", problem)
    return MlflowSection(
        experiment=experiment,
        tracking_uri=None if uri is None else _text(ctx, uri, "mlflow.tracking_uri"),
        run_name=None if run_name is None else _text(ctx, run_name, "mlflow.run_name"),
        tags=tuple((key, redact(tag_value)) for key, tag_value in (tags or {}).items()),  # what is recorded
        timeout=None if timeout is None else float(timeout),
        max_retries=None if retries is None else _int(ctx, retries, "mlflow.max_retries", 0, 20),
        total_timeout=None if total is None else float(total),
    )


def _int(ctx: _Ctx, value: Any, path: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bound = f"an integer in [{low}, {high}]" if high is not None else f"an integer >= {low}"
        raise ctx.fail(path, f"must be {bound}. {_got(value)}")
    return value


def _uncertainty(ctx: _Ctx, value: Any) -> Uncertainty | None:
    if value is None:
        return None
    u = _mapping(ctx, value, "uncertainty", ("resamples", "confidence", "method", "seed"))
    conf = u["confidence"]
    if isinstance(conf, bool) or not isinstance(conf, (int, float)) or not 0 < conf < 1:
        raise ctx.fail(
            "uncertainty.confidence", f"must be a number strictly between 0 and 1, such as 0.95. {_got(conf)}"
        )
    return Uncertainty(
        resamples=_int(ctx, u["resamples"], "uncertainty.resamples", 100, MAX_RESAMPLES),
        confidence=float(conf),
        method=_choice(ctx, u["method"], "uncertainty.method", CI_METHODS),
        seed=_int(ctx, u["seed"], "uncertainty.seed", 0, 2**63 - 1),
    )


def _comparison(ctx: _Ctx, value: Any, systems: tuple[str, ...], uncertainty: Uncertainty | None) -> Comparison | None:
    if value is None:
        return None
    c = _mapping(ctx, value, "comparison", ("baseline", "test", "correction", "wins_losses", "tie_tolerance"))
    baseline = c["baseline"]
    if not isinstance(baseline, str) or baseline not in systems:
        hint = did_you_mean(baseline, systems) if isinstance(baseline, str) else ""
        raise ctx.fail(
            "comparison.baseline",
            f"must name one of the systems of data.systems ({', '.join(systems)}){hint}. {_got(baseline)}",
        )
    if len(systems) < 2:
        raise ctx.fail("comparison", "comparing needs at least two systems in data.systems.")
    if uncertainty is None:
        raise ctx.fail(
            "comparison",
            "needs the uncertainty section too: its resamples and seed drive the "
            "paired intervals and the randomization test.",
        )
    tol = c["tie_tolerance"]
    if (
        isinstance(tol, bool)
        or not isinstance(tol, (int, float))
        or tol < 0
        or (isinstance(tol, float) and not math.isfinite(tol))
        or tol > 1e308
    ):  # an int never overflows here
        raise ctx.fail("comparison.tie_tolerance", f"must be a finite number >= 0, such as 1.0e-9. {_got(tol)}")
    return Comparison(
        baseline=baseline,
        test=_choice(ctx, c["test"], "comparison.test", TESTS),
        correction=_choice(ctx, c["correction"], "comparison.correction", CORRECTIONS),
        wins_losses=_int(ctx, c["wins_losses"], "comparison.wins_losses", 0, 10_000),
        tie_tolerance=float(tol),
    )


# --------------------------------------------------------------------------- entry points


TOP_REQUIRED = ("spec_version", "name", "metric", "queries")
TOP_OPTIONAL = ("data", "uncertainty", "comparison", "decision", "report", "companions", "mlflow")
DECISION_RULES = ("superiority", "non_inferiority")


def _decision(ctx: _Ctx, value: Any, comparison: Comparison | None, keys: tuple[str, ...]) -> Decision | None:
    if value is None:
        return None
    d = _mapping(ctx, value, "decision", ("key", "rule", "margin"), ("max_p",))
    if comparison is None:
        raise ctx.fail(
            "decision",
            "needs the comparison section: the decision is read off the paired interval of "
            "each candidate against comparison.baseline.",
        )
    key = d["key"]
    if not isinstance(key, str) or key not in keys:
        hint = did_you_mean(key, keys) if isinstance(key, str) else ""
        raise ctx.fail(
            "decision.key",
            f"must be one of the compared keys ({', '.join(keys)}: one per cutoff of "
            f"metric.cutoffs){hint}. {_got(key)}",
        )
    rule = _choice(ctx, d["rule"], "decision.rule", DECISION_RULES)
    margin = d["margin"]
    if (
        isinstance(margin, bool)
        or not isinstance(margin, (int, float))
        or not math.isfinite(margin)
        or not 0 <= margin < 1
    ):
        raise ctx.fail(
            "decision.margin", f"must be a number in [0, 1) (a difference of nDCG), such as 0.005. {_got(margin)}"
        )
    max_p = d.get("max_p")
    if max_p is not None and (
        isinstance(max_p, bool) or not isinstance(max_p, (int, float)) or not math.isfinite(max_p) or not 0 < max_p <= 1
    ):
        raise ctx.fail(
            "decision.max_p",
            f"must be a number in (0, 1], such as 0.05 (a bound on the corrected "
            f"p-value), or be left out. {_got(max_p)}",
        )
    return Decision(key, rule, float(margin), None if max_p is None else float(max_p))


def _companions(ctx: _Ctx, value: Any) -> Companions | None:
    if value is None:
        return None
    c = _mapping(ctx, value, "companions", (), ("duplicates", "catalog"))
    if not c:
        raise ctx.fail(
            "companions", "declare duplicates (a doc_id -> group file), catalog (a size or a file of doc ids), or both."
        )
    dup = _source(ctx, c["duplicates"], "companions.duplicates") if "duplicates" in c else None
    size = catalog = None
    if "catalog" in c:
        raw = c["catalog"]
        if isinstance(raw, int) and not isinstance(raw, bool):
            size = _int(ctx, raw, "companions.catalog", 1, MAX_CUTOFF)
        else:
            catalog = _source(ctx, raw, "companions.catalog")
    return Companions(dup, size, catalog)


def _report(ctx: _Ctx, value: Any) -> Report | None:
    if value is None:
        return None
    r = _mapping(ctx, value, "report", ("sensitivity",))
    if not isinstance(r["sensitivity"], bool):
        raise ctx.fail("report.sensitivity", f"must be true or false. {_got(r['sensitivity'])}")
    return Report(sensitivity=r["sensitivity"])


def parse_spec(
    raw: Any, *, base_dir: Path | str = ".", source: str | None = None, text: str = "", tables: InMemory | None = None
) -> Spec:
    """Validate a spec already parsed from YAML (or given as a dict) and resolve it.

    ``tables`` says which data are given as in-memory tables (they replace the data section's entries, which
    may then be left out)."""
    ctx = _Ctx(source, Path(base_dir))
    _check_strings(ctx, raw)
    top = _mapping(ctx, raw, "", TOP_REQUIRED, TOP_OPTIONAL)
    version = top["spec_version"]
    if version != SPEC_VERSION or isinstance(version, bool):
        raise ctx.fail(
            "spec_version", f"this version of ndcg-mlflow reads spec_version {SPEC_VERSION}. {_got(version)}"
        )
    name = _text(ctx, top["name"], "name")
    metric = _metric(ctx, top["metric"])
    queries = _queries(ctx, top["queries"])
    qrels, systems = _data(ctx, top.get("data"), tables)
    uncertainty = _uncertainty(ctx, top.get("uncertainty"))
    comparison = _comparison(ctx, top.get("comparison"), tuple(n for n, _ in systems), uncertainty)
    decision = _decision(ctx, top.get("decision"), comparison, metric.keys)
    report = _report(ctx, top.get("report"))
    companions = _companions(ctx, top.get("companions"))
    mlflow_section = _mlflow(ctx, top.get("mlflow"), name)
    if not text:
        text = _dump(raw)
    return Spec(
        SPEC_VERSION,
        name,
        metric,
        queries,
        qrels,
        systems,
        mlflow_section,
        uncertainty,
        comparison,
        report,
        companions,
        decision,
        source=Path(source) if source else None,
        text=text,
        recorded=recorded_spec_text(raw, text),
    )


RECORDED_HEADER = "# the spec with the credentials in its URIs removed (its comments left out)\n"


def recorded_spec_text(raw: Any, text: str) -> str:
    """What is recorded of a spec (``spec.yaml``): ``text`` itself when neither it nor any string of ``raw``
    (its parsed content; read from ``text`` when None) changes under :func:`ndcg_mlflow.uris.redact`. Otherwise
    the content with every string redacted, dumped as YAML after :data:`RECORDED_HEADER`: the values, not the
    text, are redacted, so a password holding quotes, YAML escapes or line breaks is removed whole and the
    file stays a valid spec."""
    from .uris import redact, redact_values

    if raw is None:
        raw = _safe_yaml(text, "the spec")
    kept = redact_values(raw)
    if kept is raw and redact(text) == text:
        return text
    return RECORDED_HEADER + _dump(kept)


_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")


def _key_text(key: Any) -> str:
    """A mapping key as it appears in a key path: characters that cannot be printed on one line as they are (line
    breaks such as LF, CR, U+0085 and U+2028, other controls, lone surrogates) shown as escapes."""
    if not isinstance(key, str):
        return repr(key)
    if key.isprintable():
        return key
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in key)


def _check_strings(ctx: _Ctx, raw: Any) -> None:
    """Refuse, with its key path, any string of the spec (key or value) that is not storable text.

    A lone surrogate (YAML ``"\\udc80"``) cannot be written as UTF-8 to any output, parameter or
    message, and a NUL character cannot be part of a path or an MLflow name. Each container is
    visited once, so aliases that repeat a subtree cost nothing more.
    """
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [("", raw)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            bad = _NOT_TEXT.search(value)
            if bad:
                what = (
                    "a NUL character (U+0000)"
                    if bad.group() == "\x00"
                    else f"a lone surrogate U+{ord(bad.group()):04X}, which is not Unicode text"
                )
                raise ctx.fail(
                    path,
                    f"the string contains {what} (at character {bad.start() + 1}). Write the "
                    f"text itself (UTF-8), not an escape of half a character.",
                )
            continue
        if not isinstance(value, (dict, list, tuple)) or id(value) in seen:
            continue
        seen.add(id(value))
        children: list[tuple[str, Any]] = []
        if isinstance(value, dict):
            for key, item in value.items():
                child = f"{path}.{_key_text(key)}" if path else _key_text(key)
                if isinstance(key, str) and _NOT_TEXT.search(key):
                    children.append((child, key))  # the key itself is reported at its own path
                children.append((child, item))
        else:
            children = [(f"{path}[{i}]", item) for i, item in enumerate(value)]
        stack.extend(reversed(children))


def parse_override(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of ``--set``: a dotted key path into the spec and a value read as YAML (``[5, 10]`` is a
    list, ``10`` a number, ``null`` empty)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise SpecError(
            "",
            f"--set {text!r}: expected KEY=VALUE with KEY a dotted key path of the spec, such as "
            f"metric.cutoffs=[5,10] or data.systems.candidate=runs/pr-123.run.",
        )
    return key, _safe_yaml(value, f"--set {key}")


def apply_overrides(raw: Any, overrides: list[tuple[str, Any]]) -> Any:
    """``raw`` (a spec parsed from YAML) with each ``(key path, value)`` of ``--set`` put in place. A path step
    matches the longest existing key it can (a system name may hold dots: ``data.systems.v1.2``), else one
    dot-separated part; missing mappings on the way are created."""
    import copy

    raw = copy.deepcopy(raw)
    for key, value in overrides:
        node, parts, done = raw, key.split("."), list[str]()
        while True:
            if not isinstance(node, dict):
                where = ".".join(done) or "the spec"
                raise SpecError(
                    ".".join(done), f"--set {key}: {where} is not a mapping, so it has no key '{'.'.join(parts)}'."
                )
            step, n = _override_step(node, parts)
            parts = parts[n:]
            if not parts:
                node[step] = value
                break
            if node.get(step) is None:
                node[step] = {}
            node = node[step]
            done.append(str(step))
    return raw


def _override_step(node: dict, parts: list[str]) -> tuple[Any, int]:
    for n in range(len(parts), 0, -1):
        joined = ".".join(parts[:n])
        if joined in node:
            return joined, n
        if re.fullmatch(r"-?\d+", joined) and int(joined) in node:  # a gain table's grades are numbers
            return int(joined), n
    return parts[0], 1


def _from_override(exc: SpecError, overrides: list[tuple[str, Any]], texts: dict[str, str]) -> SpecError:
    """``exc`` saying which ``--set`` gave the value at its key path (or above or below it)."""
    for key, _ in overrides:
        p = exc.path
        if p == key or p.startswith((key + ".", key + "[")) or (p and key.startswith(p + ".")):
            return SpecError(p, f"{exc.message} (the value at '{key}' came from --set {texts[key]})", exc.source)
    return exc


def load_spec(
    spec: str | Path | Mapping[str, Any] | Spec,
    *,
    base_dir: str | Path | None = None,
    tables: InMemory | None = None,
    overrides: list[str] | tuple[str, ...] = (),
) -> Spec:
    """Load and validate a spec from a YAML file path, a mapping, or pass a :class:`Spec` through.

    ``overrides`` are ``--set KEY=VALUE`` texts applied to the file's content before validation; the spec then
    recorded (``spec.yaml``, its sha256) is the spec with them applied, so it describes what ran."""
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, Mapping):
        return parse_spec(dict(spec), base_dir=Path(base_dir) if base_dir else Path.cwd(), tables=tables)
    path = Path(spec)
    problem = file_problem(path)
    if problem is not None:
        raise SpecError("", f"cannot read the spec {shown_path(path)}: {problem}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SpecError("", f"cannot read the spec {shown_path(path)}: {os_error_problem(exc)}") from None
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError("", f"spec file is {len(data)} bytes; a spec is at most {MAX_SPEC_BYTES} bytes.", str(path))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecError("", f"spec is not UTF-8 text (byte {exc.start}).", str(path)) from None
    raw = _safe_yaml(text, str(path))
    pairs = [parse_override(t) for t in overrides]
    if pairs:
        texts = {key: t.strip() for (key, _), t in zip(pairs, overrides)}
        raw = apply_overrides(raw, pairs)
        header = "".join(f"# --set {texts[key]}\n" for key, _ in pairs)
        text = f"# {path.name} with these values set on the command line:\n{header}" + _dump(raw)
        try:
            return parse_spec(
                raw,
                base_dir=Path(base_dir) if base_dir else path.resolve().parent,
                source=str(path),
                text=text,
                tables=tables,
            )
        except SpecError as exc:
            raise _from_override(exc, pairs, texts) from None
    return parse_spec(
        raw, base_dir=Path(base_dir) if base_dir else path.resolve().parent, source=str(path), text=text, tables=tables
    )


MAX_ALIASES = 50


def _loader() -> type:
    import yaml

    class Loader(yaml.SafeLoader):
        """Safe YAML (no Python objects) that also refuses alias bombs: at most MAX_ALIASES aliases."""

        aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_ALIASES:
                    mark = self.peek_event().start_mark
                    raise yaml.composer.ComposerError(
                        None, None, f"more than {MAX_ALIASES} aliases (*name): a spec does not need them", mark
                    )
            return super().compose_node(parent, index)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            """Refuse merge keys, and a key written twice in one mapping (YAML would silently keep the last)."""
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        "a merge key (<<) is not supported in a spec: write the keys out in full",
                        key_node.start_mark,
                    )
            self.flatten_mapping(node)  # only turns a '=' key into a plain string now
            seen: dict = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None,
                            None,
                            f"key {key!r} is written twice in one mapping (first at line {seen[key] + 1})",
                            key_node.start_mark,
                        )
                    seen[key] = key_node.start_mark.line
                except TypeError:  # an unhashable key: the base class reports it
                    pass
            return super().construct_mapping(node, deep=deep)

    return Loader


def _safe_yaml(text: str, source: str) -> Any:
    import yaml

    try:
        return yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError("", f"not valid YAML{where}: {problem}", source) from None
    except RecursionError:
        raise SpecError("", "not valid YAML: nested too deeply.", source) from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as exc:
        # PyYAML's constructors of explicit tags (!!float, !!int, !!bool, !!timestamp ...) raise these
        raise SpecError(
            "", f"not valid YAML: a value could not be read ({type(exc).__name__}: {_short_repr(str(exc))}).", source
        ) from None


def _dump(raw: Any) -> str:
    import yaml

    return yaml.safe_dump(raw, sort_keys=False, default_flow_style=False)


def outside_paths(spec: Spec) -> list[str]:
    """Declared data paths that lead outside the spec's folder (allowed, but recorded with the results)."""
    if spec.source is None:
        return []
    base = spec.source.resolve().parent
    sources = [spec.qrels, spec.queries.weights, spec.queries.set] + [s.candidates or s for _, s in spec.systems]
    if spec.companions is not None:
        sources += [spec.companions.duplicates, spec.companions.catalog]
    out = []
    for src in sources:
        if src is None or src.path is None:
            continue
        try:
            src.path.resolve().relative_to(base)
        except ValueError:
            out.append(f"{src.declared} -> {src.path.resolve()}")
    return out


def shown_path(path: str | Path, limit: int = 240) -> str:
    """A path for a message: in full, or its start and end around the number of characters left out."""
    text = str(path)
    if len(text) <= limit:
        return text
    head, tail = limit // 2, limit // 4
    return f"{text[:head]}...({len(text) - head - tail} characters left out)...{text[-tail:]}"


def os_error_problem(exc: OSError) -> str:
    """What an OSError met while opening or reading a data file means, in words."""
    import errno

    reasons = {
        errno.ENOENT: "file not found",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.EISDIR: "is a directory, not a file",
        errno.ELOOP: "a symbolic link loop (too many levels of symbolic links)",
        errno.ENAMETOOLONG: "file name too long",
        errno.ENOTDIR: "a part of the path is not a directory",
    }
    if exc.errno in reasons:
        return reasons[exc.errno]
    return f"cannot be read: {exc.strerror or type(exc).__name__}"


def file_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be read as a data file (in words), or None when it is a readable regular file.

    Told apart: not found, permission denied (on the file or on a folder of its path), a directory, a FIFO
    or another non-regular file, a symbolic link loop, a name too long. A FIFO is never opened.
    """
    import os
    import stat

    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "file not found (a symbolic link to a missing file)" if os.path.islink(path) else "file not found"
    except (OSError, ValueError) as exc:
        return os_error_problem(exc) if isinstance(exc, OSError) else f"not a usable path: {exc}"
    if stat.S_ISDIR(st.st_mode):
        return "is a directory, not a file"
    if not stat.S_ISREG(st.st_mode):
        kind = (
            "a FIFO (named pipe)"
            if stat.S_ISFIFO(st.st_mode)
            else "a socket"
            if stat.S_ISSOCK(st.st_mode)
            else "a device"
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
            else "a special file"
        )
        return f"not a regular file ({kind})"
    try:
        with open(path, "rb") as fh:
            fh.read(1)
    except OSError as exc:
        return os_error_problem(exc)
    return None


GLOB_CHARACTERS = "*?["


def dataset_files(path: str | Path) -> list[Path] | None:
    """The files of a Parquet dataset in sorted order: the ``.parquet`` files of a folder, or the files a glob
    pattern (``runs/v3/*.parquet``) matches; None when ``path`` names one file (or nothing)."""
    import glob
    import os

    path = Path(path)
    try:
        if path.is_dir():
            return sorted(p for p in path.iterdir() if p.suffix.lower() == ".parquet" and p.is_file())
    except OSError:
        return None
    text = str(path)
    if any(c in path.name for c in GLOB_CHARACTERS) and not os.path.lexists(path):
        return sorted(Path(p) for p in glob.glob(text) if os.path.isfile(p))
    return None


def source_problem(path: str | Path, delta: bool = False) -> str | None:
    """:func:`file_problem` for a data source, which may also be a folder or glob of Parquet files, or (``delta``)
    a Delta table's folder."""

    def folder(p: Path) -> bool:
        try:
            return p.is_dir()
        except OSError:  # a name too long, a loop: file_problem says which
            return False

    log = Path(path) / "_delta_log"
    if delta:
        problem = None if folder(Path(path)) else file_problem(path) or "is a file, not a Delta table's folder"
        return problem or (None if folder(log) else "is not a Delta table (it has no _delta_log folder)")
    if folder(log):
        return (
            "is a Delta table: its folder holds the Parquet files of every version; declare it as {path: ..., "
            "format: delta, version: N} to read one version"
        )
    files = dataset_files(path)
    if files is None:
        return file_problem(path)
    if not files:
        if Path(path).is_dir():
            return "is a directory, not a file, and holds no .parquet files (a folder is read as a Parquet dataset)"
        return "file not found (the pattern matches no file)"
    for f in files:
        if f.suffix.lower() != ".parquet":
            return f"the pattern matches {f.name}, which is not a .parquet file (a glob is read as a Parquet dataset)"
        problem = file_problem(f)
        if problem is not None:
            return f"{problem}: {shown_path(f)}"
    return None


def check_files(spec: Spec) -> list[str]:
    """Problems with the files a spec names (missing, unreadable, not a regular file); empty when all are fine."""
    problems = []
    named: list[tuple[str, Source | None]] = [
        ("data.qrels", spec.qrels),
        ("queries.weights", spec.queries.weights),
        ("queries.set", spec.queries.set),
    ]
    named += [
        (f"data.systems.{n}.candidates", s.candidates)
        if s.model is not None and s.candidates is not None
        else (f"data.systems.{n}", s)
        for n, s in spec.systems
    ]
    if spec.companions is not None:
        named += [
            ("companions.duplicates", spec.companions.duplicates),
            ("companions.catalog", spec.companions.catalog),
        ]
    for key, src in named:
        check = source_problem if key.startswith("data.") else file_problem  # folders and globs: data only
        if src is None or src.path is None:
            continue
        problem = source_problem(src.path, True) if src.format == "delta" else check(src.path)
        if problem is not None:
            problems.append(f"at key '{key}': {problem}: {shown_path(src.path)}")
    return problems
