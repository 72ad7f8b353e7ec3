"""The forest plot of the segments: each candidate's difference from the baseline overall and in each segment, at
the headline cutoff, with its interval (the conventions of :mod:`ndcg_mlflow.render.figures`)."""

from __future__ import annotations

from ..rules import NAME, headline_key, metric_name
from ..statistics.decision import rule_threshold
from .format import exact_share
from .svg import (
    INTERVAL,
    LABEL_SIZE,
    MUTED,
    OBSERVED,
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
    fit_text,
    fit_ticks,
    fmt,
    legend,
    polyline,
    text_width,
)

ROW = 26  # px per row (the overall difference, then one per segment)
ROOM = WIDTH * 0.3  # the widest row label; a longer segment name is cut (the whole name is in the tables)


def overall_label(comparison: dict) -> str:
    """The overall row's label, ``all queries, n=24``: unlike any segment's row label (:func:`segment_label`,
    which ends with ``(n=…)``, its name cut where it is long), whatever the segments are called."""
    return f"all queries, n={comparison.get('n_paired', 0)}"


def segment_label(comparison: dict, room: float | None = None) -> str:
    """A segment's row label, ``<segment> (n=12)``; within ``room`` pixels (at the tick labels' size), the
    segment's name is cut (``…``) to leave room for its ``(n=12)``, which a long name never pushes out."""
    count = f" (n={comparison.get('n_paired', 0)})"
    if room is None:
        return f"{comparison['segment']}{count}"
    return fit_text(comparison["segment"], TICK_SIZE, room - text_width(count, TICK_SIZE)) + count


def segment_differences(summary: dict) -> str | None:
    """One panel per candidate: a row for the overall difference and one per segment (``summary.json``'s
    ``comparisons`` and ``segment_comparisons`` at the headline cutoff), each a point at the difference and a bar
    over its interval, with the zero line and, with a segments guardrail, its threshold; None without segments."""
    segs = summary.get("segment_comparisons") or []
    comps = summary.get("comparisons") or []
    if not segs or not comps:
        return None
    keys = list(dict.fromkeys(c["key"] for c in comps))
    key = headline_key(keys)
    conf = finite_or_none(summary.get("spec", {}).get("uncertainty.confidence"))
    guard = ((summary.get("decision") or {}).get("guardrails") or {}).get("segments")
    threshold = None
    if guard is not None and (summary.get("decision") or {}).get("key") == key:
        threshold = rule_threshold(guard["rule"], guard["margin"])
    blocks = []
    for c in comps:
        if c["key"] != key:
            continue
        rows = [(fit_text(overall_label(c), TICK_SIZE, ROOM), c)] + [
            (segment_label(s, ROOM), s) for s in segs if s["candidate"] == c["candidate"] and s["key"] == key
        ]
        blocks.append((c["candidate"], c["baseline"], rows))
    svg = Svg("segment_differences", f"Differences from the baseline by segment at {metric_name(key)}")
    top = draw_title(svg, svg.title)
    items = [
        LegendItem("difference of means", OBSERVED, "point"),
        LegendItem(f"{exact_share(conf)} interval" if conf is not None else "interval", OBSERVED, "interval"),
        LegendItem("zero: no difference", ZERO, "line"),
    ]
    if threshold is not None:
        items.append(LegendItem("segments guardrail's threshold", INTERVAL, "dashed"))
    top = legend(svg, items, top, 16, WIDTH - 32) + 6
    values = [0.0] + ([threshold] if threshold is not None else [])
    for _, _, rows in blocks:
        for _, r in rows:
            values += [v for v in (finite_or_none(r.get(k)) for k in ("delta", "ci_low", "ci_high")) if v is not None]
    labels = [n for _, _, rows in blocks for n, _ in rows]  # (each fitted to ROOM)
    left = 16 + LABEL_SIZE * 1.6 + 14 + max(text_width(t, TICK_SIZE) for t in labels)
    box_w = WIDTH - left - 24
    xt = fit_ticks(min(values), max(values), box_w, horizontal=True, most=7)
    x = Scale(xt.lo, xt.hi, left, left + box_w)
    y0 = top
    for candidate, baseline, rows in blocks:
        pair = f"{candidate} − {baseline}"
        block_title(svg, pair, y0)
        y0 += LABEL_SIZE + 16
        box = Box(left, y0, box_w, ROW * len(rows))
        marks = [
            f'<line class="mark" x1="{fmt(x(0))}" y1="{fmt(box.top)}" x2="{fmt(x(0))}" y2="{fmt(box.bottom)}" '
            f'stroke="{ZERO}" stroke-width="1.2" fill="none"/>'
        ]
        if len(rows) > 1:  # the overall row set apart from the segments' rows
            marks.append(
                f'<line class="overall-rule" x1="{fmt(box.left)}" y1="{fmt(box.top + ROW)}" x2="{fmt(box.right)}" '
                f'y2="{fmt(box.top + ROW)}" stroke="{MUTED}" stroke-width="1" fill="none"/>'
            )
        if threshold is not None:
            marks.append(
                polyline([(x(threshold), box.top), (x(threshold), box.bottom)], INTERVAL, width=1.5, dashed=True)
            )
        ticks = []
        for i, (name, r) in enumerate(rows):
            cy = box.top + ROW * i + ROW / 2
            ticks.append((cy, name))
            lo, hi, d = (finite_or_none(r.get(k)) for k in ("ci_low", "ci_high", "delta"))
            if lo is not None and hi is not None:
                marks.append(polyline([(x(lo), cy), (x(hi), cy)], OBSERVED, width=2))
            if d is not None:
                marks.append(f'<circle class="mark" cx="{fmt(x(d))}" cy="{fmt(cy)}" r="4.5" fill="{OBSERVED}"/>')
            else:
                svg.text(x(0) + 8, cy + TICK_SIZE * 0.35, "no paired query", size=TICK_SIZE, fill=MUTED)
        axis_y(svg, box, ticks, "segment", panel=pair)
        svg.add("\n".join(marks))
        axis_x(
            svg,
            box,
            [(x(v), t) for v, t in zip(xt.values, xt.labels)],
            f"difference in mean {NAME}",
            panel=pair,
            grid=True,
        )
        y0 = box.bottom + 16 + TICK_SIZE + LABEL_SIZE + 18
    return svg.render(y0 + 4)
