"""The report's figures, drawn directly as SVG text from the files of an output folder.

Pure functions: the summary (``summary.json``), the per-query table and the bootstrap distributions in, SVG
text out; no plotting library, nothing written. The same input gives the same bytes (no random ids, no dates,
numbers written to fixed precision), so a report rebuilt from MLflow's artifacts equals the local one.

Every figure

* is :data:`WIDTH` pixels wide (the report's column is at most 1100 pixels; MLflow's artifact viewer scales an
  SVG to its panel), with text sized to read at that width;
* labels both axes of every plot, with the quantity and its unit;
* places tick labels at "nice" numbers (1, 2 or 5 times a power of ten) and takes fewer ticks until the labels,
  at their estimated width, cannot touch;
* has a legend naming every colour that carries meaning;
* escapes every string from the data (system names are user data) and leaves out characters XML forbids;
* draws nothing for an undefined (NaN or missing) value: no point, no bar, a gap in a line, and says so in the
  plot when a series has nothing to draw.

For tests and tools the SVG is marked up: each axis is a ``<g class="axis" data-axis="x|y">`` holding its
``text.tick-label`` elements and its ``text.axis-label``; data are drawn with class ``mark``; the legend is a
``<g class="legend">`` of ``g.legend-item`` elements, each with a ``.swatch`` in the colour it explains.
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .rules import NAME, headline_key, key_label, metric_name

FIGURES = ("ndcg_by_cutoff", "per_query_differences", "bootstrap_differences")

WIDTH = 960  # px; the report shows figures at their own size (at most the column's width)
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', Arial, sans-serif"
TITLE_SIZE, LABEL_SIZE, TICK_SIZE, LEGEND_SIZE = 16, 14, 13, 14
EM = 0.66  # the width in em of a digit or a lowercase letter: at least that of common sans fonts (text_width)
TICK_GAP = 10  # px between two tick labels at least
MAX_POINTS = 1000  # a sorted series is drawn through at most this many of its values
BINS = 40  # bins of each bootstrap histogram

# Okabe & Ito's palette, readable by people with the common colour-vision deficiencies (yellow left out: too
# light on white); beyond eight systems the colours repeat with a dashed line
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#999999")
INK, GRID, MUTED = "#1d1d1f", "#e3e3e6", "#555555"
HIST, INTERVAL, OBSERVED, ZERO = "#9ecae1", "#D55E00", "#0072B2", "#1d1d1f"
MINUS = "\u2212"


# --------------------------------------------------------------------------- text


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def xml_text(value: Any) -> str:
    """``value`` as the text of an SVG element or attribute: escaped, without the characters XML 1.0 forbids."""
    return html.escape(_NOT_XML.sub("\ufffd", str(value)), quote=True)


def text_width(text: str, size: float, *, bold: bool = False) -> float:
    """An upper estimate of the width of ``text`` at font ``size`` (px), from the widths of DejaVu Sans (the
    widest of the usual sans fonts): wide characters (``m``, ``W``, ``%``, the minus sign, East Asian ones) one
    em, capitals 0.78, narrow ones (``i``, ``l``, punctuation) 0.45, anything else :data:`EM`; bold 12% more."""
    ems = sum(_em(c) for c in text)
    return ems * size * (1.12 if bold else 1.0)


_WIDE = frozenset("mwMW@%−—…")
_NARROW = frozenset("iljtfrI.,:;!|'\" ()[]")


def _em(c: str) -> float:
    if c in _WIDE or unicodedata.east_asian_width(c) in "WF":
        return 1.0
    if c in _NARROW:
        return 0.45
    return 0.78 if c.isupper() else EM


def fit_text(text: str, size: float, width: float, *, bold: bool = False) -> str:
    """``text`` on one line, cut (with an ellipsis) to fit ``width`` pixels at font ``size``."""
    text = " ".join(str(text).split())
    if text_width(text, size, bold=bold) <= width:
        return text
    while text and text_width(text + "…", size, bold=bold) > width:
        text = text[:-1]
    return text + "…"


def _n(x: float) -> str:
    """A coordinate: two decimals at most, no trailing zeros, never ``-0``."""
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


# --------------------------------------------------------------------------- nice numbers


def nice_number(x: float, *, round_: bool) -> tuple[int, int]:
    """Heckbert's nice number near ``x > 0`` as (mantissa, exponent): mantissa 1, 2, 5 or 10 times 10**exponent;
    rounded to the nearest (``round_``) or the smallest not below ``x``."""
    exp = math.floor(math.log10(x))
    f = x / 10**exp
    if round_:
        m = 1 if f < 1.5 else 2 if f < 3 else 5 if f < 7 else 10
    else:
        m = 1 if f <= 1 else 2 if f <= 2 else 5 if f <= 5 else 10
    return (1, exp + 1) if m == 10 else (m, exp)


@dataclass(frozen=True)
class Ticks:
    values: tuple[float, ...]
    labels: tuple[str, ...]

    @property
    def lo(self) -> float:
        return self.values[0]

    @property
    def hi(self) -> float:
        return self.values[-1]


def nice_ticks(lo: float, hi: float, count: int, *, suffix: str = "") -> Ticks:
    """About ``count`` (at least 2) ticks at multiples of a nice step (the nice number nearest the range over
    ``count - 1``), covering [lo, hi]; labels with as many
    decimals as the step needs, a true minus sign and ``suffix``. An empty or undefined range becomes a small
    one around its value (or [0, 1])."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = 0.0, 1.0
    lo, hi = min(lo, hi), max(lo, hi)
    if hi - lo <= 1e-9 * max(1.0, abs(lo), abs(hi)):
        pad = max(abs(lo) * 0.05, 1e-3)
        lo, hi = lo - pad, hi + pad
    m, e = nice_number((hi - lo) / max(count - 1, 1), round_=True)
    step = m * 10.0**e
    first = math.floor(lo / step + 1e-9)
    last = math.ceil(hi / step - 1e-9)
    last = max(last, first + 1)
    decimals = max(0, -e)
    values, labels = [], []
    for k in range(first, last + 1):
        v = k * m * 10.0**e if e >= 0 else k * m / 10.0**-e  # exact multiples, no drift
        values.append(v)
        text = f"{v:.{decimals}f}"
        if float(text) == 0:
            text = text.lstrip("-")
        labels.append(text.replace("-", MINUS) + suffix)
    return Ticks(tuple(values), tuple(labels))


