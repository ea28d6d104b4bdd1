"""Phone numbers the number finder kept in clear, found reading the survivors of the mutation
run of ``masking_numbers`` (``docs/mutation.md``)."""

from __future__ import annotations

import phonenumbers
import pytest

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
