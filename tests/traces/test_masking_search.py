"""An auditor finds a run by an identifier typed any way: the fingerprint a run's masker records
for a value is among those the search derives from the value as the auditor types it
(``traces.queries.identifier_digests``), whatever the spelling of either. Values come from the
standards (``tests/traces/standards.py``), not from the masker."""

from __future__ import annotations

import pytest
from django.conf import settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.traces import standards
from traces.queries import identifier_digests
from traces.recorder import new_masker

BOUNDED = hypothesis_settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)


def recorded(text: str) -> set[str]:
    """The digests a run's masker records for ``text``."""
    masker = new_masker()
    masker.mask_text(text)
    return {digest for _, digest in masker.drain()}


def assert_found_by(stored: set[str], typed: str) -> None:
    assert stored, "the value was masked"
    assert stored & set(identifier_digests(typed)), typed


PHONE_CASES = [
    (region, kind)
    for region in settings.HARNESS_PHONE_REGIONS
    for kind in standards.NATIONAL_TYPES
    if standards.phonenumbers.example_number_for_type(region, standards.PHONE_TYPES[kind])
    and (region, kind) != ("IN", "toll_free")  # written nationally without its prefix
]


@pytest.mark.parametrize(("region", "kind"), PHONE_CASES)
@BOUNDED
@given(data=st.data())
def test_a_phone_is_found_by_each_way_it_is_written(region, kind, data):
    number = data.draw(standards.phones(region, kind))
    international, e164, national, digits = standards.phone_forms(number, national=True)

    stored = recorded(f"call {international} today")

    for typed in (international, e164, "00" + e164[1:]):
        assert_found_by(stored, typed)
    # Written nationally it may be read as another default region's number ("800 123 4567"
    # is American too): found by the spelling it was stored from, and by its digits alone.
    for written in (national, digits):
        assert_found_by(recorded(f"call {written} today"), national)
        assert_found_by(recorded(f"call {written} today"), digits)


@BOUNDED
@given(value=standards.resident_ids(), lower=st.booleans())
def test_a_resident_id_is_found_spaced_or_not_and_in_either_case(value, lower):
    stored = recorded(f"身份证号{value}。")

    spaced = f"{value[:6]} {value[6:14]} {value[14:]}"
    for typed in (value, spaced):
        assert_found_by(stored, typed.lower() if lower else typed)


@pytest.mark.parametrize("country", ["DE", "GB", "FR", "IT", "NL", "ES"])
@BOUNDED
@given(data=st.data())
def test_an_iban_is_found_grouped_or_compact_and_in_either_case(country, data):
    value = data.draw(standards.ibans(country))

    stored = recorded(f"IBAN {standards.grouped_in_fours(value)} thanks")

    for typed in (value, standards.grouped_in_fours(value), value.lower()):
        assert_found_by(stored, typed)


@pytest.mark.parametrize("brand", [b for b, _, _ in standards.CARD_BRANDS])
@BOUNDED
@given(data=st.data())
def test_a_card_is_found_in_every_customary_grouping(brand, data):
    number = data.draw(standards.cards(brand))

    stored = recorded(f"card {number} ok")

    for typed in standards.card_groupings(number):
        assert_found_by(stored, typed)


@BOUNDED
@given(
    local=standards.email_local_parts(),
    domain=st.sampled_from(["example.com", "mail.example.cn", "qq.com"]),
)
def test_an_email_is_found_in_any_case(local, domain):
    value = f"{local}@{domain}"

    stored = recorded(f"mail {value} please")

    for typed in (value, value.upper(), f"  {value} "):
        assert_found_by(stored, typed)


@pytest.mark.parametrize(
    ("kind", "declared", "typed"),
    [
        ("name", "Zhang Wei", "zhang  wei"),
        ("name", "张伟", "张伟"),
        ("address", "1 Main Street, Springfield", "1 MAIN STREET,  springfield "),
        ("national_id", "G12345678", "g1234-5678"),
    ],
)
def test_a_declared_value_is_found_however_its_spaces_and_case_are_typed(kind, declared, typed):
    masker = new_masker()
    masker.mask({"value": declared}, {"/value": kind})

    assert_found_by({digest for _, digest in masker.drain()}, typed)
