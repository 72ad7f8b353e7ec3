"""An evaluation's output folder as the renderers read it (:class:`Bundle`): ``report.html`` and ``report.md``
(:mod:`.report`, :mod:`.markdown`) are made from it, right after a run, from artifacts downloaded from MLflow, or
for a comparison of logged runs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..rules import headline_key
from .format import system_label


@dataclass
class Bundle:
    """The content of an output folder."""

    folder: Path
    summary: dict
    per_query: Any  # DataFrame; None when the per-query rows stayed in Spark
    wins_losses: dict | None
    bootstrap: Any | None  # DataFrame
    sensitivity: Any | None  # DataFrame
    explanation: str

    @property
    def keys(self) -> list[str]:
        first: dict[str, Any] = next(iter(self.summary["systems"].values()), {})
        return list(first)

    @property
    def headline(self) -> str:
        return headline_key(self.keys)

    @property
    def models(self) -> dict:
        """What each model system's model URI resolved to (``summary.json`` ``models``)."""
        return self.summary.get("models") or {}

    @property
    def has_ci(self) -> bool:
        """Whether the means carry intervals."""
        entry: dict[str, Any] = next(iter(self.summary["systems"].values()), {})
        return any("ci_low" in v for v in entry.values())

    def label(self, system: str) -> str:
        """A system as the reports name it: a model system with its model (``challenger (ranker v2)``)."""
        return system_label(system, self.models)


def load_bundle(folder: str | Path) -> Bundle:
    import pandas as pd

    folder = Path(folder)
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    pq = folder / "per_query.csv"
    # absent when the per-query rows stayed in Spark (summary.json's per_query_path says where they are)
    per_query = (
        pd.read_csv(
            pq,
            dtype={"query_id": str, "system": str, "cutoff": str, "segment": str},
            keep_default_na=False,
            na_values=[""],
        )
        if pq.is_file()
        else None
    )
    wl = folder / "wins_losses.json"
    boot = folder / "bootstrap.csv"
    sens = folder / "sensitivity.csv"
    expl = folder / "explanation.txt"
    return Bundle(
        folder,
        summary,
        per_query,
        json.loads(wl.read_text(encoding="utf-8")) if wl.is_file() else None,
        pd.read_csv(boot) if boot.is_file() else None,
        # ids stay strings ("" for a system row's baseline); an empty number is an undefined mean (NaN)
        pd.read_csv(
            sens,
            dtype={
                "cutoff": str,
                "system": str,
                "baseline": str,
                "rule": str,
                "alternative": str,
                "kind": str,
                "declared": float,
                "value": float,
                "change": float,
            },
            keep_default_na=False,
            na_values={c: [""] for c in ("declared", "value", "change")},
        )
        if sens.is_file()
        else None,
        expl.read_text(encoding="utf-8") if expl.is_file() else "",
    )
