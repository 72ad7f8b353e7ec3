"""Validation: a spec parsed from YAML (or given as a mapping) checked against the schema and resolved into
:class:`~.types.Spec`. Unknown keys are errors (with a "did you mean"), every ``metric`` field and
``queries.weights`` is required, and each error names the key path and what was expected.

The primitive checks (a mapping's keys, a choice, a number) are :mod:`.checks`; the statistics sections
(``uncertainty``, ``comparison``, ``decision``) :mod:`.statistics`; this module the rest and :func:`parse_spec`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import did_you_mean
from ..rules import (
    JUDGE_ESTIMATOR,
    LABELLED_QUERIES,
    METRIC_FIELDS,
    METRIC_RULES,
    RULES,
    Gain,
    cutoff_label,
    stratifies_labels,
)
from . import statistics
from .checks import Ctx as _Ctx
from .checks import choice as _choice
from .checks import finite as _finite
from .checks import integer as _int
from .checks import key_text as _key_text
from .checks import mapping as _mapping
from .checks import text as _text
from .mlflow_names import experiment_name_problem, system_name_problem, tag_problem
from .types import (
    CANDIDATE_COLUMNS,
    FORMATS,
    IN_MEMORY,
    MAX_CUTOFF,
    QRELS_COLUMNS,
    RUN_COLUMNS,
    SEGMENT_COLUMNS,
    SEGMENT_FORMATS,
    SPEC_VERSION,
    Companions,
    InMemory,
    Judge,
    Metric,
    MlflowSection,
    Queries,
    Report,
    Source,
    Spec,
)
from .yamltext import dump, got, plain_values, recorded_spec_text, short_repr

# --------------------------------------------------------------------------- sections


def _gain(ctx: _Ctx, value: Any, path: str) -> Gain:
    if isinstance(value, dict):
        if not value:
            raise ctx.fail(path, "a gain table must map at least one grade to a gain.")
        pairs = []
        for grade, gain in value.items():
            where = f"{path}[{short_repr(grade)}]"
            g = _finite(ctx, grade, where, "a grade (table key)")
            v = _finite(ctx, gain, where, "a gain")
            pairs.append((g, v))
        pairs.sort()
        return Gain("table", tuple(pairs))
    if isinstance(value, str) and value in RULES["metric.gain"].choices:
        return Gain(value)
    hint = did_you_mean(value, RULES["metric.gain"].choices) if isinstance(value, str) else ""
    raise ctx.fail(
        path, f"must be exponential, linear, or a table such as {{0: 0, 1: 1, 2: 3, 3: 7}}{hint}. {got(value)}"
    )


def _cutoffs(ctx: _Ctx, value: Any, path: str) -> tuple[int | None, ...]:
    if not isinstance(value, list) or not value:
        raise ctx.fail(path, f"must be a non-empty list of positive integers or 'all'. {got(value)}")
    out: list[int | None] = []
    for i, item in enumerate(value):
        if item == "all" and isinstance(item, str):
            k = None
        elif isinstance(item, int) and not isinstance(item, bool) and 1 <= item <= MAX_CUTOFF:
            k = item
        else:
            raise ctx.fail(f"{path}[{i}]", f"must be a positive integer (at most 10^30) or 'all'. {got(item)}")
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
            raise ctx.fail("metric.preset", f"must be one of {', '.join(PRESETS)}{hint}. {got(preset_name)}")
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
        raise ctx.fail(path, f"must map some of {', '.join(names)} to the column names the source uses. {got(value)}")
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


def _source(
    ctx: _Ctx, value: Any, path: str, columns: tuple[str, ...] = (), formats: tuple[str, ...] | None = None
) -> Source:
    """A source: a path, or a mapping ``{path, format, columns, version}``. ``columns``: the names a column mapping
    may map (none: no mapping, no Delta table); ``formats``: the formats it may be read in (default: every format,
    Delta with a column mapping only)."""
    mapping: tuple[tuple[str, str], ...] = ()
    version = None
    if formats is None:
        formats = FORMATS if columns else FORMATS[:-1]
    if isinstance(value, dict):
        keys = ("format", "columns", "version") if "delta" in formats else ("format", "columns")
        m = _mapping(ctx, value, path, ("path",), keys if columns else ("format",))
        declared = _text(ctx, m["path"], f"{path}.path")
        fmt = _choice(ctx, m.get("format", "auto"), f"{path}.format", formats)
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
        raise ctx.fail(path, f"must be a file path, or a mapping {{path: ..., format: ...}}. {got(value)}")
    try:
        p = Path(declared).expanduser()
    except RuntimeError:  # ~user that does not exist
        raise ctx.fail(path, f"cannot expand the home directory in {declared!r}.") from None
    if not p.is_absolute():
        p = ctx.base_dir / p
    return Source(path=p, declared=declared, format=fmt, columns=mapping, version=version)


def _queries(ctx: _Ctx, value: Any) -> Queries:
    q = _mapping(ctx, value, "queries", ("weights",), ("set", "segments"))
    w = q["weights"]
    weights = None if w == "uniform" else _source(ctx, w, "queries.weights")
    s = q.get("set")
    qset = None if s is None else _source(ctx, s, "queries.set")
    g = q.get("segments")
    segments = None if g is None else _source(ctx, g, "queries.segments", SEGMENT_COLUMNS, SEGMENT_FORMATS)
    return Queries(weights=weights, set=qset, segments=segments)


def _system_name(ctx: _Ctx, name: Any) -> None:
    problem = system_name_problem(name)
    if problem:
        raise ctx.fail(f"data.systems.{_key_text(name)}", problem)


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
            ctx,
            value,
            "data",
            () if has_qrels or names is not None else ("qrels", "systems"),
            ("qrels", "systems", "judge_qrels"),
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
        raise ctx.fail("data.systems", f"must map at least one system name to its run file. {got(systems)}")
    for name, src in systems.items():
        _system_name(ctx, name)
        if isinstance(src, dict) and "model" in src:
            out.append((name, _model_system(ctx, src, f"data.systems.{name}")))
        else:
            out.append((name, _source(ctx, src, f"data.systems.{name}", RUN_COLUMNS)))
    return qrels, tuple(out)


def _model_system(ctx: _Ctx, value: dict, path: str) -> Source:
    """``{model: URI, candidates: SOURCE}``: a model that scores the candidates (the shape only; the URI is
    resolved, and the model loaded, by :mod:`ndcg_mlflow.models.systems`)."""
    from ..uris import model_uri_problem

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
            "mlflow.tags", f"must be a mapping of tag keys to string values, such as {{team: search}}. {got(tags)}"
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
        raise ctx.fail("mlflow.timeout", f"must be a number of seconds in (0, 3600]. {got(timeout)}")
    total = m.get("total_timeout")
    if total is not None and (isinstance(total, bool) or not isinstance(total, (int, float)) or not 0 < total <= 86400):
        raise ctx.fail("mlflow.total_timeout", f"must be a number of seconds in (0, 86400]. {got(total)}")
    retries = m.get("max_retries")
    experiment = _text(ctx, m["experiment"], "mlflow.experiment")
    problem = experiment_name_problem(experiment)
    if problem:
        raise ctx.fail("mlflow.experiment", problem)
    from ..uris import redact, store_problem

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
        raise ctx.fail("report.sensitivity", f"must be true or false. {got(r['sensitivity'])}")
    return Report(sensitivity=r["sensitivity"])


def _judge(ctx: _Ctx, value: Any, data: Any, uncertain: Any, segments: bool) -> Judge | None:
    """The ``judge`` section with ``data.judge_qrels``: each needs the other, and the intervals need the
    ``uncertainty`` section's confidence."""
    judged = data.get("judge_qrels") if isinstance(data, dict) else None
    if value is None:
        if judged is not None:
            raise ctx.fail(
                "data.judge_qrels",
                "is a model's judgments, which are read only with the judge section (judge.estimator says how they "
                "are combined with the human judgments of data.qrels); declare judge, or remove data.judge_qrels.",
            )
        return None
    j = _mapping(ctx, value, "judge", ("estimator", "labelled_queries"), ("name",))
    if judged is None:
        raise ctx.fail(
            "data.judge_qrels",
            "missing required key: the judge section combines the human judgments of data.qrels with a model's "
            "judgments of every evaluated query, given by data.judge_qrels.",
        )
    estimator = _choice(ctx, j["estimator"], JUDGE_ESTIMATOR.key, JUDGE_ESTIMATOR.choices)
    labelled = _choice(ctx, j["labelled_queries"], LABELLED_QUERIES.key, LABELLED_QUERIES.choices)
    if stratifies_labels(labelled) and not segments:
        raise ctx.fail(
            LABELLED_QUERIES.key,
            f"is 'segments', but {statistics.NO_SEGMENTS}: the human-labelled queries drawn within each segment "
            "are combined segment by segment, so it needs the file that puts each query in its segment (declare "
            "queries.segments, or set labelled_queries: random).",
        )
    if uncertain is None:
        raise ctx.fail(
            "judge",
            "needs the uncertainty section too: its confidence is the confidence of the intervals that combine "
            "the two judgments.",
        )
    name = j.get("name")
    return Judge(
        judgments=_source(ctx, judged, "data.judge_qrels", QRELS_COLUMNS),
        estimator=estimator,
        labelled_queries=labelled,
        name=None if name is None else _text(ctx, name, "judge.name"),
    )


