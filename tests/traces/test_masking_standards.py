"""Masking recall measured against the standards, not a corpus: valid values generated from
the IBAN registry, the card schemes' IIN ranges, GB/T 2260 and ``phonenumbers``' metadata
(``tests/traces/standards.py``), each required masked in prose, JSON (as written and with its
escapes), beside Chinese text, in a Markdown table and in a URL's query. The masking tests
run on the compiled modules when they are built and current, and on the pure-Python ones
with ``HARNESS_MASKING_COMPILED=0``: these pass on both."""

from __future__ import annotations

import random
import re

import pytest
from django.conf import settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.traces import standards
from traces.masking import Masker

BOUNDED = hypothesis_settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
CONTEXTS = sorted(standards.CONTEXTS)


def assert_masked_everywhere(value: str) -> None:
    masker = Masker(b"standards-key")
    for name in CONTEXTS:
        text = standards.CONTEXTS[name](value)
        masked = masker.mask_text(text)
        assert standards.leaks(masked, value) == [], (name, text, masked)


@pytest.mark.parametrize("country", sorted(standards.IBAN_REGISTRY))
@BOUNDED
@given(data=st.data())
def test_every_countrys_ibans_are_masked_compact_and_grouped(country, data):
    value = data.draw(standards.ibans(country))

    assert_masked_everywhere(value)
    assert_masked_everywhere(standards.grouped_in_fours(value))


@pytest.mark.parametrize("brand", [b for b, _, _ in standards.CARD_BRANDS])
@hypothesis_settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_brands_cards_are_masked_in_every_customary_grouping(brand, data):
    number = data.draw(standards.cards(brand))

    for written in standards.card_groupings(number):
        assert_masked_everywhere(written)


def test_a_resident_id_of_every_county_code_is_masked():
    rng = random.Random(2260)  # noqa: S311 - reproducible test data
    masker = Masker(b"standards-key")
    days = (standards.datetime.date.today() - standards.datetime.date(1930, 1, 1)).days
    for area in standards.COUNTY_CODES:
        birth = standards.datetime.date(1930, 1, 1) + standards.datetime.timedelta(
            rng.randint(0, days)
        )
        value = standards.resident_id(area, birth, rng.randint(0, 999))
        for name in ("prose", "cjk", "json_escaped"):
            masked = masker.mask_text(standards.CONTEXTS[name](value))
            assert standards.leaks(masked, value) == [], (area, name, masked)
    assert len(standards.COUNTY_CODES) > 6000


@hypothesis_settings(max_examples=60, deadline=None)
@given(value=standards.resident_ids(), spaced=st.booleans())
def test_resident_ids_of_any_county_and_birth_date_are_masked(value, spaced):
    if spaced:
        value = f"{value[:6]} {value[6:14]} {value[14:]}"
    assert_masked_everywhere(value)


PHONE_CASES = [
    (region, kind)
    for region in settings.HARNESS_PHONE_REGIONS
    for kind, number_type in standards.PHONE_TYPES.items()
    if standards.phonenumbers.example_number_for_type(region, number_type) is not None
]


# India's toll-free numbers are written nationally without the national prefix ("1800 12
# 3456"), which the masker asks of every other number of a prefix region but mobiles: they are
# a business's, not a person's, and masked when written internationally.
NATIONAL_GAPS = {("IN", "toll_free")}


@pytest.mark.parametrize(("region", "kind"), PHONE_CASES)
@BOUNDED
@given(data=st.data())
def test_phones_of_every_default_region_are_masked_nationally_and_internationally(
    region, kind, data
):
    number = data.draw(standards.phones(region, kind))

    national = kind in standards.NATIONAL_TYPES and (region, kind) not in NATIONAL_GAPS
    for written in standards.phone_forms(number, national=national):
        assert_masked_everywhere(written)


# --- look-alikes -----------------------------------------------------------------------

_DIGITS = st.text("0123456789", min_size=1, max_size=1)