def fit_ticks(
    lo: float, hi: float, length: float, *, horizontal: bool, size: float = TICK_SIZE, suffix: str = "", most: int = 10
) -> Ticks:
    """The most ticks (up to ``most``) over [lo, hi] whose labels do not touch along an axis ``length`` px
    long: horizontal labels need their estimated width plus :data:`TICK_GAP`, vertical ones their height. When
    no count fits, only the two end ticks are labelled."""
    best = None
    for count in range(most, 1, -1):
        ticks = nice_ticks(lo, hi, count, suffix=suffix)
        n = len(ticks.values)
        spacing = length / (n - 1)
        need = (max(text_width(t, size) for t in ticks.labels) if horizontal else size * 1.2) + TICK_GAP
        if spacing >= need:
            return ticks
        best = ticks
    assert best is not None  # most >= 2: the loop ran
    return Ticks((best.lo, best.hi), (best.labels[0], best.labels[-1]))  # the two ends: as far apart as can be


# --------------------------------------------------------------------------- drawing


@dataclass
class Scale:
    """A linear map from data [lo, hi] to pixels [p0, p1]."""

    lo: float
    hi: float
    p0: float
    p1: float

    def __call__(self, v: float) -> float:
        return self.p0 + (v - self.lo) / (self.hi - self.lo) * (self.p1 - self.p0)


@dataclass
class Box:
    """A plot area in pixels."""

    left: float
    top: float
    width: float
    height: float

    @property
    def right(self) -> float:
        return self.left + self.width

    @property
    def bottom(self) -> float:
        return self.top + self.height


