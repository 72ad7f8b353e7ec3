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

import math

import numpy as np

from ..rules import NAME, headline_key, key_label, metric_name
from .format import exact_share
from .svg import (
    BINS,
    HIST,
    INK,
    INTERVAL,
    LABEL_SIZE,
    MAX_POINTS,
    OBSERVED,
    TICK_GAP,
    TICK_SIZE,
    WIDTH,
    ZERO,
    Box,
    LegendItem,
    Scale,
    Svg,
    Ticks,
    axis_x,
    axis_y,
    block_title,
    draw_title,
    finite_or_none,
    fit_text,
    fit_ticks,
    fmt,
    gap_runs,
    legend,
    note,
    polyline,
    series_colour,
    text_width,
    xml_text,
    y_margin,
)

FIGURES = ("ndcg_by_cutoff", "per_query_differences", "bootstrap_differences", "segment_differences", "judge_views")


def ndcg_by_cutoff(summary: dict) -> str:
    """Mean nDCG of each system at each cutoff, with its confidence interval when there is one."""
    systems: dict[str, dict] = summary["systems"]
    keys = list(next(iter(systems.values()), {}))
    conf = summary.get("spec", {}).get("uncertainty.confidence")
    has_ci = any("ci_low" in m for entry in systems.values() for m in entry.values())
    level = f"{exact_share(conf)} " if has_ci and finite_or_none(conf) is not None else ""
    svg = Svg("ndcg_by_cutoff", "Mean nDCG by cutoff" + (f" (bars: {level}confidence interval)" if has_ci else ""))
    top = draw_title(svg, svg.title)
    items = [LegendItem(name, *_style(i, "point")) for i, name in enumerate(systems)]
    if has_ci:
        items.append(LegendItem(f"{level}confidence interval (in each system's colour)", INK, "interval"))
    top = legend(svg, items, top, 16, WIDTH - 32) + 8

    values = [
        v
        for entry in systems.values()
        for k in keys
        for v in (
            finite_or_none(entry[k].get("mean")),
            finite_or_none(entry[k].get("ci_low")),
            finite_or_none(entry[k].get("ci_high")),
        )
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
        colour, dashed = series_colour(i)
        off = (i - (n - 1) / 2) * spread
        pts = []
        for j, k in enumerate(keys):
            m = entry[k]
            mean = finite_or_none(m.get("mean"))
            px = xs[j] + off
            pts.append((px, None if mean is None else y(mean)))
            lo_, hi_ = finite_or_none(m.get("ci_low")), finite_or_none(m.get("ci_high"))
            if lo_ is not None and hi_ is not None:
                # an interval a rounding error off its mean still spans the mean: never a negative length
                a, b = (min(lo_, hi_), max(lo_, hi_)) if mean is None else (min(lo_, mean), max(hi_, mean))
                marks.append(
                    f'<g class="error-bar"><title>{xml_text(name)}, {xml_text(metric_name(k))}: '
                    f"[{lo_:.4f}, {hi_:.4f}]</title>"
                    f'<line class="mark" x1="{fmt(px)}" y1="{fmt(y(a))}" x2="{fmt(px)}" y2="{fmt(y(b))}" '
                    f'stroke="{colour}" stroke-width="1.5" fill="none"/>'
                    + "".join(
                        f'<line class="mark" x1="{fmt(px - 4)}" y1="{fmt(y(v))}" x2="{fmt(px + 4)}" '
                        f'y2="{fmt(y(v))}" stroke="{colour}" stroke-width="1.5" fill="none"/>'
                        for v in (a, b)
                    )
                    + "</g>"
                )
        for run in gap_runs(pts):
            marks.append(polyline(run, colour, dashed=dashed))
        for (px, py), k in zip(pts, keys):
            if py is not None:
                mean = float(entry[k]["mean"])
                marks.append(
                    f'<circle class="mark" cx="{fmt(px)}" cy="{fmt(py)}" r="4.5" fill="{colour}" '
                    f'stroke="#ffffff" stroke-width="1"><title>{xml_text(name)}, '
                    f"{xml_text(metric_name(k))}: {mean:.4f}</title></circle>"
                )
    svg.add("\n".join(marks))
    if not values:
        note(svg, box, "no defined mean to draw")
    return svg.render(box.bottom + 16 + TICK_SIZE + LABEL_SIZE + 14)


def _style(i: int, kind: str) -> tuple[str, str]:
    colour, dashed = series_colour(i)
    return colour, "dashed" if dashed else kind


def _category_labels(labels: list[str], band: float) -> list[str]:
    """Category labels, every n-th only (n the smallest that keeps them apart) when they do not all fit."""
    widest = max((text_width(t, TICK_SIZE) for t in labels), default=0.0) + TICK_GAP
    every = max(1, math.ceil(widest / band)) if band > 0 else 1
    return [t if j % every == 0 else "" for j, t in enumerate(labels)]


def per_query_differences(summary: dict, per_query) -> str | None:
    """The per-query differences of each comparison at the headline cutoff (the plan's paired differences,
    :func:`~ndcg_mlflow.outputs.plan_source.paired`), sorted; None without comparisons."""
    from ..outputs.plan_source import paired

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
            np.sort(paired(per_query, c["baseline"], c["candidate"], head)[0]),
        )
        for c in comps
    ]
    svg = Svg("per_query_differences", f"Per-query differences in {label}, sorted")
    top = draw_title(svg, svg.title)
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
        f'<line class="mark" x1="{fmt(box.left)}" y1="{fmt(y(0))}" x2="{fmt(box.right)}" y2="{fmt(y(0))}" '
        f'stroke="{ZERO}" stroke-width="1.2" fill="none"/>'
    ]
    for i, (_, d) in enumerate(series):
        if not d.size:
            continue
        colour, dashed = series_colour(i)
        idx = (
            np.arange(d.size)
            if d.size <= MAX_POINTS
            else np.unique(np.round(np.linspace(0, d.size - 1, MAX_POINTS)).astype(int))
        )
        pts = [(x(int(j) + 1), y(float(d[j]))) for j in idx]
        if len(pts) == 1:
            marks.append(f'<circle class="mark" cx="{fmt(pts[0][0])}" cy="{fmt(pts[0][1])}" r="3" fill="{colour}"/>')
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
    conf = finite_or_none(summary.get("spec", {}).get("uncertainty.confidence"))
    level = f"{exact_share(conf)} " if conf is not None else ""
    dists = [np.asarray(bootstrap[f"{c['candidate']}:{c['key']}"], dtype=float) for c in comps]
    dists = [d[np.isfinite(d)] for d in dists]
    svg = Svg("bootstrap_differences", "Bootstrap distributions of the differences of means")
    top = draw_title(svg, svg.title)
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
        for v in (finite_or_none(c.get("delta")), finite_or_none(c.get("ci_low")), finite_or_none(c.get("ci_high")))
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
        block_title(svg, pair, y0)
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
                        f'<rect class="mark" x="{fmt(x0)}" y="{fmt(y(share[b]))}" width="{fmt(x1 - x0)}" '
                        f'height="{fmt(box.bottom - y(share[b]))}" fill="{HIST}"/>'
                    )
            marks.append(
                f'<line class="mark" x1="{fmt(x(0))}" y1="{fmt(box.top)}" x2="{fmt(x(0))}" '
                f'y2="{fmt(box.bottom)}" stroke="{ZERO}" stroke-width="1.2" fill="none"/>'
            )
            for v, colour, dash in (
                (finite_or_none(c.get("ci_low")), INTERVAL, True),
                (finite_or_none(c.get("ci_high")), INTERVAL, True),
                (finite_or_none(c.get("delta")), OBSERVED, False),
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
    from .forest import segment_differences

    forest = segment_differences(summary)
    if forest is not None:
        out["segment_differences"] = forest
    from .judge_figure import judge_views

    views = judge_views(summary)
    if views is not None:
        out["judge_views"] = views
    return out
