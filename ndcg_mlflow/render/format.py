"""How the tool writes numbers, missing values and tables for people: the terminal, ``report.html``,
``report.md`` and ``wins_losses.md``.

Numbers: means, differences and intervals with 4 decimals (signed where they are differences), p-values with 4
decimals or, below 1e-4, one significant digit in e-notation (:func:`number`, :func:`p_value`, :func:`share`).
A number declared in a spec or compared with one (a margin, a threshold, an alpha, a level) is written so that two
different numbers never print alike: as given, the shortest text that reads back as it (:func:`exact`,
:func:`exact_share` for a ratio as a percentage), and a figure beside the threshold it is compared with in as many
digits as keep their order (:func:`distinct`, :func:`distinct_share`); never ``-0``.

Missing values, one rule per medium: a number that is absent (None) or undefined (NaN: no query left in a mean,
a test with too few queries) is written

- in the terminal as ``undefined`` (:data:`TERMINAL`),
- in the HTML and markdown files as an en dash ``–`` (:data:`FILE`),

and an empty list (no relevant document entered the top K) as ``none`` in both. The terminal's comparison
table leaves out the column of a test the spec does not declare; the report shows it as missing. The CSV and
JSON files are not formatted here: an undefined number is an empty CSV field and ``null`` in JSON.

Tables: :func:`text_table` (columns padded with spaces, for the terminal) and :func:`md_table` (a markdown pipe
table, whose cells the caller has already escaped with :func:`md_text`).

Escaping, in the markdown files (``report.md``, ``wins_losses.md``):

Every string that comes from the data or the spec — system names, query and document ids, the
spec name, notes, file names — goes through :func:`md_text` wherever it lands in markdown (heading,
paragraph, list item or table cell): each ASCII punctuation character markdown could read is
backslash-escaped, which CommonMark defines as that character taken literally, so no link, image, autolink (``:``, ``.``
and ``@`` are escaped), code span, emphasis, HTML tag, comment, entity, table pipe or math delimiter
can come from the data. Only characters that mean nothing inside a line are left as they are, so
ids stay readable in a terminal: ``, ; ? % / ' " =``, ``-`` and ``+`` unless they come first
(where they could open a list), and ``_`` between two letters or digits (``displayed_order``), where
CommonMark never reads it as emphasis. Line breaks and runs of white space become one space, so a string
never starts a line (a heading, list item or table row) of its own. The one raw HTML element these
files use (``<summary>``, whose content markdown does not process) takes :func:`md_html` instead:
HTML escaping.

Escaping elsewhere, one helper per medium: an HTML page (``report.html``, the notebook's tables) takes
:func:`html_text`; the terminal :func:`~.escapes.term_text` for a name, label or id (every control character and
backslash as Python writes it in a string literal: ``\\x1b``, ``\\n``, ``\\\\``), and every printed line
passes :func:`~.escapes.term_stream` (its control characters but line feeds and tabs escaped the same way). Control
characters become U+FFFD in markdown and HTML (the SVG figures: ``svg.xml_text``).

Model systems: wherever a system is named for people, a model system carries its model beside it, as resolved
when the evaluation started (``summary.json`` ``models``): ``challenger (ranker v2)``, ``champion (ranker v1
@champion)`` (:func:`system_label`), and :func:`models_sentence` says it in words once.

A leaf module (nothing of the package imported but the rules): ``terminal``, ``decision``, ``explain``,
``sensitivity``, ``analysis``, ``report`` and ``notebook`` use it.
"""

from __future__ import annotations

import html
import math
import numbers
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..escapes import CONTROL_CHARACTERS, term_text
from ..rules import excludes, shortest_text

TERMINAL = "undefined"  # a missing number in the terminal
FILE = "–"  # a missing number in report.html, report.md and wins_losses.md
EMPTY = "none"  # an empty list, everywhere

# every ASCII punctuation character (!"#$%&'()*+,-./ :;<=>?@ [\]^_` {|}~) but those inert inside a line
_PUNCTUATION = re.compile(r"([!#$&()*.:<>@\[-^`{-~])")
_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")  # a "_" not between two letters or digits
_LEADING = re.compile(r"^( ?)([-+])")  # a list marker where a string opens a list item
# line breaks of every kind, and runs of blanks (an indented run could open a code block in a list item)
_BREAKS = re.compile("[ \t\n\v\f\r\x1c-\x1f\x85\u2028\u2029]+")