class Svg:
    def __init__(self, name: str, title: str):
        self.name = name
        self.title = title
        self.parts: list[str] = []

    def add(self, element: str) -> None:
        self.parts.append(element)

    def text(
        self,
        x: float,
        y: float,
        text: str,
        *,
        size: float,
        anchor: str = "start",
        cls: str = "",
        fill: str = INK,
        weight: str = "",
        rotate: bool = False,
        full: str | None = None,
    ) -> None:
        attrs = f'x="{_n(x)}" y="{_n(y)}" font-size="{_n(size)}" fill="{fill}"'
        if anchor != "start":
            attrs += f' text-anchor="{anchor}"'
        if weight:
            attrs += f' font-weight="{weight}"'
        if cls:
            attrs += f' class="{cls}"'
        if rotate:
            attrs += f' transform="rotate(-90 {_n(x)} {_n(y)})"'
        tip = f"<title>{xml_text(full)}</title>" if full is not None and full != text else ""
        self.add(f"<text {attrs}>{tip}{xml_text(text)}</text>")

    def render(self, height: float) -> str:
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{_n(height)}" '
            f'viewBox="0 0 {WIDTH} {_n(height)}" role="img" class="ndcg-figure" data-figure="{self.name}" '
            f'font-family="{FONT}">'
        )
        return "\n".join(
            [
                head,
                f"<title>{xml_text(self.title)}</title>",
                f'<rect width="{WIDTH}" height="{_n(height)}" fill="#ffffff"/>',
                *self.parts,
                "</svg>",
            ]
        )


@dataclass(frozen=True)
class LegendItem:
    label: str
    colour: str
    kind: str  # "line", "point" (a line through a dot), "bar", "dashed", "interval" (an error bar)


def legend(svg: Svg, items: Sequence[LegendItem], top: float, left: float, width: float) -> float:
    """Legend items flowing in rows from (left, top); returns the y below the legend."""
    row_height = LEGEND_SIZE * 1.7
    swatch = 26
    x, y = left, top
    out = ['<g class="legend">']
    for item in items:
        label = fit_text(item.label, LEGEND_SIZE, width - swatch - 8)
        w = swatch + 6 + text_width(label, LEGEND_SIZE) + 18
        if x > left and x + w > left + width:
            x, y = left, y + row_height
        cy = y + row_height / 2
        sw = _swatch(item, x, cy, swatch)
        tip = f"<title>{xml_text(item.label)}</title>" if label != item.label else ""
        out.append(
            f'<g class="legend-item">{sw}<text x="{_n(x + swatch + 6)}" y="{_n(cy + LEGEND_SIZE * 0.35)}" '
            f'font-size="{LEGEND_SIZE}" fill="{INK}">{tip}{xml_text(label)}</text></g>'
        )
        x += w
    out.append("</g>")
    svg.add("\n".join(out))
    return y + row_height


def _swatch(item: LegendItem, x: float, cy: float, width: float) -> str:
    if item.kind == "bar":
        return (
            f'<rect class="swatch" x="{_n(x + 4)}" y="{_n(cy - 6)}" width="{_n(width - 8)}" height="12" '
            f'fill="{item.colour}"/>'
        )
    if item.kind == "interval":  # an error bar: a vertical line with caps
        mid = x + width / 2
        return (
            f'<path class="swatch" d="M{_n(mid)} {_n(cy - 8)}V{_n(cy + 8)}M{_n(mid - 4)} {_n(cy - 8)}'
            f'H{_n(mid + 4)}M{_n(mid - 4)} {_n(cy + 8)}H{_n(mid + 4)}" stroke="{item.colour}" '
            f'stroke-width="1.5" fill="none"/>'
        )
    dash = ' stroke-dasharray="5 3"' if item.kind == "dashed" else ""
    line = (
        f'<line class="swatch" x1="{_n(x)}" y1="{_n(cy)}" x2="{_n(x + width)}" y2="{_n(cy)}" '
        f'stroke="{item.colour}" stroke-width="2"{dash} fill="none"/>'
    )
    if item.kind == "point":
        line += f'<circle class="swatch" cx="{_n(x + width / 2)}" cy="{_n(cy)}" r="4" fill="{item.colour}"/>'
    return line


