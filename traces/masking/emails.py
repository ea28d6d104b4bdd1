"""E-mail addresses, found from their ``@`` (a substring search, not a regular expression
scanning every character)."""

from __future__ import annotations

import re

_LOCAL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-")
_DOMAIN = re.compile(r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")


def find_emails(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    at = text.find("@")
    while at != -1:
        start = at
        while start > 0 and text[start - 1] in _LOCAL:
            start -= 1
        domain = _DOMAIN.match(text, at + 1)
        end = domain.end() if domain else at
        if start < at and domain:
            tld = text[text.rindex(".", at, end) + 1 : end]
            if tld.isalpha() and not (spans and start < spans[-1][1]):
                spans.append((start, end))
        at = text.find("@", max(end, at + 1))
    return spans
