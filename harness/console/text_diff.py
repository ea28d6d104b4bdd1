"""Two texts compared for people: what was kept, removed and added, as escaped HTML.

``difflib`` compares the lines first, then the words (and the spaces between them) of each
block of changed lines, so one changed word in a long answer is marked as one word and a long
answer costs a line diff, not a word diff of the whole. Every piece of either text is escaped;
only our own ``<del>`` and ``<ins>`` are added.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Literal

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

# A word, or the run of white space after it: joined back they are the text, exactly.
WORDS = re.compile(r"\s+|\S+")

Op = Literal["equal", "delete", "insert"]


@dataclass(frozen=True)
class Piece:
    op: Op  # kept in both, only in the first text, only in the second
    text: str


def diff_texts(before: str, after: str) -> list[Piece]:
    """``before`` and ``after`` as pieces: the ``equal`` and ``delete`` ones joined are
    ``before``, the ``equal`` and ``insert`` ones joined are ``after``."""
    pieces: list[Piece] = []
    lines_before, lines_after = before.splitlines(keepends=True), after.splitlines(keepends=True)
    matcher = SequenceMatcher(None, lines_before, lines_after, autojunk=False)
    for op, b1, b2, a1, a2 in matcher.get_opcodes():
        old, new = "".join(lines_before[b1:b2]), "".join(lines_after[a1:a2])
        if op == "equal":
            pieces.append(Piece("equal", old))
        else:
            pieces.extend(_word_diff(old, new))
    return _merged(pieces)


# Below this share of words in common, changed lines read better removed whole and added
# whole than as a word soup of the few they share ("the", "a").
MIN_WORD_SIMILARITY = 0.5


def _word_diff(before: str, after: str) -> list[Piece]:
    words_before, words_after = WORDS.findall(before), WORDS.findall(after)
    matcher = SequenceMatcher(None, words_before, words_after, autojunk=False)
    if matcher.ratio() < MIN_WORD_SIMILARITY:
        return [Piece("delete", before), Piece("insert", after)]
    pieces: list[Piece] = []
    for op, b1, b2, a1, a2 in matcher.get_opcodes():
        old, new = "".join(words_before[b1:b2]), "".join(words_after[a1:a2])
        if op == "equal":
            pieces.append(Piece("equal", old))
            continue
        if old:
            pieces.append(Piece("delete", old))
        if new:
            pieces.append(Piece("insert", new))
    return pieces


def _merged(pieces: list[Piece]) -> list[Piece]:
    """Neighbours of one kind joined, empty pieces dropped."""
    merged: list[Piece] = []
    for piece in pieces:
        if not piece.text:
            continue
        if merged and merged[-1].op == piece.op:
            merged[-1] = Piece(piece.op, merged[-1].text + piece.text)
        else:
            merged.append(piece)
    return merged


TAGS = {"delete": "del", "insert": "ins"}


def render_diff(pieces: list[Piece]) -> SafeString:
    """The pieces as HTML: removed text in ``<del>``, added text in ``<ins>``, kept text as
    it is; all of it escaped."""
    html = []
    for piece in pieces:
        text = escape(piece.text)
        tag = TAGS.get(piece.op)
        html.append(f"<{tag}>{text}</{tag}>" if tag else text)
    return mark_safe("".join(html))  # noqa: S308 -- every piece escaped above
