"""Numbers the number finder kept in clear, found reading the survivors of its mutation run
(``masking_numbers``, docs/mutation.md): a value in a run that began glued to a word, and a
phone written with dots after "<digit>,"."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.traces import standards
from traces.masking import Masker

VALUES = [
    ("646-770-1943", "phone"),
    ("(718) 951-1807", "phone"),
    ("030 12345678", "phone"),
    ("536-90-4399", "national_id"),
    ("4111 1111 1111 1111", "card"),
]


@pytest.mark.parametrize(("value", "kind"), VALUES)
@pytest.mark.parametrize("word", ["SKU12", "Item A12", "ORD-12", "ORD-2025-12", "JD4778"])
def test_a_value_after_a_word_glued_to_digits_and_two_spaces_is_masked(word, value, kind):
    """ "SKU12  646-770-1943" (a table's columns): the run began glued to capitals, and the
    finder turned the whole run away before splitting it at the two spaces."""
    masker = Masker(b"key")

    masked = masker.mask_text(f"{word}  {value}")

    assert masked.startswith(f"{word}  ")
    assert standards.leaks(masked, value) == [], masked
    assert [found for found, _ in masker.drain()] == [kind]


@hypothesis_settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(data=st.data(), brand=st.sampled_from([b for b, _, _ in standards.CARD_BRANDS]))
def test_a_card_in_a_column_after_a_glued_sku_is_masked(data, brand):
    number = data.draw(standards.cards(brand))
    masker = Masker(b"key")

    for written in standards.card_groupings(number):
        masked = masker.mask_text(f"SKU5789  {written}  2 pcs")

        assert standards.leaks(masked, written) == [], masked


@pytest.mark.parametrize("row", ["1042,{}", "7,{},open", "[3,{}]", "合计 12,{}"])
def test_a_phone_written_with_dots_after_a_digit_and_a_comma_is_masked(row):
    """ "1042,646.770.1943": a decimal point after the first group made the finder read an
    amount's thousands; an amount has no second one in its decimals."""
    masker = Masker(b"key")

    masked = masker.mask_text(row.format("646.770.1943"))

    assert "7701943" not in masked.replace(".", ""), masked
    assert [kind for kind, _ in masker.drain()] == ["phone"]
    assert masker.mask_text("339,990.28; 1,500.00-2,000.00; 7,234.5 kg; 1,234.56.") == (
        "339,990.28; 1,500.00-2,000.00; 7,234.5 kg; 1,234.56."
    )


@pytest.mark.parametrize(
    "text", ["qty 12 13812345678", "total 12.50 646-770-1943", "2,000.00 4111 1111 1111 1111"]
)
def test_a_value_after_a_number_and_one_space_is_masked(text):
    assert kinds_of(text) != []


def kinds_of(text: str) -> list[str]:
    masker = Masker(b"key")
    masker.mask_text(text)
    return [kind for kind, _ in masker.drain()]
