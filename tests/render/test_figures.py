"""The report's figures (``ndcg_mlflow.render.figures``): nice ticks whose labels cannot touch, labelled axes, a legend
for every colour, escaped names, undefined values and empty series, the same bytes for the same input.

Pure: small summaries and tables built here; no folder, no MLflow. tests/render/test_report_browser.py measures the
drawn figures of the demo report in Chromium."""

from __future__ import annotations

import math
import re
from xml.etree import ElementTree

import numpy as np
import pandas as pd
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from ndcg_mlflow.render import figures as F
from ndcg_mlflow.render import svg as S

SVG = "{http://www.w3.org/2000/svg}"
KEYS = ("ndcg_at_5", "ndcg_at_10", "ndcg_at_all")


def summary_of(means: dict[str, list], *, ci: float | None = 0.03, comparisons: list | None = None) -> dict:
    """A summary.json of systems -> one mean per key of KEYS (None: undefined), intervals mean ± ci."""
    systems = {}
    for name, values in means.items():
        systems[name] = {}
        for key, m in zip(KEYS, values):
            entry = {"mean": m}
            if ci is not None:
                entry.update(ci_low=None if m is None else m - ci, ci_high=None if m is None else m + ci)
            systems[name][key] = entry
    return {"systems": systems, "spec": {"uncertainty.confidence": 0.95}, "comparisons": comparisons or []}


def comparison(candidate: str, baseline: str, key: str, delta: float, lo: float, hi: float) -> dict:
    return {"candidate": candidate, "baseline": baseline, "key": key, "delta": delta, "ci_low": lo, "ci_high": hi}


def judge_of(comparisons: list[dict], *, name: str | None = "judge", shift: float = -0.03) -> dict:
    """``summary.json``'s ``judge`` for ``comparisons``: the declared estimate is the comparison's, human-only a
    wider interval about it, judge-only the estimate moved by ``shift``."""
    views = []
    for c in comparisons:
        d, lo, hi = c["delta"], c["ci_low"], c["ci_high"]
        views.append(
            {
                **{k: c[k] for k in ("candidate", "baseline", "key")},
                "estimate": d,
                "ci_low": lo,
                "ci_high": hi,
                "human_only": {"estimate": d + 0.01, "ci_low": lo - 0.02, "ci_high": hi + 0.02},
                "judge_only": {"estimate": d + shift, "ci_low": lo + shift / 2, "ci_high": hi + shift / 2},
            }
        )
    return {"estimator": "ppi++", "name": name, "confidence": 0.95, "systems": {}, "comparisons": views}


def per_query_of(values: dict[str, list[float]], cutoff: str = "10") -> pd.DataFrame:
    rows = [
        {"system": s, "query_id": f"q{i}", "cutoff": cutoff, "ndcg": v}
        for s, vs in values.items()
        for i, v in enumerate(vs)
    ]
    return pd.DataFrame(rows, columns=["system", "query_id", "cutoff", "ndcg"])


def parse(svg: str) -> ElementTree.Element:
    return ElementTree.fromstring(svg)  # well-formed XML: what an image viewer (MLflow's) needs


def classes(el: ElementTree.Element) -> set[str]:
    return set((el.get("class") or "").split())


def all_text(el: ElementTree.Element) -> str:
    return "".join(el.itertext())


def colour_of(el: ElementTree.Element) -> str:
    """The colour a data mark or legend swatch shows: its fill for an area, its stroke for a line."""
    tag = el.tag.removeprefix(SVG)
    return (el.get("stroke") if tag in ("line", "polyline", "path") else el.get("fill")) or ""


