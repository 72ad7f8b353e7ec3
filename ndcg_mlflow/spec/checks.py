"""The schema's checks of one value, shared by the sections of :mod:`.validate` and :mod:`.statistics`: a mapping's
keys (unknown keys refused with a "did you mean", required keys named), a choice, a non-empty string, a finite
number, a number or an integer in a range. Each error names the key path and what was expected (:class:`Ctx.fail`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..errors import SpecError, did_you_mean
from .yamltext import got


class Ctx:
    """Where a spec being validated came from: its file (for the messages) and the folder its paths are relative
    to."""

    def __init__(self, source: str | None, base_dir: Path):
        self.source = source
        self.base_dir = base_dir

    def fail(self, path: str, message: str) -> SpecError:
        return SpecError(path, message, self.source)


def key_text(key: Any) -> str:
    """A mapping key as it appears in a key path: characters that cannot be printed on one line as they are (line
    breaks such as LF, CR, U+0085 and U+2028, other controls, lone surrogates) shown as escapes."""
    if not isinstance(key, str):
        return repr(key)
    if key.isprintable():
        return key
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in key)


def mapping(
    ctx: Ctx, value: Any, path: str, required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``value`` as a mapping with every key of ``required`` and no key outside ``required + optional``."""
    if not isinstance(value, dict):
        raise ctx.fail(path, f"expected a mapping with keys {', '.join(required + optional)}. {got(value)}")
    allowed = required + optional
    for key in value:
        if not isinstance(key, str):
            raise ctx.fail(path, f"keys must be strings; found key {key!r}.")
        if key not in allowed:
            where = f"{path}.{key_text(key)}" if path else key_text(key)
            raise ctx.fail(where, f"unknown key{did_you_mean(key, allowed)}; allowed keys here: {', '.join(allowed)}.")
    for key in required:
        if key not in value:
            where = f"{path}.{key}" if path else key
            raise ctx.fail(where, "missing required key (no default is assumed: it changes the numbers).")
    return value


def choice(ctx: Ctx, value: Any, path: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        hint = did_you_mean(value, choices) if isinstance(value, str) else ""
        raise ctx.fail(path, f"must be one of {', '.join(choices)}{hint}. {got(value)}")
    return value


def text(ctx: Ctx, value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ctx.fail(path, f"must be a non-empty string. {got(value)}")
    return value


def finite(ctx: Ctx, value: Any, path: str, what: str) -> float:
    """A YAML number (not a boolean) that is a finite double."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ctx.fail(path, f"{what} must be a finite number. {got(value)}")
    try:
        number = float(value)  # an integer beyond the largest float overflows here
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ctx.fail(path, f"{what} must be a finite number (at most 1.8e308 in size). {got(value)}")
    return number


def integer(ctx: Ctx, value: Any, path: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bound = f"an integer in [{low}, {high}]" if high is not None else f"an integer >= {low}"
        raise ctx.fail(path, f"must be {bound}. {got(value)}")
    return value


def number_in(
    ctx: Ctx,
    value: Any,
    path: str,
    low: float,
    high: float,
    *,
    what: str,
    example: str,
    low_open: bool = False,
    high_open: bool = True,
    why: str = "",
) -> float:
    """A YAML number (not a boolean) in the interval from ``low`` to ``high``, each end open or closed as given
    (a NaN or an infinity is in none); the message names the interval, ``what`` the number is, an ``example`` and
    ``why`` (a sentence after it, or nothing)."""
    if not isinstance(value, bool) and isinstance(value, (int, float)):
        try:
            number = float(value)  # an integer beyond the largest float overflows here
        except OverflowError:
            number = math.inf
        above = number > low if low_open else number >= low
        below = number < high if high_open else number <= high
        if above and below:
            return number
    interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    tail = f" {why}" if why else ""
    raise ctx.fail(path, f"must be a number in {interval} ({what}), such as {example}.{tail} {got(value)}")
