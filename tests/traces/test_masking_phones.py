"""Phone numbers: the compiled metadata agrees with the ``phonenumbers`` library, and the
seeded corpus is masked with full recall and no look-alike touched."""

import random

import phonenumbers
import pytest
from django.core.exceptions import ImproperlyConfigured
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.masking_corpus import KINDS, generate
from traces.masking import Masker
from traces.masking.phones import DEFAULT_REGIONS, PhoneValidator, library_e164, rules_for_region


@pytest.mark.parametrize("region", DEFAULT_REGIONS)
def test_international_validity_is_the_librarys(region):
    rng = random.Random(region)  # noqa: S311 - reproducible test data
    validator = PhoneValidator()
    code = phonenumbers.country_code_for_region(region)
    for _ in range(1500):
        length = rng.randint(7, 11)
        nsn = str(rng.randint(10 ** (length - 1), 10**length - 1))
        number = phonenumbers.PhoneNumber(country_code=code, national_number=int(nsn))
        expected = phonenumbers.is_valid_number(number)

        assert (validator.international(f"{code}{nsn}") is not None) == expected, nsn


@pytest.mark.parametrize(
    ("written", "region"),
    [
        ("(718) 951-1807", "US"),
        ("503-204-4660", "US"),
        ("646.770.1943", "US"),
        ("(506) 234-5678", "CA"),
        ("138 1234 5678", "CN"),
        ("010 1234 5678", "CN"),
        ("07400 123456", "GB"),
        ("030 123456", "DE"),
        ("01512 3456789", "DE"),
        ("06 12 34 56 78", "FR"),
        ("612 34 56 78", "ES"),
        ("312 345 6789", "IT"),
        ("02 1234 5678", "IT"),
        ("090-1234-5678", "JP"),
        ("03-1234-5678", "JP"),
        ("81234 56789", "IN"),
    ],
)
def test_a_national_number_gets_the_librarys_e164(written, region):
    assert PhoneValidator().e164(written) == library_e164(written, region)


def test_the_seeded_corpus_is_masked_with_full_recall_and_no_look_alike_touched():
    documents = generate(0.4, seed=2026)
    masker = Masker(b"test-key")
    missed, touched, counts = [], [], dict.fromkeys(KINDS, 0)

    for document in documents:
        masked = masker.mask_text(document.text)
        for kind, value in document.planted:
            counts[kind] += 1
            if value in masked:
                missed.append((kind, value))
        touched += [value for value in document.lookalikes if value not in masked]

    assert all(counts.values()), counts  # every kind was planted
    assert missed == []
    assert touched == []


def _examples() -> list[tuple[str, str]]:
    """Each region's example number (the library's), as E.164 and its national number."""
    found = []
    for region in sorted(phonenumbers.SUPPORTED_REGIONS):
        number = phonenumbers.example_number(region)
        if number is not None:
            e164 = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
            found.append((e164, str(number.country_code)))
    return found


EXAMPLES = _examples()


@settings(max_examples=300, deadline=None)
@given(
    example=st.sampled_from(EXAMPLES),
    lead=st.sampled_from(["", " ", "\t", "  \n"]),
    international=st.sampled_from(["+", "00", "+ ", "00 "]),
)
def test_a_number_written_internationally_gets_the_librarys_e164(example, lead, international):
    """Any region's example number, its country code of one, two or three digits, written
    after ``+`` or ``00`` and after leading white space."""
    e164, code = example
    written = f"{lead}{international}{code} {e164[1 + len(code) :]}"

    assert PhoneValidator().e164(written) == e164


def test_three_digit_country_codes_are_read():
    assert PhoneValidator().e164("+852 2123 4567") == "+85221234567"
    assert PhoneValidator().e164("00353 1 234 5678") == "+35312345678"


@pytest.mark.parametrize("written", ["+", "00", "+0", "+1", "+44", "+852", " + "])
def test_a_country_code_without_a_number_is_no_phone(written):
    assert PhoneValidator().e164(written) is None


def test_nanpas_leading_one_is_taken_only_with_separators():
    """``1 212 736 5000`` is a US number; eleven bare digits ``12127365000`` are not one."""
    validator = PhoneValidator()

    assert validator.e164("1 212 736 5000") == "+12127365000"
    assert validator.e164("12127365000") is None
    assert validator.national_candidates("12127365000") == ["+12127365000"]


# U+FF10 to U+FF19, as CJK text writes digits.
_FULL_WIDTH = {ord("0") + n: 0xFF10 + n for n in range(10)}


