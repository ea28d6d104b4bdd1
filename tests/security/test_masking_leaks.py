"""Personal data that masking v1 stored in clear, and a tenant pattern that could stall workers
(issue #13)."""

import time

import pytest

from traces.errors import MaskingPatternInvalid
from traces.masking import Masker
from traces.masking.patterns import try_pattern


@pytest.mark.parametrize(
    "value",
    [
        "(718) 951-1807",
        "503-204-4660",
        "646-770-1943",
        "030 12345678",
        "06 12 34 56 78",
        "SSN 536-90-4399",
        "NINO AB123456C",
        "DNI 12345678Z",
        "Aadhaar 2341 2341 2346",
        "CPF 390.533.447-05",
    ],
)
def test_values_masking_v1_left_in_clear_are_masked(value):
    masked = Masker(b"key").mask_text(f"customer wrote: {value}.")

    digits = "".join(c for c in value if c.isdigit())
    assert value not in masked
    assert digits[-6:] not in "".join(c for c in masked if c.isdigit())


def test_a_custom_pattern_that_backtracks_exponentially_is_refused_before_it_runs():
    started = time.monotonic()

    with pytest.raises(MaskingPatternInvalid):
        try_pattern("customer_number", r"(\w+\s?)*!", "a" * 40)

    assert time.monotonic() - started < 1
