"""A declared value is remembered by the run's masker in every form it is stored in: as it
was declared, and as it appears inside a JSON text (escaped quotes, backslashes, control
characters, non-ASCII as \\uXXXX), so that a later text quoting it is masked too."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traces.masking import Masker

LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZçéëöñßøłżÉÖ张伟李娜王芳陳"
WORD = st.text(alphabet=LETTERS, min_size=2, max_size=8)
# What separates a name's words once it needs escaping in JSON: quotes, a backslash, controls.
ESCAPED_SEPARATOR = st.sampled_from([' "', '" ', '"', " \\ ", "\\", "\n", "\t", ' "x" '])
SEPARATOR = st.one_of(ESCAPED_SEPARATOR, st.sampled_from([" ", "-", "·"]))


@st.composite
def names(draw: st.DrawFn, separator: st.SearchStrategy[str] = SEPARATOR) -> str:
    name = draw(WORD) + draw(separator) + draw(WORD)
    if draw(st.booleans()):
        name += draw(separator) + draw(WORD)
    return name


def declared(masker: Masker, name: str) -> str:
    """The masked form of ``name`` declared as a tool result's holder (the masker learns it)."""
    return masker.mask({"holder": name}, {"/holder": "name"})["holder"]


def escaped(value: str, ensure_ascii: bool = True) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii)[1:-1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=names())
def test_a_declared_value_quoted_json_escaped_in_a_later_text_is_masked(name):
    assume_escaped = escaped(name) != name
    masker = Masker(b"test-key")
    masked = declared(masker, name)
    later = json.dumps({"note": f"Dear {name}, your refund is on its way."})

    stored = masker.mask_text(later)

    assert escaped(name) not in stored
    assert name not in stored
    assert f"Dear {masked}, your" in stored
    if not assume_escaped:  # the same text, unescaped: masked as before
        assert stored == later.replace(name, masked)


@pytest.mark.parametrize(
    "name",
    [
        "Zhang \u201cTony\u201d Wei",  # typographic quotes: \u201c in JSON
        'Zhang "Tony" Wei',
        "Zhang\\Wei",
        "张伟",  # \u5f20\u4f1f
        "José García",  # Jos\u00e9 Garc\u00eda
        "Li\nNa",
    ],
)
def test_each_json_escape_of_a_declared_name_is_masked(name):
    masker = Masker(b"test-key")
    masked = declared(masker, name)
    assert escaped(name) != name

    stored = masker.mask_text(f'{{"messages": [{{"content": "to {escaped(name)} today"}}]}}')

    assert escaped(name) not in stored
    assert f"to {masked} today" in stored


def test_a_value_learnt_after_a_text_was_masked_is_masked_when_that_text_comes_again():
    masker = Masker(b"test-key")
    text = json.dumps({"note": "Dear 张伟, hello"})
    assert masker.mask_text(text) == text  # not known yet: a name is not detected in prose

    masked = declared(masker, "张伟")

    assert masker.mask_text(text) == text.replace(escaped("张伟"), masked)
