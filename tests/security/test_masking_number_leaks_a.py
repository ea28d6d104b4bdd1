"""Phone numbers the number finder kept in clear, found reading the survivors of the mutation
run of ``masking_numbers`` (``docs/mutation.md``)."""

from __future__ import annotations

import phonenumbers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.traces import standards
from traces.masking import Masker


@pytest.mark.parametrize(
    ("written", "e164"),
    [
        # A German extension after the number, the trunk "0" written after the country code:
        # sixteen digits as written, fifteen in E.164.
        ("+49 (0)711 123456-7890", "+497111234567890"),
        ("+43 (0)1 234567890123", "+431234567890123"),
        # Sixteen digits the phone rules take as a German number, in a URL's query.
        ("?phone=%2B4930123456789012", "+4930123456789012"),
    ],
)
def test_a_phone_of_sixteen_digits_after_its_plus_is_masked(written, e164):
    assert phonenumbers.is_valid_number(phonenumbers.parse(e164))

    masked = Masker(b"key").mask_text(f"Tel. {written}, ask for Mr Weber")

    digits = "".join(c for c in written if c.isdigit())
    assert digits[-6:] not in "".join(c for c in masked if c.isdigit()), masked
    assert masked.endswith(", ask for Mr Weber")


@pytest.mark.parametrize("country", sorted(standards.IBAN_REGISTRY))
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_an_iban_glued_to_a_word_is_masked(country, data):
    """``IBANDE89…``, ``statement_DE89….pdf``, ``ref-GB82WEST…``: the finder took an IBAN glued
    to a word character for part of the word and kept it in clear; its check digits and the
    country's BBAN structure are what tell an IBAN, not a boundary before it."""
    value = data.draw(standards.ibans(country))
    glued = data.draw(st.sampled_from(["IBAN{}", "statement_{}.pdf", "x{}", "ref-{}", "账户{}"]))
    masker = Masker(b"key")

    masked = masker.mask_text(f"see {glued.format(value)} please")

    assert value[4:] not in masked, masked
    assert [kind for kind, _ in masker.drain()] == ["iban"]