def check_structure(svg: str) -> ElementTree.Element:
    """What every figure must have: axes with tick labels and a label each, a legend holding every colour the
    data marks use, and text only where XML allows it."""
    root = parse(svg)
    axes = [g for g in root.iter(f"{SVG}g") if "axis" in classes(g)]
    assert axes and {g.get("data-axis") for g in axes} == {"x", "y"}
    for g in axes:
        labels = [t for t in g.iter(f"{SVG}text") if "axis-label" in classes(t)]
        assert len(labels) == 1 and all_text(labels[0]).strip(), ElementTree.tostring(g)[:200]
        ticks = [all_text(t) for t in g.iter(f"{SVG}text") if "tick-label" in classes(t)]
        assert len(ticks) >= 2 and len(set(ticks)) == len(ticks), ticks
    legends = [g for g in root.iter(f"{SVG}g") if "legend" in classes(g)]
    assert len(legends) == 1
    items = [g for g in legends[0] if "legend-item" in classes(g)]
    assert items and all(all_text(i).strip() for i in items)
    swatches = {colour_of(el) for el in legends[0].iter() if "swatch" in classes(el)}
    marks = {colour_of(el) for el in root.iter() if "mark" in classes(el)}
    assert marks and marks <= swatches, (marks - swatches, swatches)
    return root


# --------------------------------------------------------------------------- nice numbers


@pytest.mark.parametrize(
    "lo, hi, count, labels",
    [
        (0.5845, 0.7746, 5, ["0.55", "0.60", "0.65", "0.70", "0.75", "0.80"]),
        (0.0, 1.0, 6, ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]),
        (-0.0374, 0.1332, 5, ["−0.05", "0.00", "0.05", "0.10", "0.15"]),
        (1, 233, 6, ["0", "50", "100", "150", "200", "250"]),
        (0, 17.3, 5, ["0", "5", "10", "15", "20"]),
    ],
)
def test_nice_ticks_by_hand(lo, hi, count, labels):
    assert list(S.nice_ticks(lo, hi, count).labels) == labels


def test_nice_ticks_of_an_empty_or_undefined_range():
    flat = S.nice_ticks(0.6181, 0.6181, 5)
    assert flat.lo < 0.6181 < flat.hi and len(set(flat.labels)) == len(flat.labels)
    assert S.nice_ticks(float("nan"), 1.0, 5).labels == S.nice_ticks(0.0, 1.0, 5).labels
    assert S.nice_ticks(0.0, 0.0, 3).lo < 0 < S.nice_ticks(0.0, 0.0, 3).hi


def test_a_zero_tick_is_never_negative():
    ticks = S.nice_ticks(-0.3, 0.2, 6)
    assert "0.0" in ticks.labels and "−0.0" not in ticks.labels and "-0.0" not in ticks.labels
    assert all("-" not in t for t in ticks.labels)  # a true minus sign, as in print


@settings(max_examples=examples(300))
@given(st.floats(-10, 10), st.floats(1e-6, 20), st.integers(2, 12))
def test_nice_ticks_cover_the_range_at_one_nice_step(lo, span, count):
    hi = lo + span
    ticks = S.nice_ticks(lo, hi, count)
    values = np.array(ticks.values)
    assert values[0] <= lo + 1e-12 and values[-1] >= hi - 1e-12
    steps = np.diff(values)
    assert np.allclose(steps, steps[0], rtol=1e-9, atol=1e-12 * max(1.0, abs(values).max()))
    step = (values[-1] - values[0]) / (len(values) - 1)
    mantissa = step / 10 ** math.floor(math.log10(step * (1 + 1e-6)))
    assert min(abs(mantissa - m) for m in (1, 2, 5)) < 1e-5, step
    # each label reads back as its value, and no two labels are equal
    assert len(set(ticks.labels)) == len(ticks.labels)
    for v, text in zip(ticks.values, ticks.labels):
        assert float(text.replace("−", "-")) == pytest.approx(v, abs=steps[0] * 1e-6)


