"""Credentials out of everything the tool writes or prints (no mlflow import: the core uses it too).

:func:`redact` rewrites any text:

* ``scheme://USERINFO@host...`` becomes ``scheme://host...``. USERINFO is everything between ``://`` and the
  LAST ``@`` of the same line, whatever the characters between (quotes, spaces, ``<``, ``>``, backticks,
  ``/``, ``#``, ``@``, ``:``, ``?``, percent-escapes), so a password is removed whole whichever characters
  it holds. A ``@`` after the URI on the same line (a path, an e-mail address, ``nDCG@10``) is taken as the
  end of the userinfo too: over-redaction is the safe side. ``scheme:///...`` (an empty authority:
  ``sqlite:////tmp/a@b.db``, ``file:///...``) has no userinfo and is left as is.
* the value of a query or fragment parameter whose name is, or ends in the word, token, password, secret,
  key, signature, sig, credential, auth or code (``?token=...``, ``access_token``, ``X-Amz-Signature``,
  ``api_key`` ...) becomes ``REDACTED``;
* ``Bearer`` / ``Basic`` authorization values become ``REDACTED``.

:func:`redact_values` applies it to every string of a parsed structure (a spec, a summary).
"""

from __future__ import annotations

import re
from typing import Any

MASK = "REDACTED"

# a scheme starting a word, then up to the last @ of the line; not an empty authority (scheme:///path)
_USERINFO = re.compile(r"(?P<scheme>(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://)(?!/)[^\r\n]*@")
# a parameter name whose last word (after _ - . or nothing) names a secret: token, access_token, X-Amz-Signature
_SECRET_NAME = (
    r"(?:[A-Za-z0-9_.\-]*[_.\-])?(?:token|password|passwd|pwd|pass|secret|key|apikey|sig|signature|"
    r"credential|credentials|auth|authorization|code)"
)
_QUERY = re.compile(r"(?P<name>[?&;#]" + _SECRET_NAME + r"=)(?P<value>[^&;#\s'\"<>`]*)", re.IGNORECASE)
_AUTH = re.compile(r"\b(?P<kind>Bearer|Basic)\s+(?P<value>[A-Za-z0-9._~+/=\-]{6,})")


def redact(text: str) -> str:
    """``text`` with URI credentials, secret query parameters and authorization values removed."""
    if not text:
        return text
    text = _USERINFO.sub(r"\g<scheme>", text)
    text = _QUERY.sub(lambda m: m.group("name") + (MASK if m.group("value") else ""), text)
    return _AUTH.sub(lambda m: f"{m.group('kind')} {MASK}", text)


def redact_values(value: Any) -> Any:
    """``value`` (strings, mappings, lists, tuples; anything else kept as is) with :func:`redact` applied to every
    string in it, mapping keys included: ``value`` itself (the same object) when no string changes, else a copy.
    Each container is visited once, so YAML aliases cost nothing more and stay shared."""
    done: dict[int, Any] = {}

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            kept = redact(item)
            return item if kept == item else kept
        if not isinstance(item, (dict, list, tuple)):
            return item
        if id(item) not in done:
            done[id(item)] = item  # (a container holding itself: the walk ends there)
            if isinstance(item, dict):
                pairs = [(walk(k), walk(v)) for k, v in item.items()]
                same = all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, item.items()))
                done[id(item)] = item if same else dict(pairs)
            else:
                items = [walk(inner) for inner in item]
                same = all(a is b for a, b in zip(items, item))
                done[id(item)] = item if same else type(item)(items)
        return done[id(item)]

    return walk(value)


def safe_uri(uri: str | None) -> str | None:
    """A tracking or store URI as it may be shown or recorded."""
    return None if uri is None else redact(str(uri))


def first_line(exc: BaseException | str) -> str:
    """The first line of an error's message (or of a text) as it may be shown: without credentials, at most about
    500 characters."""
    text = redact(str(exc)).strip().splitlines()
    if not text:
        return ""
    line = text[0]
    return line if len(line) <= 500 else line[:500].rsplit(" ", 1)[0] + " …"


def has_secret(text: str) -> bool:
    return bool(text) and redact(text) != text


def store_problem(uri: str | None) -> str | None:
    """Why a tracking URI cannot be used (a line break in it) or cannot keep what is logged (an in-memory
    store), or None.

    A URI is one line: a line break inside it (a password holding one, unescaped) is refused without showing
    the URI, as :func:`redact` reads userinfo within a line. SQLite URIs are read as SQLAlchemy reads them:
    the database is what follows the first ``/`` after ``sqlite://``; none, an empty one, ``:memory:``,
    ``file::memory:`` or ``mode=memory`` is a store in memory that vanishes when the command ends, so the run
    ids printed would exist nowhere.
    """
    if not uri:
        return None
    text = str(uri).strip()
    if "\n" in text or "\r" in text:
        return (
            "the URI holds a line break (not shown here: it may be inside a password). A URI is one line; "
            "write a line break inside a password percent-encoded, as %0A."
        )
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, sep, rest = text.partition(":")
    if not scheme.lower().startswith("sqlite"):
        return None
    database = rest.split("/", 1)[1] if "/" in rest else ""
    path, _, query = database.partition("?")
    if path in ("", ":memory:") or path.startswith("file::memory:") or "mode=memory" in query.lower():
        return (
            f"'{redact(text)}' is an in-memory SQLite store: nothing logged to it outlives the command, so "
            f"the run ids printed would exist nowhere. Give a store that persists, such as "
            f"sqlite:///mlflow.db (a file) or http://HOST:PORT (a tracking server)."
        )
    return None


MODEL_URI_FORMS = (
    "models:/<name>/<version>",
    "models:/<name>@<alias>",
    "models:/m-<logged model id>",
    "runs:/<run id>/<path>",
)


def model_uri_problem(uri: str) -> str | None:
    """Why ``uri`` is not a model URI this tool loads (:data:`MODEL_URI_FORMS`), or None. The shape only: whether
    the model exists is asked of the registry when the evaluation starts."""
    forms = ", ".join(MODEL_URI_FORMS)
    if uri.startswith("models:/"):
        rest = uri[len("models:/") :].rstrip("/")
        if re.fullmatch(r"m-[0-9A-Za-z]+", rest):
            return None
        if "@" in rest:
            name, _, alias = rest.rpartition("@")
            if name and "/" not in name and re.fullmatch(r"[\w\-]+", alias):
                return None
        else:
            name, _, version = rest.rpartition("/")
            if name and "/" not in name and version.isdigit() and int(version) > 0:
                return None
            if name and "/" not in name and version and not version.isdigit():
                return (
                    f"a registered model is named by version or alias ({forms}); stages such as "
                    f"{version!r} are not supported. Got {uri!r}."
                )
    elif uri.startswith("runs:/"):
        run_id, _, path = uri[len("runs:/") :].partition("/")
        if run_id and path.strip("/"):
            return None
    return f"must be a model URI of the form {forms}. Got {uri!r}."