# shown as U+FFFD in markdown and HTML (and the SVG figures: svg.xml_text), where a browser would show nothing,
# stop reading or reorder the text
_CONTROLS = re.compile(f"[{CONTROL_CHARACTERS}]")


def _one_line(value: Any) -> str:
    return _CONTROLS.sub("\ufffd", _BREAKS.sub(" ", str(value)))


def md_text(value: Any) -> str:
    """``value`` as literal markdown text: shown exactly (white space aside), never interpreted."""
    text = _UNDERSCORE.sub(r"\\_", _PUNCTUATION.sub(r"\\\1", _one_line(value)))
    return _LEADING.sub(r"\1\\\2", text)


def md_html(value: Any) -> str:
    """``value`` as literal text inside a raw HTML element of a markdown file (``<summary>``)."""
    return html.escape(_one_line(value), quote=True)


def html_text(value: Any) -> str:
    """``value`` as literal text of an HTML page (``report.html``, the notebook's tables): HTML-escaped, quotes
    too (for attributes), its control characters but white space shown as U+FFFD."""
    return html.escape(_CONTROLS.sub("\ufffd", str(value)), quote=True)


def term_system(name: str, models: Any) -> str:
    """A system as the terminal names it (``run``, ``compare``, ``plan``): :func:`system_label`, escaped as
    :func:`term_text` escapes a name."""
    return term_text(system_label(name, models))


# --------------------------------------------------------------------------- numbers and missing values


def is_missing(x: Any) -> bool:
    """None, or a NaN of any float type."""
    return x is None or (isinstance(x, numbers.Real) and math.isnan(x))


def number(x: Any, digits: int = 4, *, signed: bool = False, missing: str = FILE) -> str:
    """``0.6181``; ``+0.0766`` when ``signed``; ``missing`` for None or NaN."""
    if is_missing(x):
        return missing
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def exact(x: Any, *, signed: bool = False) -> str:
    """A number as given, for spec values, thresholds and keys: the shortest text that reads back as the same
    double (``1``, ``0.3``, ``1.0000001``, ``0.30000000000000004``, ``1e-05``, ``1e+16``), so two different numbers
    never print alike; ``+`` before a non-negative number when ``signed``; never ``-0`` (zero is ``0``, ``+0``).

    >>> [exact(v) for v in (1, 1.0000001, 0.30000000000000004, 0.3, -0.0)]
    ['1', '1.0000001', '0.30000000000000004', '0.3', '0']
    """
    text = shortest_text(x)
    return f"+{text}" if signed and not text.startswith("-") and math.isfinite(float(x)) else text


def _decimal(x: float) -> Any:
    from decimal import Decimal

    return Decimal(exact(x).replace("+", "").replace("inf", "Infinity").replace("nan", "NaN"))


def exact_share(x: Any) -> str:
    """A ratio given in a spec or compared with one (``max_share``), as an exact percentage: ``28.124%`` for
    0.28124, ``10%`` for 0.1 (the decimal point of :func:`exact`'s text moved, no rounding)."""
    d = _decimal(float(x)).scaleb(2).normalize()
    return f"{d:f}%"


def distinct(value: float, bound: float, *, signed: bool = True, least: int = 6) -> tuple[str, str]:
    """``value`` and the threshold ``bound`` it is compared with, as many significant digits (at least ``least``)
    as show their order: two different numbers never print the same (a lower end of 0.49999995 against a threshold
    of 0.4999999 is not "0.5 ... +0.5"), two equal ones print the same; ``bound`` with its sign when ``signed``;
    never ``-0``."""
    value, bound = float(value) + 0.0, float(bound) + 0.0  # (+ 0.0: -0.0 is 0)
    sign = "+" if signed else ""
    for digits in range(least, 18):
        a, b = f"{value:.{digits}g}", f"{bound:{sign}.{digits}g}"
        if (float(a) == float(b)) == (value == bound):
            return a, b
    return f"{value:.17g}", f"{bound:{sign}.17g}"