@pytest.mark.parametrize("region", DEFAULT_REGIONS)
def test_the_national_candidates_of_full_width_digits_are_those_of_their_ascii_form(region):
    # What a search for a phone written in CJK text looks for (kinds.search_forms).
    example = phonenumbers.example_number(region)
    digits = phonenumbers.national_significant_number(example)
    prefix = phonenumbers.PhoneMetadata.metadata_for_region(region).national_prefix or ""
    validator = PhoneValidator()
    for written in {digits, prefix + digits}:
        candidates = validator.national_candidates(written)
        assert validator.national_candidates(written.translate(_FULL_WIDTH)) == candidates
        if written == prefix + digits:
            assert (
                phonenumbers.format_number(example, phonenumbers.PhoneNumberFormat.E164)
                in candidates
            ), region


@pytest.mark.parametrize("digits", ["0000000000", "0000000", "99999999999"])
def test_digits_valid_in_no_default_region_have_no_candidate(digits):
    assert PhoneValidator().national_candidates(digits) == []


@pytest.mark.parametrize("region", ["US", "ES", "IT"])
def test_a_premium_rate_number_is_a_phone_only_written_internationally(region):
    """Written nationally only fixed-line, mobile, toll-free and VoIP numbers are taken (NANPA
    and regions without a national prefix each have their own branch)."""
    number = phonenumbers.example_number_for_type(region, phonenumbers.PhoneNumberType.PREMIUM_RATE)
    nsn = str(number.national_number)
    rules = rules_for_region(region)

    assert rules.valid(nsn)
    assert rules.national(nsn) is None
    assert PhoneValidator().international(f"{number.country_code}{nsn}") == (
        f"+{number.country_code}{nsn}"
    )


_FULL_WIDTH = {code: code + 0xFEE0 for code in range(ord("0"), ord("9") + 1)}


@pytest.mark.parametrize(
    ("written", "e164"),
    [
        ("06 12 34 56 78", "+33612345678"),
        ("06123 45678", "+49612345678"),
        # Other separators: no region's shape, but France's groups of digits.
        ("06\u00a012\u00a034\u00a056\u00a078", "+33612345678"),
        ("06\u202f12\u202f34\u202f56\u202f78", "+33612345678"),
        # Full-width digits: France's shape exactly.
        ("06 12 34 56 78".translate(_FULL_WIDTH), "+33612345678"),
        ("06123 45678".translate(_FULL_WIDTH), "+49612345678"),
    ],
)
def test_a_number_valid_in_two_regions_is_taken_for_the_one_it_is_written_like(written, e164):
    """``0612345678`` is German and French; Germany comes first in the default regions."""
    assert PhoneValidator().e164(written) == e164


def test_unknown_regions_are_refused_by_name():
    with pytest.raises(ImproperlyConfigured) as refused:
        PhoneValidator(("XX", "FR", "YY"))

    assert str(refused.value) == "HARNESS_PHONE_REGIONS: unknown phone regions: XX, YY"


def test_regions_are_kept_in_capitals_once_each():
    assert PhoneValidator(("fr", "FR", "de")).regions == ("FR", "DE")


@pytest.mark.parametrize(("written", "region"), [("8999", "TA"), ("7012", "NU"), ("3101", "TK")])
def test_four_digit_national_numbers_are_read(written, region):
    """Tristan da Cunha, Niue and Tokelau have numbers of four digits."""
    assert PhoneValidator((region,)).e164(written) == library_e164(written, region)
    assert library_e164(written, region) is not None


def test_a_national_number_of_more_than_seventeen_digits_is_no_phone():
    """Japan's toll-free numbers have up to 17 digits, 18 with the national prefix: longer than
    any the finder asks (E.164 numbers have 15 at most)."""
    nsn = "0037" + "1234567890123"
    assert rules_for_region("JP").valid(nsn, national=True)

    assert PhoneValidator(("JP",)).national("0" + nsn) is None
    assert PhoneValidator(("JP",)).national("0" + nsn[:-1]) == "+81" + nsn[:-1]


def test_digits_written_without_separators_are_taken_for_the_first_region_they_are_valid_in():
    """``312345`` is valid in Andorra and Tokelau; bare digits have no shape to tell them apart
    (Tokelau formats it so, Andorra as ``312 345``)."""
    assert PhoneValidator(("AD", "TK")).e164("312345") == "+376312345"
    assert PhoneValidator(("TK", "AD")).e164("312345") == "+690312345"
