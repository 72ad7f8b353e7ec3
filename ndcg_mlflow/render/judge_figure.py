"""The figure of an evaluation with a judge: each comparison's difference at each key under its three views side by
side on one axis, the declared estimator's, the human-only and the judge-only (not valid: drawn dashed and hollow,
and said so in the legend), each with its interval (the conventions of :mod:`ndcg_mlflow.render.figures`)."""

from __future__ import annotations

from ..rules import NAME, metric_name
from .format import exact_share, number
from .svg import (
    LABEL_SIZE,
    MUTED,
    OBSERVED,
    PALETTE,
    TICK_SIZE,
    WIDTH,
    ZERO,
    Box,
    LegendItem,
    Scale,
    Svg,
    axis_x,
    axis_y,
    block_title,
    draw_title,
    finite_or_none,
    fit_ticks,
    fmt,
    legend,
    polyline,
    text_width,
    xml_text,
)

GAP = 20  # px between two views of one key, each a row labelled with its key and view (13 px text, 1.2 high)
ROW = 3 * GAP + 10  # px per key: the three views, one above the other
HUMAN = PALETTE[2]
NOT_VALID = "judge-only: not valid (the judge's bias is not corrected)"
# each view: its field in summary.json's judge comparison ("": the declared estimate, the comparison itself), its
# name, colour and whether it is drawn dashed and hollow (the view that is not valid)
VIEWS = (
    ("", "declared", OBSERVED, False),
    ("human_only", "human-only", HUMAN, False),
    ("judge_only", "judge-only", MUTED, True),
)


def _row_label(key: str, view: str, estimator: str) -> str:
    """A row's label: its key and view, ``nDCG@10 · ppi++``, ``nDCG@10 · judge-only (not valid)``."""
    shown = {"declared": estimator, "judge-only": "judge-only (not valid)"}.get(view, view)
    return f"{metric_name(key)} · {shown}"


def judge_views(summary: dict) -> str | None:
    """One block per candidate against the baseline (``summary.json``'s ``judge`` comparisons), a row per key
    holding the declared estimate, the human-only and the judge-only difference with their intervals, the zero line
    across; None without a judge or without comparisons."""
    judge = summary.get("judge") or {}
    comps = judge.get("comparisons") or []
    if not comps:
        return None
    estimator = str(judge.get("estimator", ""))
    conf = finite_or_none(judge.get("confidence"))
    level = f"{exact_share(conf)} " if conf is not None else ""
    blocks: dict[tuple[str, str], list[dict]] = {}
    for c in comps:
        blocks.setdefault((c["candidate"], c["baseline"]), []).append(c)
    svg = Svg("judge_views", f"The three views of each difference: {estimator}, human-only and judge-only (not valid)")
    top = draw_title(svg, svg.title)
    items = [
        LegendItem(f"declared estimator ({estimator}), {level}interval", OBSERVED, "point"),
        LegendItem(f"human-only (the labelled queries alone), {level}interval", HUMAN, "point"),
        LegendItem(NOT_VALID, MUTED, "dashed"),
        LegendItem("zero: no difference", ZERO, "line"),
    ]
    top = legend(svg, items, top, 16, WIDTH - 32) + 6
    values = [0.0]
    for c in comps:
        for field, *_ in VIEWS:
            view = c.get(field) if field else c
            found = (finite_or_none((view or {}).get(k)) for k in ("estimate", "ci_low", "ci_high"))
            values += [v for v in found if v is not None]
    labels = [_row_label(c["key"], name, estimator) for c in comps for _, name, _, _ in VIEWS]
    left = 16 + LABEL_SIZE * 1.6 + 14 + max(text_width(t, TICK_SIZE) for t in labels)
    box_w = WIDTH - left - 24
    xt = fit_ticks(min(values), max(values), box_w, horizontal=True, most=7)
    x = Scale(xt.lo, xt.hi, left, left + box_w)
    y0 = top
    for (candidate, baseline), rows in blocks.items():
        pair = f"{candidate} − {baseline}"
        block_title(svg, pair, y0)
        y0 += LABEL_SIZE + 16
        box = Box(left, y0, box_w, ROW * len(rows))
        marks = [
            f'<line class="mark" x1="{fmt(x(0))}" y1="{fmt(box.top)}" x2="{fmt(x(0))}" y2="{fmt(box.bottom)}" '
            f'stroke="{ZERO}" stroke-width="1.2" fill="none"/>'
        ]
        ticks = []
        for i, c in enumerate(rows):
            centre = box.top + ROW * i + ROW / 2
            for j, (field, name, colour, hollow) in enumerate(VIEWS):
                view = (c.get(field) if field else c) or {}
                cy = centre + (j - 1) * GAP
                ticks.append((cy, _row_label(c["key"], name, estimator)))
                lo, hi, d = (finite_or_none(view.get(k)) for k in ("ci_low", "ci_high", "estimate"))
                shown = f"{estimator} (declared)" if not field else name + (", not valid" if hollow else "")
                tip = (
                    f"<title>{xml_text(pair)}, {xml_text(metric_name(c['key']))}, {xml_text(shown)}: "
                    + number(d, signed=True)
                    + ("" if lo is None or hi is None else f" [{lo:+.4f}, {hi:+.4f}]")
                    + "</title>"
                )
                parts = []
                if lo is not None and hi is not None:
                    parts.append(polyline([(x(lo), cy), (x(hi), cy)], colour, width=2, dashed=hollow))
                if d is not None:
                    # (a hollow point is no colour of its own: the legend's dashed line in its colour explains it)
                    fill, cls = ("#ffffff", "hollow") if hollow else (colour, "mark")
                    parts.append(
                        f'<circle class="{cls}" cx="{fmt(x(d))}" cy="{fmt(cy)}" r="4" fill="{fill}" '
                        f'stroke="{colour}" stroke-width="1.5"/>'
                    )
                cls = "view not-valid" if hollow else "view"
                marks.append(f'<g class="{cls}" data-view="{name}">{tip}{"".join(parts)}</g>')
        axis_y(svg, box, ticks, "cutoff and view", panel=pair)
        svg.add("\n".join(marks))
        axis_x(
            svg,
            box,
            [(x(v), t) for v, t in zip(xt.values, xt.labels)],
            f"difference in mean {NAME} (candidate − baseline)",
            panel=pair,
            grid=True,
        )
        y0 = box.bottom + 16 + TICK_SIZE + LABEL_SIZE + 18
    return svg.render(y0 + 4)