def distinct_share(value: float, bound: float, least: int = 1) -> tuple[str, str]:
    """A ratio ``value`` and the ratio ``bound`` it is compared with, as percentages: ``bound`` exactly
    (:func:`exact_share`), ``value`` with as many decimals (at least ``least``) as keep its order with ``bound``: a
    share of 0.2813 against a bound of 0.28124 is 28.13% against 28.124%, never 28.1% against 28.124% (nor 28.1%
    against 28.1%)."""
    b = exact_share(bound)
    target = _decimal(float(bound)).scaleb(2)
    shifted = _decimal(float(value)).scaleb(2)
    order = (float(value) > float(bound)) - (float(value) < float(bound))
    for places in range(least, 25):
        a = shifted.quantize(type(shifted)(1).scaleb(-places))
        if (a > target) - (a < target) == order:
            return f"{a + 0:f}%", b  # (+ 0: no -0)
    return f"{shifted:f}%", b


def share(x: Any, digits: int = 1, *, signed: bool = False, missing: str = FILE) -> str:
    """A ratio as a percentage: ``+12.4%``; ``missing`` for None or NaN."""
    if is_missing(x):
        return missing
    return f"{x:+.{digits}%}" if signed else f"{x:.{digits}%}"


def p_value(x: Any, *, missing: str = FILE) -> str:
    """``0.0366``, and below 1e-4 one significant digit in e-notation (``2.0e-05``); ``missing`` for None or
    NaN."""
    if is_missing(x):
        return missing
    return f"{x:.4f}" if x >= 1e-4 else f"{x:.1e}"


def listing(items: Sequence[str]) -> str:
    """Items joined with commas; :data:`EMPTY` for none."""
    return ", ".join(items) or EMPTY


def wins_ties_losses(comparison: Mapping[str, Any], sep: str = " / ") -> str:
    """A comparison's wins, ties and losses (``163 / 0 / 70``), or why there are none: ``not computed`` (the
    per-query rows stayed in Spark)."""
    if "wins" not in comparison:
        return "not computed"
    return sep.join(str(comparison[k]) for k in ("wins", "ties", "losses"))


# --------------------------------------------------------------------------- query counts


def queries_line(summary: dict) -> str:
    """The query counts of an evaluation in one sentence, the same in the terminal, ``report.html`` and
    ``report.md`` (plain text: escape it for the medium). It tells the query set (``n_queries`` of
    ``summary.json``: every query the evaluation covers) from the queries each mean is over (``n_evaluated``, the
    tables' "evaluated" column), and says why the others are excluded. Counts are those of the first cutoff, as
    in the tables."""
    n = int(summary.get("n_queries", 0))
    spec = summary.get("spec") or {}
    source = spec.get("queries.set")
    where = "every judged query" if source in (None, "null", "") else f"the query set {source}"
    firsts = [next(iter(entry.values())) for entry in summary.get("systems", {}).values() if entry]
    text = f"{n} {_plural(n, 'query', 'queries')} in the evaluation ({where})"
    if not firsts:
        return text + "."
    counts = {(int(m.get("n_evaluated", 0)), int(m.get("n_excluded", 0))) for m in firsts}
    if len(counts) > 1:
        spread = sorted(k for k, _ in counts)
        return (
            text + f"; each system's means are over its evaluated queries, {spread[0]} to {spread[-1]} "
            f"of them (the evaluated and excluded columns give each system's counts)."
        )
    evaluated, excluded = next(iter(counts))
    if not excluded:
        return text + f"; every mean is over all {evaluated} (none excluded)."
    reasons = []
    empty = {int(m.get("n_empty_ideal", 0)) for m in firsts}
    missing = {int(m.get("n_missing", 0)) for m in firsts}
    if excludes(spec.get("metric.empty_ideal")) and len(empty) == 1 and min(empty):
        k = min(empty)
        reasons.append(
            (k, f"{k} with an empty ideal (ideal DCG 0: nothing relevant to find; metric.empty_ideal: exclude)")
        )
    if excludes(spec.get("metric.missing_queries")) and len(missing) == 1 and min(missing):
        k = min(missing)
        reasons.append((k, f"{k} that the runs do not answer (metric.missing_queries: exclude)"))
    why = (": " + " and ".join(r for _, r in reasons)) if sum(k for k, _ in reasons) == excluded else ""
    return text + (
        f"; each mean is over the {evaluated} evaluated, {excluded} {_plural(excluded, 'is', 'are')} excluded{why}."
    )


