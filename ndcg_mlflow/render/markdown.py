"""``report.md``: a short markdown summary of an output folder (:class:`~.bundle.Bundle`), in the order of
``report.html``."""

from __future__ import annotations

from ..rules import metric_name
from .bundle import Bundle
from .format import (
    is_missing,
    listing,
    md_table,
    md_text,
    models_sentence,
    number,
    p_value,
    per_query_elsewhere,
    queries_line,
    wins_ties_losses,
)
from .judge_report import md_lead, md_section
from .sections import detection_note, md_sections


def render_markdown(bundle: Bundle) -> str:
    """``report.md``, in the order of ``report.html``: the answer, the systems x cutoffs table, the comparisons,
    then the rules. Every string from the data or the spec goes through :func:`format.md_text`."""
    s = bundle.summary
    keys = bundle.keys
    label = bundle.label
    lines = [f"# nDCG report — {_md(s['name'])}", "", *_md_lead(bundle), *md_lead(bundle), _md(queries_line(s)), ""]
    if bundle.per_query is None:
        lines += [_md(per_query_elsewhere(s)), ""]
    ci = bundle.has_ci
    rows = []
    for name, entry in s["systems"].items():
        cells = [_md(label(name))]
        for k in keys:
            m = entry[k]
            cells.append(
                number(m["mean"]) + (f" [{number(m.get('ci_low'))}, {number(m.get('ci_high'))}]" if ci else "")
            )
        first = entry[keys[0]]
        cells += [_md(first["n_evaluated"]), _md(first["n_excluded"]), _md(first["n_missing"])]
        rows.append(cells)
    lines += md_table(
        ["system", *(_md_label(k) for k in keys), "evaluated", "excluded", "missing"],
        rows,
        "l" + "r" * len(keys) + "rrr",
    )
    if bundle.models:
        lines += ["", _md(models_sentence(bundle.models))]
    comps = s.get("comparisons") or []
    if comps:
        lines += ["", f"Comparisons ({_md(s.get('comparison_family', ''))}):", ""]
        rows = []
        for c in comps:
            p = c.get("p_randomization")
            if is_missing(p):
                p = c.get("p_t_test")
            if is_missing(p):
                p = c.get("p_judged")
            rows.append(
                [
                    _md(label(c["candidate"])),
                    _md(c["cutoff"]),
                    number(c.get("delta"), signed=True),
                    f"[{number(c.get('ci_low'), signed=True)}, {number(c.get('ci_high'), signed=True)}]",
                    p_value(p),
                    p_value(c.get("p_corrected")),
                    _md(wins_ties_losses(c, "/")),
                ]
            )
        lines += md_table(
            ["candidate", "cutoff", "difference", "interval", "p", "p corrected", "W/T/L"], rows, "llrlrrl"
        )
    lines += md_section(bundle)
    lines += md_sections(bundle)
    if bundle.wins_losses:
        head = bundle.headline
        for block in bundle.wins_losses.get("comparisons", []):
            if block["key"] != head:
                continue
            lines += ["", f"{_md(label(block['candidate']))} vs {_md(label(block['baseline']))} at {_md_label(head)}:"]
            for kind in ("wins", "losses"):
                items = block.get(kind, [])[:3]
                text = listing([f"{_md(e['query_id'])} ({number(e['delta'], 3, signed=True)})" for e in items])
                lines.append(f"- largest {kind}: {text}")
    rules = [(k.split(".", 1)[1], v) for k, v in s.get("spec", {}).items() if k.startswith("metric.")]
    rules_text = "; ".join(f"{_md(k)} {_md(v)}" for k, v in rules if k != "preset")
    lines += ["", f"Rules: {rules_text}.", "", f"Spec sha256 {_md(s.get('spec_sha256', ''))}."]
    notes = s.get("notes") or []
    if notes:
        lines += ["", "Notes:"] + [f"- {_md(n)}" for n in notes]
    lines.append("")
    lines.append("The full report is `report.html`; its figures are also in `figures/` as SVG files.")
    return "\n".join(lines) + "\n"


def _md_lead(bundle: Bundle) -> list[str]:
    """The answer in markdown, as ``report.html`` opens (each block followed by an empty line): the decision, else
    each candidate against the baseline at the headline cutoff."""
    label = bundle.label
    d = bundle.summary.get("decision")
    if d:
        against = f" against the baseline {_md(label(d['candidates'][0]['baseline']))}" if d.get("candidates") else ""
        lines = [f"**Decision: {d['outcome'].upper()}**{against} — {_md(d['statement'])}", ""]
        for r in d.get("candidates", []):
            lines.append(
                f"- {_md(label(r['candidate']))}: {r['outcome'].upper()}, difference "
                f"{number(r.get('delta'), signed=True)} [{number(r.get('ci_low'), signed=True)}, "
                f"{number(r.get('ci_high'), signed=True)}]"
                + (f", p corrected {p_value(r.get('p_corrected'))}" if d.get("max_p") is not None else "")
                + f" ({_md(r['reason'])})"
                + (f" {_md(note)}" if (note := detection_note(bundle, r["candidate"])) else "")
            )
        return [*lines, ""]
    comps = [c for c in bundle.summary.get("comparisons") or [] if c["key"] == bundle.headline]
    if not comps:
        return []
    rows = [
        [
            _md(label(c["candidate"])),
            number(c.get("delta"), signed=True),
            f"[{number(c.get('ci_low'), signed=True)}, {number(c.get('ci_high'), signed=True)}]",
            p_value(c.get("p_corrected")),
            _md(wins_ties_losses(c, "/")),
        ]
        for c in comps
    ]
    return [
        f"Each candidate against the baseline {_md(label(comps[0]['baseline']))} at {_md_label(bundle.headline)}:",
        "",
        *md_table(["candidate", "difference", "interval", "p corrected", "W/T/L"], rows, "lrlrl"),
        "",
        *(f"{_md(label(c['candidate']))}: {_md(n)}\n" for c in comps if (n := detection_note(bundle, c["candidate"]))),
    ]


_md = md_text  # every string from the data in markdown, the same way in report.md and wins_losses.md


def _md_label(key: str) -> str:
    return metric_name(key, _md)
