"""SVG drawing for the report's figures: text measured and fitted, nice tick numbers, axes, legends, lines, marks.

Pure functions and small value types; :mod:`ndcg_mlflow.render.figures` draws the figures with them. The same input
gives the same bytes (no random ids, no dates, numbers written to fixed precision).
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..escapes import CONTROL_CHARACTERS

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


# what XML 1.0 forbids (form feeds, non-characters, surrogates) and what a display could act on, as in markdown and
# HTML (format.CONTROL_CHARACTERS)
_NOT_XML = re.compile(f"[{CONTROL_CHARACTERS}\x0c\ufffe\uffff\ud800-\udfff]")


def xml_text(value: Any) -> str:
    """``value`` as the text of an SVG element or attribute: escaped, without the characters XML 1.0 forbids."""
    return html.escape(_NOT_XML.sub("\ufffd", str(value)), quote=True)


def text_width(text: str, size: float, *, bold: bool = False) -> float:
    """An upper estimate of the width of ``text`` at font ``size`` (px), from the widths of DejaVu Sans (the
    widest of the usual sans fonts): wide characters (``m``, ``W``, ``%``, the minus sign, East Asian ones) one
    em, capitals 0.78, narrow ones (``i``, ``l``, punctuation) 0.45, anything else :data:`EM`; bold 12% more."""
    return _px(sum(_em(c) for c in text), size, bold)


def _px(ems: float, size: float, bold: bool) -> float:
    """A width in em at font ``size``, in pixels (bold 12% wider)."""
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
    """``text`` on one line, cut (with an ellipsis) to fit ``width`` pixels at font ``size``: its longest prefix
    that fits with the ellipsis (none when not even the ellipsis fits). Each character is measured once, so the
    time is linear in the text's length."""
    text = " ".join(str(text).split())
    if text_width(text, size, bold=bold) <= width:
        return text
    ellipsis = _em("…")
    ems = 0.0
    for k, c in enumerate(text):  # the prefix of k characters fits; does the one of k + 1?
        ems += _em(c)
        if _px(ems + ellipsis, size, bold) > width:  # (text_width's arithmetic, in its order)
            return text[:k] + "…"
    return text + "…"  # (not reached: the whole text did not fit)