def intervals_line(summary: dict, *, seed: bool = False) -> str:
    """How the means' intervals were made, in one clause (plain text): the bootstrap's confidence, method and
    resamples (and its seed, with ``seed``); with a judge, the declared estimator's normal intervals and which
    labels they rest on."""
    spec = summary.get("spec") or {}
    confidence = exact_share(spec.get("uncertainty.confidence", 0.95))
    judge = summary.get("judge")
    if judge:
        n, big_n = judge.get("n_labelled", 0), judge.get("n_unlabelled", 0)
        return (
            f"{confidence} t intervals of the {judge.get('estimator')} estimate: human judgments of "
            f"{n} {_plural(n, 'query', 'queries')}, the judge's of those and {big_n} more"
        )
    return (
        f"{confidence} {spec.get('uncertainty.method', '')} intervals from {spec.get('uncertainty.resamples')} "
        "bootstrap resamples of queries" + (f", seed {spec.get('uncertainty.seed')}" if seed else "")
    )


def per_query_elsewhere(summary: dict) -> str:
    """What a report says when the folder holds no per-query rows (they stayed in Spark)."""
    stats = (summary.get("engine_info") or {}).get("statistics") or {}
    return (
        f"The per-query rows are not in this folder: Spark wrote them as Parquet to "
        f"{summary.get('per_query_path')}. The intervals and tests come from {stats.get('groups', '?')} random "
        f"groups of queries (percentile bootstrap over groups, sign flips of groups); per-query figures, "
        f"t-tests, effect sizes and wins, ties and losses are not computed."
    )


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


# --------------------------------------------------------------------------- model systems


def model_label(record: Mapping[str, Any] | None) -> str:
    """A model system's model in a few words (``record``: its ``summary.json`` ``models`` entry): ``ranker v2``
    (registered model ranker, version 2), ``ranker v1 @champion`` (the version the alias pointed to when the
    evaluation started), a logged model's id when it is not a registry version, else the URI loaded; "" for a
    system that is not a model."""
    if not record:
        return ""
    name, alias = record.get("registered_model"), record.get("alias")
    if name:
        return f"{name} v{record.get('version')}" + (f" @{alias}" if alias else "")
    return str(record.get("model_id") or record.get("loaded_uri") or record.get("uri") or "")


def system_label(name: str, models: Mapping[str, Any] | None) -> str:
    """A system's name as people read it: with its model beside it when it is a model system (``challenger
    (ranker v2)``), else the name alone. Plain text: escape it for the medium."""
    model = model_label((models or {}).get(name))
    return f"{name} ({model})" if model else name


def models_sentence(models: Mapping[str, Any] | None) -> str:
    """The model systems in words, for the report and the terminal ("" without one): which registered model and
    version each was, and the alias that named it, as resolved when the evaluation started."""
    parts = []
    for name, r in (models or {}).items():
        if r.get("registered_model"):
            alias = f", named by the alias @{r['alias']}" if r.get("alias") else ""
            parts.append(f"{name} is registered model {r['registered_model']} version {r.get('version')}{alias}")
        else:
            parts.append(f"{name} is the model {model_label(r)} (not a registry version)")
    if not parts:
        return ""
    return "Model systems, as resolved when the evaluation started: " + "; ".join(parts) + "."


# --------------------------------------------------------------------------- tables


def text_table(heads: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1, indent: str = "") -> list[str]:
    """A terminal table, one line per row: each column as wide as its widest cell, two spaces apart; the first
    ``left`` columns (labels) aligned left, the others (numbers) right."""
    every = [list(heads)] + [list(r) for r in rows]
    widths = [max(len(r[i]) for r in every) for i in range(len(heads))]
    return [
        indent + "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
        for r in every
    ]


def md_table(heads: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> list[str]:
    """A markdown pipe table: the heading, the alignment row and one line per row. ``align`` has one letter per
    column: ``l`` (left) or ``r`` (right, for numbers). Cells are written as given: escape text from the data with
    :func:`md_text` first."""
    if len(align) != len(heads) or set(align) - {"l", "r"}:
        raise ValueError(f"align {align!r} must be one 'l' or 'r' per column ({len(heads)})")
    marks = ["---:" if a == "r" else "---" for a in align]
    for i, r in enumerate(rows):
        if len(r) != len(heads):
            raise ValueError(f"row {i} has {len(r)} cells for {len(heads)} columns")
    return ["| " + " | ".join(r) + " |" for r in [list(heads), marks, *[list(r) for r in rows]]]
