"""What one masker (so one run) has masked already: each text is scanned once per run.

Masking a text again finds the same values, whose fingerprints are recorded already, so the
masked form is kept and handed back. Learning a declared value (``Masker._remember``) clears
the memo: texts masked before may hold it.
"""

from __future__ import annotations

# Texts at least this long are kept without a bound: they are the conversation's, masked
# again at every step.
MEMO_MIN_LENGTH = 200
# How many shorter texts are kept (then it starts again): names, statuses, ids and keys recur
# at every step, each a scan the memo saves.
SHORT_MEMO_SIZE = 4096


class TextMemo:
    """Masked forms by text: long texts without a bound, short ones up to ``SHORT_MEMO_SIZE``."""

    __slots__ = ("long", "short")

    def __init__(self) -> None:
        self.long: dict[str, str] = {}
        self.short: dict[str, str] = {}

    def get(self, text: str) -> str | None:
        return (self.long if len(text) >= MEMO_MIN_LENGTH else self.short).get(text)

    def put(self, text: str, masked: str) -> str:
        if len(text) >= MEMO_MIN_LENGTH:
            self.long[text] = masked
        else:
            if len(self.short) >= SHORT_MEMO_SIZE:
                self.short.clear()
            self.short[text] = masked
        return masked

    def clear(self) -> None:
        self.long.clear()
        self.short.clear()