@st.composite
def look_alikes(draw: st.DrawFn) -> str:
    def digits(n: int) -> str:
        return "".join(draw(_DIGITS) for _ in range(n))

    octets = [str(draw(st.integers(0, 255))) for _ in range(4)]
    date = draw(
        st.dates(standards.datetime.date(1990, 1, 1), standards.datetime.date(2035, 12, 31))
    )
    return draw(
        st.sampled_from(
            [
                f"order {digits(10)}",
                f"ORD-{draw(st.integers(10000, 99999))}",
                f"ticket T-{date:%Y%m%d}-{digits(3)}",
                f"invoice INV-{date:%Y}-{digits(4)}",
                f"tracking YT{digits(16)}",
                f"tracking JD{digits(13)}",
                f"SKU-{digits(4)}-BLK-XL",
                f"SKU{digits(10)}",
                f"{date:%Y-%m-%d} {draw(st.integers(0, 23)):02d}:{digits(1)}5:0{digits(1)}",
                f"{date:%d/%m/%Y}",
                f"${draw(st.integers(1, 999))},{digits(3)},{digits(3)}.{digits(2)}",
                f"{draw(st.integers(1, 99999999))}.{digits(2)} EUR",
                f"{draw(st.integers(1, 999))},{digits(3)}.{digits(2)}-"
                f"{draw(st.integers(1, 999))},{digits(3)}.{digits(2)}",
                f"{draw(st.integers(1, 999))},{digits(3)} - "
                f"{draw(st.integers(1, 999))},{digits(3)}",
                ".".join(octets),
                f"https://shop.example.com/orders/{digits(10)}?ref=mail&ts={digits(10)}",
            ]
        )
    )


@hypothesis_settings(max_examples=150, deadline=None)
@given(
    value=look_alikes(),
    context=st.sampled_from(["prose", "json", "json_escaped", "cjk", "markdown", "csv"]),
)
def test_order_tracking_invoice_numbers_skus_dates_amounts_and_ips_stay_readable(value, context):
    text = standards.CONTEXTS[context](value)

    assert Masker(b"standards-key").mask_text(text) == text


# The tables the masker builds once, at import, from the standards. These tests call the
# builders again rather than read the module's tables: mutation testing runs each mutant in a
# process that imported the module (the tables built by the real code), so only a call reaches
# a builder's mutants (docs/mutation.md).


def test_the_iban_structures_are_the_registrys_each_field_by_its_length_and_alphabet():
    from traces.masking import checks

    alphabets = {"n": "[0-9]", "a": "[A-Z]", "c": "[A-Za-z0-9]"}
    expected = {
        country: "".join(f"{alphabets[kind]}{{{length}}}" for length, kind in fields)
        for country, fields in standards.IBAN_REGISTRY.items()
    }

    structures = checks._iban_structures()

    assert {country: s.pattern for country, s in structures.items()} == expected
    assert structures["FR"].pattern == "[0-9]{5}[0-9]{5}[A-Za-z0-9]{11}[0-9]{2}"
    assert len(structures) > 80


def test_the_county_codes_are_every_county_of_gb_t_2260_and_no_prefecture():
    from traces.masking import checks

    areas = checks._cn_areas()

    assert areas == frozenset(standards.COUNTY_CODES)
    assert "310115" in areas  # Pudong, created 1993
    assert "110001" not in areas  # a prefecture's code, no county


def test_a_runs_first_character_is_what_backslash_d_matches_in_the_bmp_or_any_astral_one():
    from traces.masking import numbers

    first = re.compile(numbers._digit_or_astral())
    plane = [chr(code) for code in range(0x10000)]

    assert [c for c in plane if first.fullmatch(c)] == [c for c in plane if re.match(r"\d", c)]
    for astral in ("\U00010000", "\U0001d7ce", "\U0010ffff"):
        assert first.fullmatch(astral)


def test_a_resident_id_a_character_longer_or_with_another_check_digit_is_none():
    from stdnum.cn import ric

    from traces.masking import checks

    valid = standards.resident_id("310115", standards.datetime.date(1990, 3, 7), 123)
    other = valid[:17] + ("1" if valid[17] == "0" else "0")
    # 19 digits, a valid area and birth date, whose 18th is the check digit the library
    # computes for the whole value: only the length tells it is none.
    longer = next(
        v
        for n in range(1000)
        for c in "0123456789"
        if ric.calc_check_digit(v := f"31011519900307{n:03d}{c}0") == c
    )

    assert checks.cn_resident_id_ok(valid)
    assert not checks.cn_resident_id_ok(longer)
    assert not checks.cn_resident_id_ok(other)
    assert not checks.cn_resident_id_ok(valid[:5] + "A" + valid[6:])


def test_a_card_number_is_checked_as_written_with_its_separators():
    from traces.masking import checks

    for written in standards.card_groupings("4242424242424242"):
        assert checks.card_ok(written), written
        assert not checks.card_ok(written[:-1] + "3"), written
