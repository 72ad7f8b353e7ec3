"""The spec's text: YAML read safely (no Python objects, no alias bombs, merge keys or keys written twice),
written back, and recorded without credentials; and a parsed value as shown in a message."""

from __future__ import annotations

import re
from typing import Any

from ..errors import SpecError


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }.get(type(value), type(value).__name__)


def short_repr(value: Any) -> str:
    """A bounded repr: never walks more than a few levels and items of a (possibly huge) value."""
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxdict, r.maxtuple, r.maxset = 3, 6, 6, 6, 6
    r.maxstring = r.maxother = r.maxlong = 70
    try:
        text = r.repr(value)
    except ValueError:  # an integer too long to print (Python refuses more than 4300 digits)
        text = f"<an integer of {value.bit_length()} bits>" if isinstance(value, int) else "<unprintable>"
    return text if len(text) <= 80 else text[:77] + "..."


# a number with an exponent that YAML 1.1 reads as text: no dot (1e-3), or no sign after the e (1.0e308)
_EXPONENT_TEXT = re.compile(r"([-+]?[0-9]+)(\.[0-9]*)?([eE])([-+]?)([0-9]+)")


def got(value: Any) -> str:
    """What was given, and its type; for text that YAML 1.1 read from a number written with an exponent and no dot
    (``1e-3``) or no sign after the e (``1.0e308``), how to write the number (``1.0e-3``, ``1.0e+308``)."""
    m = _EXPONENT_TEXT.fullmatch(value) if isinstance(value, str) else None
    hint = ""
    if m:
        number = f"{m[1]}{m[2] if m[2] and len(m[2]) > 1 else '.0'}{m[3]}{m[4] or '+'}{m[5]}"
        hint = (
            f" (YAML reads a number whose exponent has no dot before it or no sign after the e as text: write "
            f"{number} for the number.)"
        )
    return f"Got {short_repr(value)} ({_type_name(value)}) instead.{hint}"


MAX_ALIASES = 50


def _loader() -> type:
    import yaml

    class Loader(yaml.SafeLoader):
        """Safe YAML (no Python objects) that also refuses alias bombs: at most MAX_ALIASES aliases."""

        aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_ALIASES:
                    mark = self.peek_event().start_mark
                    raise yaml.composer.ComposerError(
                        None, None, f"more than {MAX_ALIASES} aliases (*name): a spec does not need them", mark
                    )
            return super().compose_node(parent, index)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            """Refuse merge keys, and a key written twice in one mapping (YAML would silently keep the last)."""
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        "a merge key (<<) is not supported in a spec: write the keys out in full",
                        key_node.start_mark,
                    )
            self.flatten_mapping(node)  # only turns a '=' key into a plain string now
            seen: dict = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None,
                            None,
                            f"key {key!r} is written twice in one mapping (first at line {seen[key] + 1})",
                            key_node.start_mark,
                        )
                    seen[key] = key_node.start_mark.line
                except TypeError:  # an unhashable key: the base class reports it
                    pass
            return super().construct_mapping(node, deep=deep)

    return Loader


def safe_yaml(text: str, source: str) -> Any:
    import yaml

    try:
        return yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError("", f"not valid YAML{where}: {problem}", source) from None
    except RecursionError:
        raise SpecError("", "not valid YAML: nested too deeply.", source) from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as exc:
        # PyYAML's constructors of explicit tags (!!float, !!int, !!bool, !!timestamp ...) raise these
        raise SpecError(
            "", f"not valid YAML: a value could not be read ({type(exc).__name__}: {short_repr(str(exc))}).", source
        ) from None


def plain_values(raw: Any) -> Any:
    """A spec given as a mapping, with each numpy value as the Python value it holds (``np.int64(10)`` -> ``10``,
    ``np.float64(0.05)`` -> ``0.05``, ``np.bool_`` -> ``bool``, an array -> a list): the number itself, validated
    and recorded (YAML) as if written so. Everything else as given (the checks then say what they expect)."""
    import sys

    np = sys.modules.get("numpy")  # (a numpy value can only exist once numpy is imported)
    if np is None:
        return raw
    seen: dict[int, Any] = {}

    def walk(value: Any) -> Any:
        if isinstance(value, (np.generic, np.ndarray)):
            return walk(value.tolist()) if isinstance(value, np.ndarray) else value.item()
        if isinstance(value, (dict, list, tuple)):
            if id(value) in seen:  # (a repeated subtree: converted once)
                return seen[id(value)]
            if isinstance(value, dict):
                out: Any = {}
                seen[id(value)] = out
                for k, v in value.items():
                    out[walk(k)] = walk(v)
                return out
            if isinstance(value, tuple):
                return tuple(walk(v) for v in value)
            items: list[Any] = []
            seen[id(value)] = items
            items.extend(walk(v) for v in value)
            return items
        return value

    try:
        return walk(raw)
    except RecursionError:  # nested deeper than any spec: the checks refuse it as given, naming its first key
        return raw


def dump(raw: Any) -> str:
    import yaml

    return yaml.safe_dump(raw, sort_keys=False, default_flow_style=False)


RECORDED_HEADER = "# the spec with the credentials in its URIs removed (its comments left out)\n"


def recorded_spec_text(raw: Any, text: str) -> str:
    """What is recorded of a spec (``spec.yaml``): ``text`` itself when neither it nor any string of ``raw``
    (its parsed content; read from ``text`` when None) changes under :func:`ndcg_mlflow.uris.redact`. Otherwise
    the content with every string redacted, dumped as YAML after :data:`RECORDED_HEADER`: the values, not the
    text, are redacted, so a password holding quotes, YAML escapes or line breaks is removed whole and the
    file stays a valid spec."""
    from ..uris import redact, redact_values

    if raw is None:
        raw = safe_yaml(text, "the spec")
    kept = redact_values(raw)
    if kept is raw and redact(text) == text:
        return text
    return RECORDED_HEADER + dump(kept)