@settings(max_examples=examples(300))
@given(st.floats(-1, 1), st.floats(1e-4, 2), st.floats(80, 900))
def test_fitted_tick_labels_cannot_touch(lo, span, length):
    """The labels of a horizontal axis, at their estimated width, leave at least TICK_GAP between them."""
    ticks = S.fit_ticks(lo, lo + span, length, horizontal=True)
    n = len(ticks.values)
    spacing = length / (ticks.hi - ticks.lo) * min(np.diff(ticks.values))
    widest = max(S.text_width(t, S.TICK_SIZE) for t in ticks.labels)
    # only an axis too short for two labels (and then just its two ends) may break the rule
    assert spacing >= widest + S.TICK_GAP or (n == 2 and length < widest + S.TICK_GAP)


def test_the_bootstrap_panel_that_collided():
    """The old figure's panel printed '−0.0250.000': a narrow axis over [−0.037, 0.133] now gets few enough
    labels, each readable apart."""
    ticks = S.fit_ticks(-0.0374, 0.1332, 225, horizontal=True, most=7)
    spacing = 225 / (len(ticks.values) - 1)
    assert spacing >= max(S.text_width(t, S.TICK_SIZE) for t in ticks.labels) + S.TICK_GAP
    assert 3 <= len(ticks.values) <= 5


# --------------------------------------------------------------------------- the figures


def test_ndcg_by_cutoff_structure_and_legend():
    s = summary_of({"bm25": [0.61, 0.63, 0.70], "reranker": [0.69, 0.70, 0.75]})
    root = check_structure(F.ndcg_by_cutoff(s))
    legend = next(g for g in root.iter(f"{SVG}g") if "legend" in classes(g))
    assert [all_text(i) for i in legend if "legend-item" in classes(i)] == [
        "bm25",
        "reranker",
        "95% confidence interval (in each system's colour)",
    ]
    x_axis = next(g for g in root.iter(f"{SVG}g") if g.get("data-axis") == "x")
    assert [all_text(t) for t in x_axis.iter(f"{SVG}text") if "tick-label" in classes(t)] == ["5", "10", "all"]
    points = [c for c in root.iter(f"{SVG}circle") if "mark" in classes(c)]
    assert len(points) == 6
    bars = [g for g in root.iter(f"{SVG}g") if "error-bar" in classes(g)]
    assert len(bars) == 6


def test_points_are_placed_by_their_value():
    """A higher mean is drawn higher (a smaller y), and the intervals are as long as their widths say."""
    s = summary_of({"a": [0.2, 0.4, 0.8]}, ci=None)
    s["systems"]["a"]["ndcg_at_5"].update(ci_low=0.1, ci_high=0.3)
    root = parse(F.ndcg_by_cutoff(s))
    ys = [float(c.get("cy")) for c in root.iter(f"{SVG}circle") if "mark" in classes(c)]
    assert ys[0] > ys[1] > ys[2]
    # linear: the gap 0.2 -> 0.4 is half the gap 0.4 -> 0.8
    assert (ys[0] - ys[1]) * 2 == pytest.approx(ys[1] - ys[2], abs=0.02)
    bar = next(g for g in root.iter(f"{SVG}g") if "error-bar" in classes(g))
    line = next(el for el in bar if el.tag == f"{SVG}line")
    length = float(line.get("y1")) - float(line.get("y2"))
    assert length == pytest.approx(ys[0] - ys[1], abs=0.02)  # the interval 0.1..0.3 spans 0.2, as 0.2..0.4 does


def test_undefined_means_leave_gaps_not_points():
    s = summary_of({"a": [0.5, None, 0.7], "b": [None, None, None]})
    svg = F.ndcg_by_cutoff(s)
    root = check_structure(svg)
    points = [c for c in root.iter(f"{SVG}circle") if "mark" in classes(c)]
    assert len(points) == 2  # a at 5 and at all; nothing of b
    assert "nan" not in svg.lower() and "none" not in svg.replace('fill="none"', "").lower()
    lines = [p for p in root.iter(f"{SVG}polyline") if "mark" in classes(p)]
    assert all(len(p.get("points").split()) == 1 for p in lines)  # the gap breaks a's line into single points