# --------------------------------------------------------------------------- entry points


TOP_REQUIRED = ("spec_version", "name", "metric", "queries")
TOP_OPTIONAL = ("data", "uncertainty", "comparison", "decision", "judge", "report", "companions", "mlflow")


def parse_spec(
    raw: Any, *, base_dir: Path | str = ".", source: str | None = None, text: str = "", tables: InMemory | None = None
) -> Spec:
    """Validate a spec already parsed from YAML (or given as a dict) and resolve it.

    ``tables`` says which data are given as in-memory tables (they replace the data section's entries, which
    may then be left out)."""
    ctx = _Ctx(source, Path(base_dir))
    raw = plain_values(raw)
    _check_strings(ctx, raw)
    top = _mapping(ctx, raw, "", TOP_REQUIRED, TOP_OPTIONAL)
    version = top["spec_version"]
    if version != SPEC_VERSION or isinstance(version, bool):
        raise ctx.fail("spec_version", f"this version of ndcg-mlflow reads spec_version {SPEC_VERSION}. {got(version)}")
    name = _text(ctx, top["name"], "name")
    metric = _metric(ctx, top["metric"])
    queries = _queries(ctx, top["queries"])
    qrels, systems = _data(ctx, top.get("data"), tables)
    segments = queries.segments is not None
    uncertainty = statistics.uncertainty(ctx, top.get("uncertainty"), segments)
    comparison = statistics.comparison(ctx, top.get("comparison"), tuple(n for n, _ in systems), uncertainty)
    decision = statistics.decision(ctx, top.get("decision"), comparison, metric.keys, segments)
    judge = _judge(ctx, top.get("judge"), top.get("data"), uncertainty, segments)
    report = _report(ctx, top.get("report"))
    companions = _companions(ctx, top.get("companions"))
    mlflow_section = _mlflow(ctx, top.get("mlflow"), name)
    if not text:
        text = dump(raw)
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
        judge,
        source=Path(source) if source else None,
        text=text,
        recorded=recorded_spec_text(raw, text),
    )


_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")


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