def fmt(x: float) -> str:
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
        attrs = f'x="{fmt(x)}" y="{fmt(y)}" font-size="{fmt(size)}" fill="{fill}"'
        if anchor != "start":
            attrs += f' text-anchor="{anchor}"'
        if weight:
            attrs += f' font-weight="{weight}"'
        if cls:
            attrs += f' class="{cls}"'
        if rotate:
            attrs += f' transform="rotate(-90 {fmt(x)} {fmt(y)})"'
        tip = f"<title>{xml_text(full)}</title>" if full is not None and full != text else ""
        self.add(f"<text {attrs}>{tip}{xml_text(text)}</text>")

    def render(self, height: float) -> str:
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{fmt(height)}" '
            f'viewBox="0 0 {WIDTH} {fmt(height)}" role="img" class="ndcg-figure" data-figure="{self.name}" '
            f'font-family="{FONT}">'
        )
        return "\n".join(
            [
                head,
                f"<title>{xml_text(self.title)}</title>",
                f'<rect width="{WIDTH}" height="{fmt(height)}" fill="#ffffff"/>',
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
            f'<g class="legend-item">{sw}<text x="{fmt(x + swatch + 6)}" y="{fmt(cy + LEGEND_SIZE * 0.35)}" '
            f'font-size="{LEGEND_SIZE}" fill="{INK}">{tip}{xml_text(label)}</text></g>'
        )
        x += w
    out.append("</g>")
    svg.add("\n".join(out))
    return y + row_height


def _swatch(item: LegendItem, x: float, cy: float, width: float) -> str:
    if item.kind == "bar":
        return (
            f'<rect class="swatch" x="{fmt(x + 4)}" y="{fmt(cy - 6)}" width="{fmt(width - 8)}" height="12" '
            f'fill="{item.colour}"/>'
        )
    if item.kind == "interval":  # an error bar: a vertical line with caps
        mid = x + width / 2
        return (
            f'<path class="swatch" d="M{fmt(mid)} {fmt(cy - 8)}V{fmt(cy + 8)}M{fmt(mid - 4)} {fmt(cy - 8)}'
            f'H{fmt(mid + 4)}M{fmt(mid - 4)} {fmt(cy + 8)}H{fmt(mid + 4)}" stroke="{item.colour}" '
            f'stroke-width="1.5" fill="none"/>'
        )
    dash = ' stroke-dasharray="5 3"' if item.kind == "dashed" else ""
    line = (
        f'<line class="swatch" x1="{fmt(x)}" y1="{fmt(cy)}" x2="{fmt(x + width)}" y2="{fmt(cy)}" '
        f'stroke="{item.colour}" stroke-width="2"{dash} fill="none"/>'
    )
    if item.kind == "point":
        line += f'<circle class="swatch" cx="{fmt(x + width / 2)}" cy="{fmt(cy)}" r="4" fill="{item.colour}"/>'
    return line


def axis_x(
    svg: Svg, box: Box, ticks: Sequence[tuple[float, str]], label: str, *, panel: str = "", grid: bool = False
) -> None:
    """A horizontal axis under ``box``: ticks at pixel positions with their labels, and the axis label."""
    out = [
        f'<g class="axis" data-axis="x"{_panel(panel)}>',
        f'<line x1="{fmt(box.left)}" y1="{fmt(box.bottom)}" x2="{fmt(box.right)}" y2="{fmt(box.bottom)}" '
        f'stroke="{INK}" stroke-width="1"/>',
    ]
    for px, text in ticks:
        if grid:
            out.append(
                f'<line x1="{fmt(px)}" y1="{fmt(box.top)}" x2="{fmt(px)}" y2="{fmt(box.bottom)}" '
                f'stroke="{GRID}" stroke-width="1"/>'
            )
        out.append(
            f'<line x1="{fmt(px)}" y1="{fmt(box.bottom)}" x2="{fmt(px)}" y2="{fmt(box.bottom + 5)}" '
            f'stroke="{INK}" stroke-width="1"/>'
        )
        out.append(
            f'<text class="tick-label" x="{fmt(px)}" y="{fmt(box.bottom + 8 + TICK_SIZE)}" '
            f'font-size="{TICK_SIZE}" text-anchor="middle" fill="{INK}">{xml_text(text)}</text>'
        )
    shown = fit_text(label, LABEL_SIZE, box.width)
    out.append(
        f'<text class="axis-label" x="{fmt(box.left + box.width / 2)}" '
        f'y="{fmt(box.bottom + 16 + TICK_SIZE + LABEL_SIZE)}" font-size="{LABEL_SIZE}" text-anchor="middle" '
        f'fill="{INK}">{xml_text(shown)}</text>'
    )
    out.append("</g>")
    svg.add("\n".join(out))


def axis_y(svg: Svg, box: Box, ticks: Sequence[tuple[float, str]], label: str, *, panel: str = "") -> None:
    """A vertical axis left of ``box`` with horizontal grid lines, tick labels and the (rotated) axis label."""
    out = [f'<g class="axis" data-axis="y"{_panel(panel)}>']
    for py, text in ticks:
        out.append(
            f'<line x1="{fmt(box.left)}" y1="{fmt(py)}" x2="{fmt(box.right)}" y2="{fmt(py)}" '
            f'stroke="{GRID}" stroke-width="1"/>'
        )
        out.append(
            f'<line x1="{fmt(box.left - 5)}" y1="{fmt(py)}" x2="{fmt(box.left)}" y2="{fmt(py)}" '
            f'stroke="{INK}" stroke-width="1"/>'
        )
        out.append(
            f'<text class="tick-label" x="{fmt(box.left - 8)}" y="{fmt(py + TICK_SIZE * 0.35)}" '
            f'font-size="{TICK_SIZE}" text-anchor="end" fill="{INK}">{xml_text(text)}</text>'
        )
    out.append(
        f'<line x1="{fmt(box.left)}" y1="{fmt(box.top)}" x2="{fmt(box.left)}" y2="{fmt(box.bottom)}" '
        f'stroke="{INK}" stroke-width="1"/>'
    )
    widest = max((text_width(t, TICK_SIZE) for _, t in ticks), default=0.0)
    x = box.left - 14 - widest - LABEL_SIZE * 0.3
    shown = fit_text(label, LABEL_SIZE, box.height)
    out.append(
        f'<text class="axis-label" x="{fmt(x)}" y="{fmt(box.top + box.height / 2)}" font-size="{LABEL_SIZE}" '
        f'text-anchor="middle" fill="{INK}" transform="rotate(-90 {fmt(x)} {fmt(box.top + box.height / 2)})">'
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
    coords = " ".join(f"{fmt(x)},{fmt(y)}" for x, y in points)
    return (
        f'<polyline class="{cls}" points="{coords}" fill="none" stroke="{colour}" stroke-width="{fmt(width)}" '
        f'stroke-linejoin="round"{dash}/>'
    )


def gap_runs(points: Sequence[tuple[float, float | None]]) -> list[list[tuple[float, float]]]:
    """Consecutive defined points: an undefined value breaks the line."""
    out: list[list[tuple[float, float]]] = [[]]
    for x, y in points:
        if y is None:
            if out[-1]:
                out.append([])
        else:
            out[-1].append((x, y))
    return [r for r in out if r]


def finite_or_none(x: Any) -> float | None:
    """A defined number, or None for None, NaN, infinities and anything not a number."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def series_colour(i: int) -> tuple[str, bool]:
    return PALETTE[i % len(PALETTE)], (i // len(PALETTE)) % 2 == 1


def block_title(svg: Svg, text: str, top: float) -> None:
    """The bold heading of a block of panels (a candidate against the baseline), below ``top``."""
    svg.text(
        16,
        top + LABEL_SIZE + 6,
        fit_text(text, LABEL_SIZE + 1, WIDTH - 32, bold=True),
        size=LABEL_SIZE + 1,
        weight="600",
        cls="block-title",
        full=text,
    )


def draw_title(svg: Svg, text: str) -> float:
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