def axis_x(
    svg: Svg, box: Box, ticks: Sequence[tuple[float, str]], label: str, *, panel: str = "", grid: bool = False
) -> None:
    """A horizontal axis under ``box``: ticks at pixel positions with their labels, and the axis label."""
    out = [
        f'<g class="axis" data-axis="x"{_panel(panel)}>',
        f'<line x1="{_n(box.left)}" y1="{_n(box.bottom)}" x2="{_n(box.right)}" y2="{_n(box.bottom)}" '
        f'stroke="{INK}" stroke-width="1"/>',
    ]
    for px, text in ticks:
        if grid:
            out.append(
                f'<line x1="{_n(px)}" y1="{_n(box.top)}" x2="{_n(px)}" y2="{_n(box.bottom)}" '
                f'stroke="{GRID}" stroke-width="1"/>'
            )
        out.append(
            f'<line x1="{_n(px)}" y1="{_n(box.bottom)}" x2="{_n(px)}" y2="{_n(box.bottom + 5)}" '
            f'stroke="{INK}" stroke-width="1"/>'
        )
        out.append(
            f'<text class="tick-label" x="{_n(px)}" y="{_n(box.bottom + 8 + TICK_SIZE)}" '
            f'font-size="{TICK_SIZE}" text-anchor="middle" fill="{INK}">{xml_text(text)}</text>'
        )
    shown = fit_text(label, LABEL_SIZE, box.width)
    out.append(
        f'<text class="axis-label" x="{_n(box.left + box.width / 2)}" '
        f'y="{_n(box.bottom + 16 + TICK_SIZE + LABEL_SIZE)}" font-size="{LABEL_SIZE}" text-anchor="middle" '
        f'fill="{INK}">{xml_text(shown)}</text>'
    )
    out.append("</g>")
    svg.add("\n".join(out))


def axis_y(svg: Svg, box: Box, ticks: Sequence[tuple[float, str]], label: str, *, panel: str = "") -> None:
    """A vertical axis left of ``box`` with horizontal grid lines, tick labels and the (rotated) axis label."""
    out = [f'<g class="axis" data-axis="y"{_panel(panel)}>']
    for py, text in ticks:
        out.append(
            f'<line x1="{_n(box.left)}" y1="{_n(py)}" x2="{_n(box.right)}" y2="{_n(py)}" '
            f'stroke="{GRID}" stroke-width="1"/>'
        )
        out.append(
            f'<line x1="{_n(box.left - 5)}" y1="{_n(py)}" x2="{_n(box.left)}" y2="{_n(py)}" '
            f'stroke="{INK}" stroke-width="1"/>'
        )
        out.append(
            f'<text class="tick-label" x="{_n(box.left - 8)}" y="{_n(py + TICK_SIZE * 0.35)}" '
            f'font-size="{TICK_SIZE}" text-anchor="end" fill="{INK}">{xml_text(text)}</text>'
        )
    out.append(
        f'<line x1="{_n(box.left)}" y1="{_n(box.top)}" x2="{_n(box.left)}" y2="{_n(box.bottom)}" '
        f'stroke="{INK}" stroke-width="1"/>'
    )
    widest = max((text_width(t, TICK_SIZE) for _, t in ticks), default=0.0)
    x = box.left - 14 - widest - LABEL_SIZE * 0.3
    shown = fit_text(label, LABEL_SIZE, box.height)
    out.append(
        f'<text class="axis-label" x="{_n(x)}" y="{_n(box.top + box.height / 2)}" font-size="{LABEL_SIZE}" '
        f'text-anchor="middle" fill="{INK}" transform="rotate(-90 {_n(x)} {_n(box.top + box.height / 2)})">'
        f"{xml_text(shown)}</text>"
    )
    out.append("</g>")
    svg.add("\n".join(out))


def _panel(panel: str) -> str:
    return f' data-panel="{xml_text(panel)}"' if panel else ""


def y_margin(ticks: Ticks) -> float:
    """The room left of a plot for its y tick labels and its rotated axis label."""
    return 14 + max(text_width(t, TICK_SIZE) for t in ticks.labels) + LABEL_SIZE * 1.6


def note(svg: Svg, box: Box, text: str) -> None:
    """A message in the middle of an empty plot."""
    svg.text(
        box.left + box.width / 2,
        box.top + box.height / 2,
        fit_text(text, LABEL_SIZE, box.width - 20),
        size=LABEL_SIZE,
        anchor="middle",
        fill=MUTED,
        cls="empty-note",
    )


