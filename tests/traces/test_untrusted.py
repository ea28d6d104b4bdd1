"""The boundary for untrusted text (``traces.untrusted.clean``), on generated values: whatever a
model or a tool hands over, what comes out is storable JSON, and nothing else changes."""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from traces.chain import normalize_json
from traces.untrusted import LONE_SURROGATE, NON_FINITE, NUL, clean

# Any code point, surrogates and NUL included (hypothesis leaves surrogates out by default).
ANY_TEXT = st.text(st.characters(codec=None, categories=None), max_size=20)
PLAIN_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)
NUMBERS = st.integers() | st.floats(allow_nan=True, allow_infinity=True)


def values(text, numbers):
    leaves = st.none() | st.booleans() | numbers | text
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
        max_leaves=20,
    )


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def has_non_finite(value) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(has_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(has_non_finite(v) for v in value)
    return False


@given(values(ANY_TEXT, NUMBERS))
def test_what_comes_out_is_storable_json_and_cleaning_it_again_changes_nothing(value):
    cleaned, found = clean(value)

    text = json.dumps(cleaned, ensure_ascii=False, allow_nan=False)  # no NaN, no infinity
    text.encode("utf-8")  # no lone surrogate
    assert not any("\x00" in s for s in strings(cleaned))
    normalize_json(cleaned)  # the audit chain takes it (it raises for NaN and infinities)
    assert clean(cleaned) == (cleaned, [])
    assert set(found) <= {NUL, LONE_SURROGATE, NON_FINITE}
    assert (NON_FINITE in found) == has_non_finite(value)


@given(values(PLAIN_TEXT, st.integers() | st.floats(allow_nan=False, allow_infinity=False)))
def test_a_value_with_nothing_to_replace_is_handed_back_as_it_is(value):
    cleaned, found = clean(value)

    assert found == []
    assert cleaned is value


def test_each_kind_is_replaced_as_documented():
    value = {"a\x00": ["x\ud800", float("nan"), float("inf"), float("-inf"), "\ud83d\ude00"]}

    cleaned, found = clean(value)

    assert cleaned == {"a\ufffd": ["x\ufffd", "NaN", "Infinity", "-Infinity", "\U0001f600"]}
    assert found == [LONE_SURROGATE, NON_FINITE, NUL]
