"""One boundary for untrusted text: what a model, a tool or an MCP server hands the harness.

Such a value may hold what no store accepts: NUL (PostgreSQL's ``jsonb`` and ``text`` refuse
``\\u0000``), lone UTF-16 surrogates (unencodable in UTF-8: masking, hashing and sealing fail on
them) and non-finite numbers (NaN, ±Infinity: no JSON document may hold them). Each is turned,
once, where the value enters — the gateway's response, the tool executor's outcome — into
something every later step stores as it is:

- NUL and lone surrogates become U+FFFD (the two code points of a surrogate pair become the
  character they encode; reported as ``lone_surrogate`` too); dictionary keys too;
- NaN, Infinity and -Infinity become the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
  (what JavaScript's ``String()`` writes), wherever they are.

``clean`` says which kinds it replaced (``nul``, ``lone_surrogate``, ``non_finite``); the caller
puts that on the span and the audit record (``normalised``). A value with nothing to replace is
returned as it is, not copied: the common case costs one regular-expression scan per string.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

REPLACEMENT = "\ufffd"
NUL = "nul"
LONE_SURROGATE = "lone_surrogate"
NON_FINITE = "non_finite"

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _search(text: str) -> bool:
    """Whether ``text`` holds NUL or a surrogate: ``in`` and ``isascii`` (and for non-ASCII
    text the UTF-8 encoder, which refuses surrogates) run in C, several times faster than a
    regular expression's character class."""
    if "\x00" in text:
        return True
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def clean(value: Any) -> tuple[Any, list[str]]:
    """``value`` with NUL, lone surrogates and non-finite numbers replaced, and the sorted
    kinds that were (empty: ``value`` itself, unchanged)."""
    if not _needs(value):
        return value, []
    found: set[str] = set()
    cleaned = _clean(value, found)
    return (cleaned if found else value), sorted(found)


def _needs(value: Any) -> bool:
    """Whether ``value`` holds anything ``_clean`` replaces. One pass of the C encoder (what
    it writes holds NUL as ``\\u0000`` and surrogates as they are; it refuses NaN and
    infinities): several times faster than a walk in Python. A text that merely spells
    ``\\u0000`` costs a walk, which then finds nothing."""
    if type(value) is str:
        return _search(value)
    try:
        encoded = _encode(value)
    except (ValueError, TypeError, RecursionError):
        return _walk_needs(value)
    return "\\u0000" in encoded or _search(encoded)


_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, check_circular=False).encode


def _walk_needs(value: Any) -> bool:
    if type(value) is str:
        return _search(value)
    if isinstance(value, dict):
        for key, item in value.items():
            if (type(key) is str and _search(key)) or _walk_needs(item):
                return True
        return False
    if isinstance(value, list | tuple):
        return any(_walk_needs(item) for item in value)
    return type(value) is float and not math.isfinite(value)


def clean_text(text: str, found: set[str] | None = None) -> str:
    """One string; ``found`` collects the kinds replaced."""
    if not _search(text):
        return text
    return _text(text, found if found is not None else set())


def _clean(value: Any, found: set[str]) -> Any:
    if type(value) is str:
        return _text(value, found) if _search(value) else value
    if isinstance(value, dict):
        return {
            (_text(key, found) if type(key) is str and _search(key) else key): _clean(item, found)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_clean(item, found) for item in value]
    if type(value) is float and not math.isfinite(value):
        found.add(NON_FINITE)
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    return value


def _text(text: str, found: set[str]) -> str:
    if "\x00" in text:
        found.add(NUL)
        text = text.replace("\x00", REPLACEMENT)
    if _UNSTORABLE.search(text) is None:
        return text
    # A surrogate pair (two code points) becomes its character; a lone surrogate U+FFFD.
    found.add(LONE_SURROGATE)
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