def test_nothing_defined_says_so():
    root = parse(F.ndcg_by_cutoff(summary_of({"a": [None, None, None]})))
    assert any("empty-note" in classes(t) for t in root.iter(f"{SVG}text"))


HOSTILE = [
    "<script>alert(1)</script>",
    "a\"b'c & d",
    "tab\tnew\nline\x00\x1b[31m",
    "検索システム" * 12,
    "]]><!--",
    "x" * 300,
]


def test_hostile_system_names_are_text():
    names = {n: [0.5 + i / 100, 0.6, 0.7] for i, n in enumerate(HOSTILE)}
    comps = [comparison(n, HOSTILE[0], "ndcg_at_10", 0.01, -0.02, 0.04) for n in HOSTILE[1:]]
    s = summary_of(names, comparisons=comps)
    s["segment_comparisons"] = [dict(c, segment=seg, n_paired=3) for c in comps for seg in HOSTILE]
    s["judge"] = judge_of(comps, name=HOSTILE[0])
    pq = per_query_of({n: [0.5, 0.6, 0.7] for n in HOSTILE})
    boot = pd.DataFrame({f"{n}:ndcg_at_10": np.linspace(-0.05, 0.05, 50) for n in HOSTILE[1:]})
    figs = F.draw(s, pq, boot)
    assert list(figs) == list(F.FIGURES)
    without = dict(s, segment_comparisons=[])
    assert list(F.draw(without, pq, boot)) == [f for f in F.FIGURES if f != "segment_differences"]
    for svg in figs.values():
        root = check_structure(svg)
        assert not any(el.tag.removeprefix(SVG) in ("script", "foreignObject", "a", "image") for el in root.iter())
        assert not re.search(r"<script", svg, flags=re.I) and "\x00" not in svg and "\x1b" not in svg
        text = all_text(root)
        assert "<script>alert(1)</script>" in text  # shown as typed
        for el in root.iter():
            for attr, value in el.attrib.items():
                assert not attr.lower().startswith("on") and "javascript:" not in value.lower()
    legend = next(g for g in parse(figs["ndcg_by_cutoff"]).iter(f"{SVG}g") if "legend" in classes(g))
    shown = [all_text(i) for i in legend if "legend-item" in classes(i)]
    # a long name is cut to fit the figure, and its whole text kept as the item's tooltip
    long = next(i for i in legend if "legend-item" in classes(i) and all_text(i).startswith("x" * 300))
    assert any(t.endswith("…") for t in shown) and long.find(f".//{SVG}title") is not None


def test_per_query_differences_sorted_with_zero_line():
    s = summary_of({"a": [0.5] * 3, "b": [0.6] * 3}, comparisons=[comparison("b", "a", "ndcg_at_10", 0.1, 0.0, 0.2)])
    pq = per_query_of({"a": [0.5, 0.9, 0.2, float("nan")], "b": [0.7, 0.1, 0.2, 0.9]})
    root = check_structure(F.per_query_differences(s, pq))
    line = next(p for p in root.iter(f"{SVG}polyline") if "mark" in classes(p))
    ys = [float(p.split(",")[1]) for p in line.get("points").split()]
    assert len(ys) == 3  # q3 is undefined for a: not paired
    assert ys[0] > ys[1] > ys[2]  # sorted ascending: -0.8, 0, +0.2 (y grows downwards)
    zero = next(el for el in root.iter(f"{SVG}line") if "mark" in classes(el))
    assert float(zero.get("y1")) == pytest.approx(ys[1])  # the tie sits on the zero line


