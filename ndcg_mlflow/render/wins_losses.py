"""``wins_losses.md``: the largest per-query wins and losses of each comparison, from the analysis's entries."""

from __future__ import annotations

from typing import Any

from ..rules import metric_name
from ..statistics.comparisons import Analysis
from .format import listing, md_html, md_table, md_text, number

_md = md_text  # the same escaping as report.md


def wins_losses_markdown(result, analysis: Analysis) -> str:
    """A readable rendering of the largest wins and losses; every string from the data or the spec goes
    through :func:`format.md_text` (:func:`format.md_html` inside the raw ``<summary>`` element)."""
    lines = [f"# Largest per-query wins and losses — {_md(result.spec.name)}", ""]
    if not analysis.wins_losses:
        lines.append("No comparison was declared (spec section `comparison`).")
        return "\n".join(lines) + "\n"
    for block in analysis.wins_losses:
        title = f"## {_md(block['candidate'])} vs {_md(block['baseline'])}, {metric_name(block['key'], _md)}"
        lines += [title, ""]
        for kind in ("wins", "losses"):
            items = block[kind]
            lines.append(f"### {kind.capitalize()} ({len(items)})")
            lines.append("")
            if not items:
                lines += ["(none)", ""]
                continue
            lines += md_table(
                ["query", "weight", "baseline", "candidate", "delta", "relevant entered top K", "relevant left top K"],
                [
                    [
                        _md(e["query_id"]),
                        f"{e['weight']:g}",
                        number(e["baseline_ndcg"]),
                        number(e["candidate_ndcg"]),
                        number(e["delta"], signed=True),
                        listing([_md(d) for d in e["relevant_entered"]]),
                        listing([_md(d) for d in e["relevant_left"]]),
                    ]
                    for e in items
                ],
                "lrrrrll",
            )
            lines.append("")
            for e in items:
                lines.append(f"<details><summary>{md_html(e['query_id'])}: top {e['shown']} of both systems</summary>")
                lines.append("")
                lines += md_table(
                    ["rank", "baseline doc (grade)", "candidate doc (grade)"],
                    [
                        [
                            str(r + 1),
                            _doc_cell(e["baseline_top"], r, "left_top_k", "⬇ left"),
                            _doc_cell(e["candidate_top"], r, "entered_top_k", "⬆ entered"),
                        ]
                        for r in range(max(len(e["baseline_top"]), len(e["candidate_top"])))
                    ],
                    "rll",
                )
                lines += ["", "</details>", ""]
    return "\n".join(lines) + "\n"


def _doc_cell(top: list[dict[str, Any]], r: int, flag: str, mark: str) -> str:
    if r >= len(top):
        return ""
    e = top[r]
    grade = "unjudged" if e["grade"] is None else f"{e['grade']:g}"
    return f"{_md(e['doc_id'])} ({grade}){' ' + mark if e.get(flag) else ''}"
