"""What the number finder makes of a run of digits by the characters around it: an encoded
``+`` in a URL's query, a dash or a date before it, a letter glued after it, an IBAN's country
code and check digits, a NINO's prefix and letter, a DNI's or NIE's letter, a label. Each case
is one the mutation run of ``masking_numbers`` (``NumberFinder._classify``, ``_plain``,
``_phone``, ``_iban_near``, ``_letter_led``, ``_letter_trailed``, ``_e164``) found no test
for. These pass on the compiled modules and on the pure-Python ones
(``HARNESS_MASKING_COMPILED=0``)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from stdnum.es import dni, nie

from tests.traces import standards
from traces.masking import Masker
from traces.masking import numbers as numbers_module
from traces.masking.phones import PhoneValidator

BOUNDED = hypothesis_settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)


@pytest.fixture
def masker():
    return Masker(b"test-key")


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        # "%2B" is a "+" written in a URL's query: at the text's start too.
        ("%2B8613812345678", "%2B861******5678"),
        ("?phone=%2B8613812345678", "?phone=%2B861******5678"),
        # Seven digits are an international number's shortest (Niue's +683 4002).
        (
            "see https://crm.example.com/c?phone=%2B6834002&lang=zh",
            "see https://crm.example.com/c?phone=%2B*******&lang=zh",
        ),
        ("call +683 4002", "call *******"),
    ],
)
def test_a_phone_after_an_encoded_or_written_plus_is_masked_from_seven_digits(masker, text, masked):
    assert masker.mask_text(text) == masked


def test_digits_after_an_encoded_plus_that_are_no_international_number_stay_readable(masker):
    assert masker.mask_text("?code=%2B13812345678") == "?code=%2B13812345678"  # no +1 381…


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("-13812345678 mobile", "-138****5678 mobile"),
        ("Phones:\n-13812345678\n-0612345678", "Phones:\n-138****5678\n-061***5678"),
    ],
)
def test_a_phone_after_a_dash_that_follows_no_word_is_masked(masker, text, masked):
    """A dash glued to a word (``ORD-2025…``) makes the digits that word's; a list's dash at
    the start of a line does not."""
    assert masker.mask_text(text) == masked


@pytest.mark.parametrize(
    "text",
    [
        "NI number AB 123456C.",
        "NI JA 123456C",  # prefixes whose second letter is the alphabet's first or last ones
        "NI JY 123456C",
        "NI JZ 123456C",
        "NI number AB 12 34 56C",
        "NI number AB 1 2 3 4 5 6C",
    ],
)
def test_a_nino_with_its_letter_glued_to_its_digits_is_masked(masker, text):
    masked = masker.mask_text(text)

    assert "[national_id:" in masked
    assert not any(c.isdigit() for c in masked.split("[national_id:")[0])
    assert masked.split("]")[-1] in ("", ".")


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("2026-11-30 13812345678", "2026-11-30 138****5678"),
        ("2026-11-30 (718) 951-1807", "2026-11-30 718***1807"),
        ("on 5/3/2026 0612345678 called", "on 5/3/2026 061***5678 called"),  # D/M/YYYY
    ],
)
def test_a_phone_written_after_a_date_in_one_run_is_masked_and_the_date_kept(masker, text, masked):
    assert masker.mask_text(text) == masked


def test_digits_after_a_date_glued_to_letters_stay_readable(masker):
    assert masker.mask_text("2026-11-30 13812345678abc") == "2026-11-30 13812345678abc"


@BOUNDED
@given(number=st.integers(0, 99_999_999))
def test_a_dni_written_with_a_dash_before_its_letter_is_masked_whole(number):
    value = f"{number:08d}-{dni.calc_check_digit(f'{number:08d}')}"

    masked = Masker(b"test-key").mask_text(f"DNI {value}.")

    assert masked.startswith("DNI [national_id:")
    assert masked.endswith("].")


@pytest.mark.parametrize(
    "text",
    [
        "DNI 12345678-ZA",  # the letter glued to more letters: a word
        "model 12345678-B.",  # another letter than the DNI's
        "DNI 12345678-z",  # a DNI's letter is a capital
        "DNI 12345678z",
    ],
)
def test_digits_then_a_letter_that_make_no_dni_stay_readable(masker, text):
    assert masker.mask_text(text) == text


def test_a_dni_whose_letter_is_a_after_a_dash_is_masked(masker):
    assert masker.mask_text("DNI 12345690-A").startswith("DNI [national_id:")


@pytest.mark.parametrize("letter", ["X", "Y", "Z"])
@pytest.mark.parametrize("check", ["A", "Z", "L"])
def test_a_nie_is_masked_whatever_its_check_letter(masker, letter, check):
    serial = next(
        f"{letter}{n:07d}"
        for n in range(1_234_500, 1_240_000)
        if nie.calc_check_digit(f"{letter}{n:07d}") == check
    )

    assert masker.mask_text(f"NIE {serial}{check}").startswith("NIE [national_id:")
    assert masker.mask_text(f"{serial}{check}, NIE").startswith("[national_id:")


@pytest.mark.parametrize(
    "text",
    [
        "token abcX1234567L",  # glued to a word before
        "NIE X1234567LA",  # and after
        "NIE X1234567l",  # a NIE's letter is a capital
    ],
)
def test_a_nie_shaped_value_inside_a_word_stays_readable(masker, text):
    assert masker.mask_text(text) == text


def test_a_resident_id_with_a_lower_case_x_is_masked_and_one_glued_to_a_word_is_not(masker):
    assert masker.mask_text("id 11010519491231002x").startswith("id [national_id:")
    assert masker.mask_text("id 11010519491231002XYZ") == "id 11010519491231002XYZ"


# Countries whose IBAN ends with a full group of four: a short word in capitals after it
# ("BIC") reads as its last group, and the IBAN is the value without it.
_FULL_GROUPS = sorted(
    c for c, parts in standards.IBAN_REGISTRY.items() if (4 + sum(n for n, _ in parts)) % 4 == 0
)


@pytest.mark.parametrize("country", ["AZ", "ES", "BE"])
@BOUNDED
@given(data=st.data(), grouped=st.booleans())
def test_an_iban_followed_by_a_short_word_in_capitals_is_masked_whole(country, data, grouped):
    value = data.draw(standards.ibans(country))
    written = standards.grouped_in_fours(value) if grouped else value

    masked = Masker(b"test-key").mask_text(f"IBAN {written} BIC ABCDESMM, thanks")

    assert masked == f"IBAN {value[:2]}****{value[-4:]} BIC ABCDESMM, thanks"


def test_the_countries_whose_ibans_end_with_a_full_group_include_those_tested():
    assert {"AZ", "ES", "BE"} <= set(_FULL_GROUPS)


def test_an_iban_with_a_wrong_check_digit_stays_readable_though_followed_by_digits(masker):
    text = "IBAN GB82 WEST 1234 5698 7654 33 ok"

    assert masker.mask_text(text) == text


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("CPF 39053344705", "CPF [national_id:"),
        # Dotted, a CPF even when its digits are a Chinese mobile number too.
        ("CPF 138.123.456-92", "CPF [national_id:"),
    ],
)
def test_a_cpf_is_a_national_id_before_it_is_a_phone(text, masked):
    spans = numbers_module.NumberFinder(PhoneValidator()).find(text)

    assert [kind for _, _, kind, _ in spans] == ["national_id"]
    assert Masker(b"test-key").mask_text(text).startswith(masked)


@pytest.mark.parametrize(
    "text",
    [
        "Az. 0612/345/678",  # a file reference: more than one slash is no phone
        "06/12/34/56/78",
        "order (0612345678)",  # a label's number, in parentheses
        "ticket 00493012345678",  # labelled, of 13 to 15 digits
        "1600123456",  # ten bare digits from 1: a Unix time, not India's 160x
    ],
)
def test_phone_shaped_look_alikes_stay_readable(masker, text):
    assert masker.mask_text(text) == text


def test_a_zero_then_a_space_is_no_international_prefix():
    """ "0 013123456291": "0 0" is no "00" (that would read "+1 312 345 6291"); the number
    after the zero is read on its own, a Chinese mobile written with its trunk "0"."""
    finder = numbers_module.NumberFinder(PhoneValidator())

    assert finder.find("0 013123456291") == [(2, 14, "phone", "+8613123456291")]


def test_the_phone_kinds_found_are_phones():
    finder = numbers_module.NumberFinder(PhoneValidator())

    assert finder.find("?phone=%2B8613812345678") == [(10, 23, "phone", "+8613812345678")]


def test_a_phone_verdict_remembered_is_the_one_given_again():
    """The finder asks the phone rules once per number as written: what it remembered is the
    answer (a sentinel here, to see it was not asked again), in a URL's query as elsewhere."""
    finder = numbers_module.NumberFinder(PhoneValidator())
    finder._phone_memo[("8613812345678", True, "")] = "+86remembered"
    finder._phone_memo[("0612345678", False, "0612345678")] = "+33remembered"
    text = "?phone=%2B8613812345678, call +86 138 1234 5678, 0086 138 1234 5678 or 0612345678"

    found = finder.find(text)

    assert [e164 for _, _, _, e164 in found] == ["+86remembered"] * 3 + ["+33remembered"]


def test_a_finder_remembers_at_most_its_memo_size_of_phone_verdicts():
    finder = numbers_module.NumberFinder(PhoneValidator())
    size = numbers_module.PHONE_MEMO_SIZE
    text = "\n".join(f"138{n:08d}" for n in range(size + 1))  # one more than it keeps

    assert len(finder.find(text)) == size + 1
    assert len(finder._phone_memo) == 1  # forgotten when full, then the last one