def test_per_query_differences_without_pairs_say_so():
    s = summary_of({"a": [0.5] * 3, "b": [0.6] * 3}, comparisons=[comparison("b", "a", "ndcg_at_10", None, None, None)])
    pq = per_query_of({"a": [float("nan")] * 3, "b": [0.1, 0.2, 0.3]})
    root = parse(F.per_query_differences(s, pq))
    assert any("empty-note" in classes(t) for t in root.iter(f"{SVG}text"))
    assert F.per_query_differences(summary_of({"a": [0.5] * 3}), pq) is None  # no comparison, no figure


def test_bootstrap_panels_share_one_scale_and_mark_the_interval():
    comps = [comparison("b", "a", k, 0.05, 0.01, 0.09) for k in KEYS]
    s = summary_of({"a": [0.5] * 3, "b": [0.55] * 3}, comparisons=comps)
    rng = np.random.default_rng(0)
    boot = pd.DataFrame({f"b:{k}": rng.normal(0.05, 0.02, 500) for k in KEYS})
    boot.loc[3, "b:ndcg_at_5"] = np.nan  # an undefined resample is left out
    svg = F.bootstrap_differences(s, boot)
    root = check_structure(svg)
    x_axes = [g for g in root.iter(f"{SVG}g") if g.get("data-axis") == "x"]
    assert len(x_axes) == 3
    ticks = [[all_text(t) for t in g.iter(f"{SVG}text") if "tick-label" in classes(t)] for g in x_axes]
    assert ticks[0] == ticks[1] == ticks[2]  # one scale for every panel
    # each panel: the observed difference (solid) and two interval bounds (dashed)
    lines = [p for p in root.iter(f"{SVG}polyline") if "mark" in classes(p)]
    assert sum(p.get("stroke") == F.OBSERVED for p in lines) == 3
    assert sum(p.get("stroke-dasharray") is not None for p in lines) == 6
    bars = [r for r in root.iter(f"{SVG}rect") if "mark" in classes(r)]
    assert 3 * 5 < len(bars) <= 3 * F.BINS


def test_bootstrap_without_a_defined_resample_says_so():
    comps = [comparison("b", "a", "ndcg_at_10", float("nan"), float("nan"), float("nan"))]
    s = summary_of({"a": [0.5] * 3, "b": [0.55] * 3}, comparisons=comps)
    root = parse(F.bootstrap_differences(s, pd.DataFrame({"b:ndcg_at_10": [np.nan] * 10})))
    assert any("empty-note" in classes(t) for t in root.iter(f"{SVG}text"))
    assert F.bootstrap_differences(s, None) is None


def test_same_input_same_bytes_and_the_data_show():
    comps = [comparison("b", "a", "ndcg_at_10", 0.05, 0.01, 0.09)]
    s = summary_of({"a": [0.5, 0.6, 0.7], "b": [0.55, 0.65, 0.72]}, comparisons=comps)
    pq = per_query_of({"a": [0.5, 0.6, 0.1], "b": [0.7, 0.6, 0.2]})
    boot = pd.DataFrame({"b:ndcg_at_10": np.random.default_rng(1).normal(0.05, 0.02, 300)})
    first = F.draw(s, pq, boot)
    again = F.draw(
        summary_of({"a": [0.5, 0.6, 0.7], "b": [0.55, 0.65, 0.72]}, comparisons=[dict(comps[0])]),
        pq.copy(),
        boot.copy(),
    )
    assert first == again
    changed = F.draw(summary_of({"a": [0.5, 0.6, 0.7], "b": [0.55, 0.66, 0.72]}, comparisons=comps), pq, boot)
    assert changed["ndcg_by_cutoff"] != first["ndcg_by_cutoff"]
    assert changed["bootstrap_differences"] == first["bootstrap_differences"]


