"""What the ``ndcg-mlflow`` command prints, and how it reaches the terminal.

The summary of an evaluation (:func:`format_summary`, with :func:`format_grouped_summary` when its per-query rows
stayed in Spark), where its results are (:func:`format_locations`), where it was logged (:func:`logged_lines`,
:func:`mlflow_ui_hint`) and what ``validate`` finds (:func:`validation_lines`), with the terminal's number rules
of :mod:`ndcg_mlflow.render.format`; progress lines and messages on stderr (:func:`progress_reporter`,
:func:`configure_logging`); stdout and stderr without credentials or raw control characters
(:func:`redacting_streams`). Every name, label and id is shown through :func:`~.format.term_text`.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from ..escapes import term_stream
from ..rules import headline_key, metric_name, randomizes, t_tests
from ..uris import redact, safe_uri
from .format import (
    TERMINAL,
    intervals_line,
    listing,
    models_sentence,
    number,
    p_value,
    queries_line,
    term_system,
    term_text,
    text_table,
    wins_ties_losses,
)
from .words import family_statement

log = logging.getLogger("ndcg_mlflow")


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of each record."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def progress_reporter(quiet: bool):
    """Progress lines on stderr when it is a terminal (with the time since the start); logged at DEBUG
    otherwise, so that CI logs and pipes stay clean. ``--quiet`` silences them."""
    import time

    start = time.monotonic()
    interactive = not quiet and sys.stderr.isatty()

    def report(message: str) -> None:
        elapsed = time.monotonic() - start
        log.log(logging.INFO if interactive else logging.DEBUG, f"[{elapsed:5.1f}s] {message}")

    return report


def configure_logging(quiet: bool) -> None:
    """The package's messages on stderr, prefixed ``ndcg-mlflow:``; warnings and errors only with ``--quiet``."""
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("ndcg-mlflow: %(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.WARNING if quiet else logging.INFO)
    log.propagate = False


class _Redacting:
    """A text stream that writes through :func:`ndcg_mlflow.uris.redact` and :func:`~.escapes.term_stream`."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(term_stream(redact(text)))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def redacting_streams():
    """Route stdout and stderr through :func:`ndcg_mlflow.uris.redact` and :func:`~.escapes.term_stream` (no
    escape sequence reaches the terminal, whoever prints); the streams before, to restore."""
    saved = (sys.stdout, sys.stderr)
    sys.stdout, sys.stderr = _Redacting(sys.stdout), _Redacting(sys.stderr)
    return saved


def restore_streams(saved) -> None:
    sys.stdout, sys.stderr = saved


def format_summary(result) -> str:
    """Plain-text summary, the answer first (:func:`_lead`: the decision, or each candidate against the
    baseline at the headline cutoff), then systems x cutoffs (with intervals), every comparison and the top wins
    and losses (the means, intervals and comparisons only, when the per-query rows stayed in Spark). A model
    system is named with its model, ``challenger (ranker v2)``."""
    summary = result.summary
    if result.per_query_path is not None:
        return format_grouped_summary(summary)
    spec = result.spec
    keys = spec.metric.keys
    models = summary.get("models")
    with_ci = spec.uncertainty is not None
    heads = ["system"] + [metric_name(k) for k in keys] + ["evaluated", "excluded", "missing"]
    rows = []
    for name in result.systems:
        cells = [_label(name, models)]
        for k in keys:
            m = summary["systems"][name][k]
            cell = _fmt(m["mean"])
            if with_ci:
                cell += f" [{_fmt(m.get('ci_low'))}, {_fmt(m.get('ci_high'))}]"
            cells.append(cell)
        first = summary["systems"][name][keys[0]]
        cells += [str(first["n_evaluated"]), str(first["n_excluded"]), str(first["n_missing"])]
        rows.append(cells)
    lines = _opening(summary, term_text(queries_line(summary)))
    lines.append(f"weights {spec.resolved()['queries.weights']}" + (f"; {intervals_line(summary)}" if with_ci else ""))
    lines += text_table(heads, rows)
    if models:
        lines.append(term_text(models_sentence(models)))
    if result.analysis is not None and result.analysis.comparisons:
        lines.append("")
        lines.append(f"all comparisons ({family_statement(result.analysis.correction_family)}):")
        # the p-value of a test the spec does not declare is left out, not shown as undefined
        tests = (
            [("p", "p_judged")]
            if spec.judge is not None
            else [
                (head, field)
                for head, field, computed in (("p_rand", "p_randomization", randomizes), ("p_t", "p_t_test", t_tests))
                if computed(spec.comparison.test)
            ]
        )
        heads = ["candidate", "cutoff", "delta", "interval"] + [h for h, _ in tests] + ["p_corr", "d_z", "W/T/L"]
        rows = []
        for c in result.analysis.comparisons:
            rows.append(
                [
                    _label(c["candidate"], models),
                    c["cutoff"],
                    _fmt(c.get("delta"), signed=True),
                    f"[{_fmt(c.get('ci_low'), True)}, {_fmt(c.get('ci_high'), True)}]",
                ]
                + [_p(c.get(field)) for _, field in tests]
                + [_p(c.get("p_corrected")), _fmt(c.get("effect_size_dz"), True), wins_ties_losses(c, "/")]
            )
        lines += text_table(heads, rows)
        lines.append(
            "delta: candidate minus baseline mean; d_z: the mean per-query difference over its standard "
            "deviation (an effect size that does not grow with the number of queries); W/T/L: queries the "
            "candidate wins, ties, loses"
        )
        lines += _segment_lines(result, models)
        for block in result.analysis.wins_losses:
            if block["key"] != headline_key(keys):
                continue
            lines.append("")
            lines.append(
                f"{_label(block['candidate'], models)} vs {_label(block['baseline'], models)} at "
                f"{metric_name(block['key'])}: largest wins / losses"
            )
            for kind in ("wins", "losses"):
                items = block[kind][:3]
                text = listing([f"{term_text(e['query_id'])} ({_fmt(e['delta'], True, 3)})" for e in items])
                lines.append(f"  {kind:<6} {text}")
    for note in result.all_notes:
        lines.append(f"note: {term_text(note)}")
    return "\n".join(lines)


def _segment_lines(result, models) -> list[str]:
    """Each candidate's difference per segment at the headline cutoff (none without segments)."""
    head = headline_key(result.spec.metric.keys)
    comps = [c for c in result.analysis.segment_comparisons if c["key"] == head]
    if not comps:
        return []
    rows = [
        [
            term_text(c["segment"]),
            _label(c["candidate"], models),
            str(c["n_paired"]),
            _fmt(c.get("delta"), signed=True),
            f"[{_fmt(c.get('ci_low'), True)}, {_fmt(c.get('ci_high'), True)}]",
            _p(c.get("p_corrected")),
            wins_ties_losses(c, "/"),
        ]
        for c in comps
    ]
    return ["", f"by segment at {metric_name(head)}:"] + text_table(
        ["segment", "candidate", "paired", "delta", "interval", "p_corr", "W/T/L"], rows, left=2
    )


def format_grouped_summary(summary: dict) -> str:
    """The terminal summary of a run whose per-query rows stayed in Spark, the answer first as in
    :func:`format_summary`: then means, intervals, comparisons."""
    models = summary.get("models")
    lines = _opening(
        summary,
        f"{summary['n_queries']} evaluated queries (per-query rows in Spark; statistics from "
        f"{summary['engine_info']['statistics']['groups']} random groups of queries)",
    )
    for name, means in summary["systems"].items():
        cells = [
            f"{key}={_fmt(m.get('mean'))}"
            + (f" [{_fmt(m.get('ci_low'))}, {_fmt(m.get('ci_high'))}]" if "ci_low" in m else "")
            for key, m in means.items()
        ]
        lines.append(f"  {_label(name, models)}: " + "  ".join(cells))
    if models:
        lines.append(term_text(models_sentence(models)))
    for c in summary["comparisons"]:
        lines.append(
            f"  {_label(c['candidate'], models)} - {_label(c['baseline'], models)} at {c['cutoff']}: "
            f"{_fmt(c['delta'], signed=True)} [{_fmt(c['ci_low'], signed=True)}, {_fmt(c['ci_high'], signed=True)}], "
            f"p corrected {_p(c.get('p_corrected'))}"
        )
    return "\n".join(lines)


def _lead(summary: dict) -> list[str]:
    """The answer, the first lines of the summary (none when there is nothing to decide or compare): the spec's
    decision (its outcome and rule, then each candidate's outcome, difference, interval and reason), else each
    candidate against the baseline at the headline cutoff (difference, interval, corrected p-value, wins, ties
    and losses), as ``report.html`` and ``report.md`` open."""
    models = summary.get("models")
    d = summary.get("decision")
    if d:
        against = f" against baseline {_label(d['candidates'][0]['baseline'], models)}" if d["candidates"] else ""
        lines = [
            f"{term_text(summary['name'])} — decision: {d['outcome'].upper()}{against}",
            f"  rule: {term_text(d['statement'])}",
        ]
        for r in d["candidates"]:
            lines.append(
                f"  {_label(r['candidate'], models)}: {r['outcome'].upper()} — difference "
                f"{_fmt(r.get('delta'), True)}, interval [{_fmt(r.get('ci_low'), True)}, "
                f"{_fmt(r.get('ci_high'), True)}]"
                + (f", p corrected {_p(r.get('p_corrected'))}" if d.get("max_p") is not None else "")
                + f" ({term_text(r['reason'])})"
            )
        return lines
    head = headline_key(list(next(iter(summary["systems"].values()), {})))
    comps = [c for c in summary.get("comparisons") or [] if c["key"] == head]
    if not comps:
        return []
    rows = [
        [
            _label(c["candidate"], models),
            _fmt(c.get("delta"), True),
            f"[{_fmt(c.get('ci_low'), True)}, {_fmt(c.get('ci_high'), True)}]",
            _p(c.get("p_corrected")),
            wins_ties_losses(c, "/"),
        ]
        for c in comps
    ]
    return [
        f"{term_text(summary['name'])} — each candidate against baseline {_label(comps[0]['baseline'], models)} at "
        f"{metric_name(head)}",
        *text_table(["candidate", "delta", "interval", "p_corr", "W/T/L"], rows),
    ]


def _opening(summary: dict, counts: str) -> list[str]:
    """The answer (:func:`_lead`) and then the query counts; the counts open the summary when there is no
    answer to lead with."""
    lead = _lead(summary)
    if summary.get("judge") is not None:  # which labels the verdict rests on, and how far the judge alone is
        from .judge_report import summary_lead

        lead += [""] + [term_text(line) for line in summary_lead(summary)]
    return [*lead, "", counts] if lead else [f"{term_text(summary['name'])}: {counts}"]


def logged_lines(logged, experiment: str | None) -> list[str]:
    """Where an evaluation was logged (``logged``: :class:`ndcg_mlflow.tracking.LoggedRuns`): the tracking URI,
    the experiment, the evaluation's and the systems' runs, and how to open them in the MLflow UI. Lines, to
    print with ``sep="\\n"``: each goes through the redacting stream apart, as it was printed."""
    return [
        f"MLflow tracking URI: {safe_uri(str(logged.tracking_uri))}",
        f"  experiment {experiment!r} (id {logged.experiment_id})"
        if experiment is not None
        else f"  experiment id {logged.experiment_id} (that of the run logged into)",
        f"  evaluation run: {logged.parent_run_id}" + (" (already logged: nothing uploaded)" if logged.reused else ""),
        *(f"  system run {name}: {rid}" for name, rid in logged.system_run_ids.items()),
        mlflow_ui_hint(logged.tracking_uri, logged.experiment_id, logged.parent_run_id),
    ]


def validation_lines(path: str, spec, read: list[str] | None) -> list[str]:
    """What ``validate`` prints of a valid spec: the rows read from each data file (``read``; None with
    ``--spec-only``), then every resolved field, a metric rule's with where its value came from. Lines, as
    :func:`logged_lines`."""
    lines = [
        f"{term_text(path)}: valid spec '{term_text(spec.name)}'"
        + ("" if read is None else ", its data read as 'run' reads it")
    ]
    lines += [f"  {term_text(line)}" for line in read or []]  # (each names a data file)
    for key, value in spec.resolved().items():
        origin = ""
        if key.startswith("metric.") and key != "metric.preset":
            origin = f"  [from {spec.metric.source_of(key.split('.', 1)[1])}]"
        lines.append(f"  {key}: {term_text(value)}{origin}")
    return lines


def format_locations(out_dir: Path) -> str:
    """Where the local results and the report are (absolute paths, to open or paste), each on its line as terminal
    text (:func:`~.format.term_text`: a folder named with a line break or an escape sequence shows it)."""
    folder = Path(out_dir).resolve()
    return f"local results: {term_text(folder)}\nreport: {term_text(folder / 'report.html')}"


def mlflow_ui_hint(uri: str | None, experiment_id: str | None, run_id: str) -> str:
    """How to see a run in the MLflow UI: the command that serves a local store (SQLite or a folder) and the
    run's page in it, or the run's page on a tracking server. Credentials are never shown. The command is
    ``ndcg-mlflow ui``, which runs MLflow's UI from the tool's own environment: ``mlflow ui`` is not a command
    where the tool was installed with pipx."""
    import shlex

    page = f"#/experiments/{experiment_id}/runs/{run_id}" if experiment_id else ""
    text = str(uri or "").strip()
    scheme, sep, rest = text.partition("://")
    scheme = scheme.lower() if sep else ""
    if scheme in ("http", "https"):  # the run's page is the UI's fragment: after the path and the query
        base = (safe_uri(text) or text).partition("#")[0]
        path, q, query = base.partition("?")
        return f"MLflow UI: {path.rstrip('/')}/{q}{query}{page}" + ("" if page else f" (run {run_id})")
    store = None
    if scheme.startswith("sqlite"):
        database, q, query = rest[1:].partition("?") if rest.startswith("/") else ("", "", "")
        if database:
            store = f"{scheme}:///{Path(database).resolve()}{q}{query}"
    elif scheme == "file":  # percent-encoded, as MLflow reads it (a second encoding named another folder)
        from urllib.parse import urlparse
        from urllib.request import url2pathname

        store = Path(url2pathname(urlparse(text).path)).resolve().as_uri()
    elif not sep and text and not text.lower().startswith("databricks"):
        store = Path(text).resolve().as_uri()  # a folder of runs (MLflow's file store)
    if store is None:
        return (
            f"MLflow UI: run {run_id}"
            + (f" in experiment {experiment_id}" if experiment_id else "")
            + (f" of {safe_uri(text)}" if text else "")
        )
    return (
        f"MLflow UI: ndcg-mlflow ui --backend-store-uri {shlex.quote(safe_uri(store) or store)}\n"
        f"  then open http://127.0.0.1:5000/{page}" + ("" if page else f" (run {run_id})")
    )


def _p(x: float | None) -> str:
    return p_value(x, missing=TERMINAL)


def _fmt(x: float | None, signed: bool = False, digits: int = 4) -> str:
    return number(x, digits, signed=signed, missing=TERMINAL)


_label = term_system  # a system as the terminal names it
