"""The answer diff of the replay page: any two texts, as HTML that escapes all of both and
from which each can be read back."""

from __future__ import annotations

from html.parser import HTMLParser
from itertools import pairwise

from hypothesis import example, given
from hypothesis import strategies as st

from harness.console.text_diff import Piece, diff_texts, render_diff

# Words, spaces, newlines and markup, so that the diff works on lines and words alike.
TOKENS = st.sampled_from(
    ["a", "b", "the", " ", "  ", "\n", "\r\n", "\t", "<b>", "</pre>", "&amp;", '"', "'", "é", "<"]
)
TEXTS = st.one_of(st.lists(TOKENS, max_size=40).map("".join), st.text(max_size=200))


class Sides(HTMLParser):
    """Reads rendered HTML back: the text of each side, and every tag met."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.before, self.after, self.tags, self.open = "", "", [], ""

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)
        self.open = tag

    def handle_endtag(self, tag: str) -> None:
        self.open = ""

    def handle_data(self, data: str) -> None:
        if self.open != "ins":
            self.before += data
        if self.open != "del":
            self.after += data


@given(TEXTS, TEXTS)
@example("I assigned it.", "Note: it failed.\n\nI assigned it.")
@example('<script>alert("x")</script>', "<img src=x onerror=alert(1)>")
def test_a_diff_of_any_two_texts_reads_back_as_each_and_adds_no_markup_of_theirs(before, after):
    pieces = diff_texts(before, after)
    html = render_diff(pieces)
    sides = Sides()
    sides.feed(str(html))
    sides.close()

    assert "".join(p.text for p in pieces if p.op != "insert") == before
    assert "".join(p.text for p in pieces if p.op != "delete") == after
    assert (sides.before, sides.after) == (before, after)
    assert set(sides.tags) <= {"del", "ins"}
    assert "<" not in html.replace("<del>", "").replace("</del>", "").replace("<ins>", "").replace(
        "</ins>", ""
    )


@given(TEXTS, TEXTS)
def test_neighbouring_pieces_differ_in_kind_and_none_is_empty(before, after):
    pieces = diff_texts(before, after)

    assert all(piece.text for piece in pieces)
    assert all(a.op != b.op for a, b in pairwise(pieces))


def test_one_changed_word_is_marked_as_that_word():
    pieces = diff_texts("The ticket was assigned to li.", "The ticket was refused to li.")

    assert pieces == [
        Piece("equal", "The ticket was "),
        Piece("delete", "assigned"),
        Piece("insert", "refused"),
        Piece("equal", " to li."),
    ]


def test_a_rewritten_line_is_removed_whole_and_added_whole_not_mixed_word_by_word():
    pieces = diff_texts(
        "I assigned the ticket to li.\nBye.", "The tool failed: nothing done.\nBye."
    )

    assert pieces == [
        Piece("delete", "I assigned the ticket to li.\n"),
        Piece("insert", "The tool failed: nothing done.\n"),
        Piece("equal", "Bye."),
    ]


def test_equal_texts_are_one_kept_piece_and_empty_ones_none():
    assert diff_texts("same\ntext", "same\ntext") == [Piece("equal", "same\ntext")]
    assert diff_texts("", "") == []