def test_a_long_series_is_drawn_through_at_most_max_points():
    n = 5000
    s = summary_of({"a": [0.5] * 3, "b": [0.6] * 3}, comparisons=[comparison("b", "a", "ndcg_at_10", 0, 0, 0)])
    rng = np.random.default_rng(2)
    pq = per_query_of({"a": rng.uniform(size=n).tolist(), "b": rng.uniform(size=n).tolist()})
    root = parse(F.per_query_differences(s, pq))
    line = next(p for p in root.iter(f"{SVG}polyline") if "mark" in classes(p))
    pts = line.get("points").split()
    assert len(pts) <= F.MAX_POINTS
    diffs = np.sort(pq[pq.system == "b"].ndcg.to_numpy() - pq[pq.system == "a"].ndcg.to_numpy())
    ys = [float(p.split(",")[1]) for p in pts]
    # the first and last points are the smallest and largest difference: the extremes are never dropped
    y_axis = next(g for g in root.iter(f"{SVG}g") if g.get("data-axis") == "y")
    ticks = [
        (float(t.get("y")), float(all_text(t).replace("−", "-")))
        for t in y_axis.iter(f"{SVG}text")
        if "tick-label" in classes(t)
    ]
    (y0, v0), (y1, v1) = ticks[0], ticks[-1]
    to_value = lambda y: v0 + (y - (y0 - S.TICK_SIZE * 0.35)) * (v1 - v0) / (y1 - y0)  # noqa: E731
    assert to_value(ys[0]) == pytest.approx(diffs[0], abs=0.01)
    assert to_value(ys[-1]) == pytest.approx(diffs[-1], abs=0.01)


# --------------------------------------------------------------------------- long labels, the overall row


def _fit_by_brute_force(text: str, size: float, width: float, bold: bool) -> str:
    """The longest prefix of the one-line text whose width with an ellipsis fits, each prefix measured whole."""
    text = " ".join(text.split())
    if S.text_width(text, size, bold=bold) <= width:
        return text
    fits = [k for k in range(len(text) + 1) if S.text_width(text[:k] + "…", size, bold=bold) <= width]
    return text[: max(fits, default=0)] + "…"


@settings(max_examples=examples(300), deadline=None)
@given(
    st.text(st.sampled_from("aiMW中 \t.x%"), max_size=60),
    st.sampled_from([13.0, 14.0, 17.0]),
    st.floats(0, 500),
    st.booleans(),
)
def test_fit_text_is_the_longest_prefix_that_fits(text, size, width, bold):
    assert S.fit_text(text, size, width, bold=bold) == _fit_by_brute_force(text, size, width, bold)


def test_fit_text_measures_each_character_of_a_long_label_once(monkeypatch):
    """A 200,000-character label: each character measured at most twice (the whole text, then the prefix), and
    the result the prefix of the length the widths give in closed form (a lowercase letter is EM wide)."""
    calls = []
    em = S._em
    monkeypatch.setattr(S, "_em", lambda c: calls.append(c) or em(c))
    n, size, width = 200_000, 14.0, 300.0
    shown = S.fit_text("a" * n, size, width)
    assert len(calls) <= 2 * n + 2
    k = math.floor((width / size - 1.0) / S.EM)  # (k * EM + 1) * size <= width: 30 letters and the ellipsis
    assert (k * S.EM + 1) * size < width < ((k + 1) * S.EM + 1) * size  # (far from the boundary either way)
    assert shown == "a" * k + "…"


def test_a_segment_called_overall_is_not_the_overall_row():
    """The forest plot's overall row reads apart from every segment's row, a segment called ``overall`` too."""
    from ndcg_mlflow.render.forest import segment_differences

    c = dict(comparison("b", "a", "ndcg_at_10", 0.01, -0.02, 0.04), n_paired=24)
    s = summary_of({"a": [0.5, 0.6, 0.7], "b": [0.5, 0.6, 0.7]}, comparisons=[c])
    s["segment_comparisons"] = [dict(c, segment=seg, n_paired=12) for seg in ("overall", "all queries, n=24")]
    root = parse(segment_differences(s))
    axis = next(g for g in root.iter(f"{SVG}g") if g.get("data-axis") == "y")
    rows = [all_text(t) for t in axis.iter(f"{SVG}text") if "tick-label" in classes(t)]
    assert len(rows) == 3 and len(set(rows)) == 3, rows
    assert rows[0] == "all queries, n=24" and rows[1:] == ["overall (n=12)", "all queries, n=24 (n=12)"]
    assert len([el for el in root.iter() if "overall-rule" in classes(el)]) == 1