def polyline(
    points: Sequence[tuple[float, float]], colour: str, *, width: float = 2, dashed: bool = False, cls: str = "mark"
) -> str:
    dash = ' stroke-dasharray="6 4"' if dashed else ""
    coords = " ".join(f"{_n(x)},{_n(y)}" for x, y in points)
    return (
        f'<polyline class="{cls}" points="{coords}" fill="none" stroke="{colour}" stroke-width="{_n(width)}" '
        f'stroke-linejoin="round"{dash}/>'
    )


def _runs(points: Sequence[tuple[float, float | None]]) -> list[list[tuple[float, float]]]:
    """Consecutive defined points: an undefined value breaks the line."""
    out: list[list[tuple[float, float]]] = [[]]
    for x, y in points:
        if y is None:
            if out[-1]:
                out.append([])
        else:
            out[-1].append((x, y))
    return [r for r in out if r]


def _finite(x: Any) -> float | None:
    """A defined number, or None for None, NaN, infinities and anything not a number."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _colour(i: int) -> tuple[str, bool]:
    return PALETTE[i % len(PALETTE)], (i // len(PALETTE)) % 2 == 1


def _title(svg: Svg, text: str) -> float:
    svg.text(
        16,
        16 + TITLE_SIZE,
        fit_text(text, TITLE_SIZE, WIDTH - 32, bold=True),
        size=TITLE_SIZE,
        weight="600",
        cls="figure-title",
        full=text,
    )
    return 16 + TITLE_SIZE + 10


# --------------------------------------------------------------------------- the figures


def ndcg_by_cutoff(summary: dict) -> str:
    """Mean nDCG of each system at each cutoff, with its confidence interval when there is one."""
    systems: dict[str, dict] = summary["systems"]
    keys = list(next(iter(systems.values()), {}))
    conf = summary.get("spec", {}).get("uncertainty.confidence")
    has_ci = any("ci_low" in m for entry in systems.values() for m in entry.values())
    level = f"{float(conf):.0%} " if has_ci and _finite(conf) is not None else ""
    svg = Svg("ndcg_by_cutoff", "Mean nDCG by cutoff" + (f" (bars: {level}confidence interval)" if has_ci else ""))
    top = _title(svg, svg.title)
    items = [LegendItem(name, *_style(i, "point")) for i, name in enumerate(systems)]
    if has_ci:
        items.append(LegendItem(f"{level}confidence interval (in each system's colour)", INK, "interval"))
    top = legend(svg, items, top, 16, WIDTH - 32) + 8

    values = [
        v
        for entry in systems.values()
        for k in keys
        for v in (_finite(entry[k].get("mean")), _finite(entry[k].get("ci_low")), _finite(entry[k].get("ci_high")))
        if v is not None
    ]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    plot_height = 300
    yt = fit_ticks(lo, hi, plot_height, horizontal=False, most=8)
    left = y_margin(yt) + 8
    box = Box(left, top + 6, WIDTH - left - 24, plot_height)
    y = Scale(yt.lo, yt.hi, box.bottom, box.top)
    axis_y(svg, box, [(y(v), t) for v, t in zip(yt.values, yt.labels)], "mean nDCG (0 to 1)")

    band = box.width / max(len(keys), 1)
    xs = [box.left + band * (j + 0.5) for j in range(len(keys))]
    labels = _category_labels([key_label(k) for k in keys], band)
    axis_x(svg, box, [(x, t) for x, t in zip(xs, labels) if t], f"cutoff K of {NAME}@K (all: the whole ranking)")

    n = len(systems)
    spread = min(14.0, band * 0.5 / max(n, 1))
    marks = []
    for i, (name, entry) in enumerate(systems.items()):
        colour, dashed = _colour(i)
        off = (i - (n - 1) / 2) * spread
        pts = []
        for j, k in enumerate(keys):
            m = entry[k]
            mean = _finite(m.get("mean"))
            px = xs[j] + off
            pts.append((px, None if mean is None else y(mean)))
            lo_, hi_ = _finite(m.get("ci_low")), _finite(m.get("ci_high"))
            if lo_ is not None and hi_ is not None:
                # an interval a rounding error off its mean still spans the mean: never a negative length
                a, b = (min(lo_, hi_), max(lo_, hi_)) if mean is None else (min(lo_, mean), max(hi_, mean))
                marks.append(
                    f'<g class="error-bar"><title>{xml_text(name)}, {xml_text(metric_name(k))}: '
                    f"[{lo_:.4f}, {hi_:.4f}]</title>"
                    f'<line class="mark" x1="{_n(px)}" y1="{_n(y(a))}" x2="{_n(px)}" y2="{_n(y(b))}" '
                    f'stroke="{colour}" stroke-width="1.5" fill="none"/>'
                    + "".join(
                        f'<line class="mark" x1="{_n(px - 4)}" y1="{_n(y(v))}" x2="{_n(px + 4)}" '
                        f'y2="{_n(y(v))}" stroke="{colour}" stroke-width="1.5" fill="none"/>'
                        for v in (a, b)
                    )
                    + "</g>"
                )
        for run in _runs(pts):
            marks.append(polyline(run, colour, dashed=dashed))
        for (px, py), k in zip(pts, keys):
            if py is not None:
                mean = float(entry[k]["mean"])
                marks.append(
                    f'<circle class="mark" cx="{_n(px)}" cy="{_n(py)}" r="4.5" fill="{colour}" '
                    f'stroke="#ffffff" stroke-width="1"><title>{xml_text(name)}, '
                    f"{xml_text(metric_name(k))}: {mean:.4f}</title></circle>"
                )
    svg.add("\n".join(marks))
    if not values:
        note(svg, box, "no defined mean to draw")
    return svg.render(box.bottom + 16 + TICK_SIZE + LABEL_SIZE + 14)


def _style(i: int, kind: str) -> tuple[str, str]:
    colour, dashed = _colour(i)
    return colour, "dashed" if dashed else kind


def _category_labels(labels: list[str], band: float) -> list[str]:
    """Category labels, every n-th only (n the smallest that keeps them apart) when they do not all fit."""
    widest = max((text_width(t, TICK_SIZE) for t in labels), default=0.0) + TICK_GAP
    every = max(1, math.ceil(widest / band)) if band > 0 else 1
    return [t if j % every == 0 else "" for j, t in enumerate(labels)]


def paired_differences(per_query, baseline: str, candidate: str, cutoff: str) -> np.ndarray:
    """Candidate minus baseline nDCG of every query both define, at one cutoff label, as in ``per_query.csv``."""
    a = per_query[(per_query["system"] == baseline) & (per_query["cutoff"] == cutoff)].set_index("query_id")["ndcg"]
    b = per_query[(per_query["system"] == candidate) & (per_query["cutoff"] == cutoff)].set_index("query_id")["ndcg"]
    joined = a.to_frame("a").join(b.to_frame("b"), how="inner").dropna()
    return (joined["b"] - joined["a"]).to_numpy(dtype=float)


def per_query_differences(summary: dict, per_query) -> str | None:
    """The per-query differences of each comparison at the headline cutoff, sorted; None without comparisons."""
    comps = list(summary.get("comparisons") or [])
    if not comps:
        return None
    keys = list(next(iter(summary["systems"].values()), {}))
    head = headline_key(keys)
    label = metric_name(head)
    comps = [c for c in comps if c["key"] == head]
    series = [
        (
            f"{c['candidate']} − {c['baseline']}",
            np.sort(paired_differences(per_query, c["baseline"], c["candidate"], key_label(head))),
        )
        for c in comps
    ]
    svg = Svg("per_query_differences", f"Per-query differences in {label}, sorted")
    top = _title(svg, svg.title)
    items = [LegendItem(name, *_style(i, "line")) for i, (name, _) in enumerate(series)]
    items.append(LegendItem("zero: no difference", ZERO, "line"))
    top = legend(svg, items, top, 16, WIDTH - 32) + 8

    finite = [d for _, d in series if d.size]
    lo = min([0.0] + [float(d[0]) for d in finite])
    hi = max([0.0] + [float(d[-1]) for d in finite])
    plot_height = 300
    yt = fit_ticks(lo, hi, plot_height, horizontal=False, most=8)
    left = y_margin(yt) + 8
    box = Box(left, top + 6, WIDTH - left - 24, plot_height)
    y = Scale(yt.lo, yt.hi, box.bottom, box.top)
    axis_y(svg, box, [(y(v), t) for v, t in zip(yt.values, yt.labels)], f"difference in {label}")
    n_max = max((d.size for _, d in series), default=0)
    xt = fit_ticks(1, max(n_max, 2), box.width, horizontal=True, most=10)
    xt = _whole(xt, max(n_max, 2))
    x = Scale(xt.lo, xt.hi, box.left, box.right)
    axis_x(
        svg,
        box,
        [(x(v), t) for v, t in zip(xt.values, xt.labels)],
        "queries, sorted from the largest loss to the largest win (query count)",
    )
    marks = [
        f'<line class="mark" x1="{_n(box.left)}" y1="{_n(y(0))}" x2="{_n(box.right)}" y2="{_n(y(0))}" '
        f'stroke="{ZERO}" stroke-width="1.2" fill="none"/>'
    ]
    for i, (_, d) in enumerate(series):
        if not d.size:
            continue
        colour, dashed = _colour(i)
        idx = (
            np.arange(d.size)
            if d.size <= MAX_POINTS
            else np.unique(np.round(np.linspace(0, d.size - 1, MAX_POINTS)).astype(int))
        )
        pts = [(x(int(j) + 1), y(float(d[j]))) for j in idx]
        if len(pts) == 1:
            marks.append(f'<circle class="mark" cx="{_n(pts[0][0])}" cy="{_n(pts[0][1])}" r="3" fill="{colour}"/>')
        else:
            marks.append(polyline(pts, colour, dashed=dashed))
    svg.add("\n".join(marks))
    if not finite:
        note(svg, box, "no query has a defined nDCG in both systems of a comparison")
    return svg.render(box.bottom + 16 + TICK_SIZE + LABEL_SIZE + 14)


def _whole(ticks: Ticks, most: int) -> Ticks:
    """Ticks of a count axis: whole numbers only (a step below 1 becomes 1)."""
    values = [v for v in ticks.values if float(v).is_integer()]
    if len(values) < 2:
        values = [1.0, float(most)]
    return Ticks(tuple(values), tuple(str(int(v)) for v in values))


def bootstrap_differences(summary: dict, bootstrap) -> str | None:
    """A histogram of the bootstrap distribution of each difference of means, one panel per comparison, all on
    one horizontal scale and one bin width; None without bootstrap distributions."""
    comps = [
        c
        for c in summary.get("comparisons") or []
        if bootstrap is not None and f"{c['candidate']}:{c['key']}" in bootstrap.columns
    ]
    if not comps:
        return None
    conf = _finite(summary.get("spec", {}).get("uncertainty.confidence"))
    level = f"{conf:.0%} " if conf is not None else ""
    dists = [np.asarray(bootstrap[f"{c['candidate']}:{c['key']}"], dtype=float) for c in comps]
    dists = [d[np.isfinite(d)] for d in dists]
    svg = Svg("bootstrap_differences", "Bootstrap distributions of the differences of means")
    top = _title(svg, svg.title)
    items = [
        LegendItem("bootstrap resamples (histogram)", HIST, "bar"),
        LegendItem("observed difference", OBSERVED, "line"),
        LegendItem(f"{level}interval".strip(), INTERVAL, "dashed"),
        LegendItem("zero: no difference", ZERO, "line"),
    ]
    top = legend(svg, items, top, 16, WIDTH - 32) + 6

    extremes = [float(v) for d in dists if d.size for v in (d.min(), d.max())]
    extremes += [
        v
        for c in comps
        for v in (_finite(c.get("delta")), _finite(c.get("ci_low")), _finite(c.get("ci_high")))
        if v is not None
    ]
    lo, hi = min(extremes + [0.0]), max(extremes + [0.0])
    # one block of panels per pair (candidate, baseline), headed by the pair; one panel per cutoff, 3 a line
    blocks: dict[tuple[str, str], list[int]] = {}
    for i, c in enumerate(comps):
        blocks.setdefault((c["candidate"], c["baseline"]), []).append(i)
    ncol = min(3, max(len(v) for v in blocks.values()))
    cell_w = (WIDTH - 16) / ncol
    panel_h = 170
    probe = fit_ticks(0, 100, panel_h, horizontal=False, suffix="%", most=5)  # the widest share labels
    inner_left = y_margin(probe) + 4
    plot_w = cell_w - inner_left - 16
    xt = fit_ticks(lo, hi, plot_w, horizontal=True, most=7)
    edges = np.linspace(xt.lo, xt.hi, BINS + 1)
    shares = [np.histogram(d, bins=edges)[0] / d.size * 100 if d.size else np.zeros(BINS) for d in dists]
    peak = max(float(s.max()) for s in shares) if shares else 0.0
    yt = fit_ticks(0.0, peak if peak > 0 else 1.0, panel_h, horizontal=False, suffix="%", most=5)

    head_h = LABEL_SIZE + 16
    cell_h = 22 + panel_h + 16 + TICK_SIZE + LABEL_SIZE + 14
    y0 = top
    for (candidate, baseline), members in blocks.items():
        pair = f"{candidate} − {baseline}"
        svg.text(
            16,
            y0 + LABEL_SIZE + 6,
            fit_text(pair, LABEL_SIZE + 1, WIDTH - 32, bold=True),
            size=LABEL_SIZE + 1,
            weight="600",
            cls="block-title",
            full=pair,
        )
        y0 += head_h
        for n, i in enumerate(members):
            c, d, share = comps[i], dists[i], shares[i]
            r, col = divmod(n, ncol)
            cx, cy = 8 + col * cell_w, y0 + r * cell_h
            box = Box(cx + inner_left, cy + 22, plot_w, panel_h)
            name = f"{pair}, {metric_name(c['key'])}"
            svg.text(
                box.left + box.width / 2,
                cy + 14,
                fit_text(metric_name(c["key"]), LABEL_SIZE, plot_w),
                size=LABEL_SIZE,
                anchor="middle",
                cls="panel-title",
                full=name,
            )
            x = Scale(xt.lo, xt.hi, box.left, box.right)
            y = Scale(yt.lo, yt.hi, box.bottom, box.top)
            axis_y(svg, box, [(y(v), t) for v, t in zip(yt.values, yt.labels)], "share of resamples", panel=name)
            axis_x(
                svg, box, [(x(v), t) for v, t in zip(xt.values, xt.labels)], f"difference in mean {NAME}", panel=name
            )
            marks = []
            for b in range(BINS):
                if share[b] > 0:
                    x0, x1 = x(edges[b]), x(edges[b + 1])
                    marks.append(
                        f'<rect class="mark" x="{_n(x0)}" y="{_n(y(share[b]))}" width="{_n(x1 - x0)}" '
                        f'height="{_n(box.bottom - y(share[b]))}" fill="{HIST}"/>'
                    )
            marks.append(
                f'<line class="mark" x1="{_n(x(0))}" y1="{_n(box.top)}" x2="{_n(x(0))}" '
                f'y2="{_n(box.bottom)}" stroke="{ZERO}" stroke-width="1.2" fill="none"/>'
            )
            for v, colour, dash in (
                (_finite(c.get("ci_low")), INTERVAL, True),
                (_finite(c.get("ci_high")), INTERVAL, True),
                (_finite(c.get("delta")), OBSERVED, False),
            ):
                if v is not None:
                    marks.append(polyline([(x(v), box.top), (x(v), box.bottom)], colour, width=1.8, dashed=dash))
            svg.add("\n".join(marks))
            if not d.size:
                note(svg, box, "no defined resample")
        y0 += math.ceil(len(members) / ncol) * cell_h
    return svg.render(y0 + 4)


def draw(summary: dict, per_query, bootstrap) -> dict[str, str]:
    """Every figure the folder's data allow, in the order of :data:`FIGURES`: name -> SVG text."""
    out = {"ndcg_by_cutoff": ndcg_by_cutoff(summary)}
    diff = per_query_differences(summary, per_query) if per_query is not None else None
    if diff is not None:
        out["per_query_differences"] = diff
    boot = bootstrap_differences(summary, bootstrap)
    if boot is not None:
        out["bootstrap_differences"] = boot
    return out
