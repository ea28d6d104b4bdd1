"""E-mail addresses, found from their ``@`` (a substring search, not a regular expression
scanning every character)."""

from __future__ import annotations

import re

_LOCAL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-"
# How far back from an "@" the local part is looked for in one step (then further, if need be).
_WINDOW = 80
_DOMAIN = re.compile(r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")


def find_emails(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    at = text.find("@")
    while at != -1:
        # The local part: what ``rstrip`` leaves of the characters before the "@" (in C).
        window = max(0, at - _WINDOW)
        start = window + len(text[window:at].rstrip(_LOCAL))
        while start == window and window:  # the whole window is local part: look further
            window = max(0, window - _WINDOW)
            start = window + len(text[window:start].rstrip(_LOCAL))
        domain = _DOMAIN.match(text, at + 1)
        end = domain.end() if domain else at
        if start < at and domain:
            tld = text[text.rindex(".", at, end) + 1 : end]
            if tld.isalpha() and not (spans and start < spans[-1][1]):
                spans.append((start, end))
        at = text.find("@", max(end, at + 1))
    return spans