def test_a_long_segment_name_is_cut_before_its_count():
    """A segment's name too long for the row is cut with ``…`` before its ``(n=…)``, which stays: two long names
    alike for the room's width still read apart by their counts, and no row label is wider than the room."""
    from ndcg_mlflow.render.forest import segment_differences

    room = S.WIDTH * 0.3  # (forest.ROOM)

    c = dict(comparison("b", "a", "ndcg_at_10", 0.01, -0.02, 0.04), n_paired=24)
    s = summary_of({"a": [0.5, 0.6, 0.7], "b": [0.5, 0.6, 0.7]}, comparisons=[c])
    long = "x" * 400
    s["segment_comparisons"] = [dict(c, segment=long + "1", n_paired=17), dict(c, segment=long + "2", n_paired=7)]
    root = parse(segment_differences(s))
    axis = next(g for g in root.iter(f"{SVG}g") if g.get("data-axis") == "y")
    rows = [all_text(t) for t in axis.iter(f"{SVG}text") if "tick-label" in classes(t)]
    assert rows[0] == "all queries, n=24"
    assert [r.endswith(f"… (n={n})") for r, n in zip(rows[1:], (17, 7))] == [True, True], rows
    assert all(r.startswith("xxxx") and set(r.split("…")[0]) == {"x"} for r in rows[1:]), rows
    assert all(S.text_width(r, S.TICK_SIZE) <= room for r in rows), rows


def test_the_judge_figure_draws_the_three_views_of_each_difference_and_marks_judge_only_not_valid():
    comps = [comparison("cand", "base", key, d, d - 0.02, d + 0.02) for key, d in zip(KEYS, (0.05, 0.10, 0.20))]
    s = summary_of({"base": [0.5, 0.6, 0.7], "cand": [0.55, 0.7, 0.9]}, comparisons=comps)
    assert "judge_views" not in F.draw(s, None, None)  # without a judge
    s["judge"] = judge_of(comps, shift=-0.04)
    svg = F.draw(s, None, None)["judge_views"]
    root = check_structure(svg)
    legend = all_text(next(g for g in root.iter(f"{SVG}g") if "legend" in classes(g)))
    assert "judge-only: not valid (the judge's bias is not corrected)" in legend and "ppi++" in legend
    groups = [g for g in root.iter(f"{SVG}g") if "view" in classes(g)]
    assert [g.get("data-view") for g in groups] == ["declared", "human-only", "judge-only"] * 3
    # every point at its value on one axis: x is linear in the value, the same scale for every view and key
    values, xs = [], []
    for g, (c, view) in zip(
        groups, [(c, v) for c in s["judge"]["comparisons"] for v in ("", "human_only", "judge_only")]
    ):
        dot = next(el for el in g if el.tag == f"{SVG}circle")
        values.append((c[view] if view else c)["estimate"])
        xs.append(float(dot.get("cx")))
        line = next(el for el in g if el.tag == f"{SVG}polyline")
        dashed = line.get("stroke-dasharray") is not None
        assert dashed == (view == "judge_only") == ("not-valid" in classes(g))
        assert (dot.get("fill") == "#ffffff") == (view == "judge_only")  # hollow
        assert "not valid" in all_text(g) if view == "judge_only" else "not valid" not in all_text(g)
    slope = (xs[-1] - xs[0]) / (values[-1] - values[0])
    assert slope > 0
    for v, x in zip(values, xs):
        assert x == pytest.approx(xs[0] + slope * (v - values[0]), abs=0.02)
