"""How the number finder reads its runs: a run inside a value found, the look-alikes it turns
away before any check (digits glued to a word, an amount's decimals after its thousands),
the characters a JSON escape stands for, the digits of a clock time, of a URL or of a masked
form, a label's number, and the IBAN check. Written from the survivors of the finder's
mutation run (``masking_numbers``, docs/mutation.md); these pass on the compiled modules and
on the pure-Python ones (``HARNESS_MASKING_COMPILED=0``)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from stdnum import iban as stdnum_iban

from tests.traces import standards
from traces.masking import Masker, checks
from traces.masking import numbers as numbers_module
from traces.masking.numbers import NumberFinder
from traces.masking.phones import PhoneValidator

BOUNDED = hypothesis_settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)


def kinds(text: str) -> list[str]:
    masker = Masker(b"key")
    masker.mask_text(text)
    return [kind for kind, _ in masker.drain()]


def found(text: str) -> list[tuple[str, str]]:
    """What the finder finds in ``text``: each value's kind and its characters."""
    return [
        (kind, text[start:end]) for start, end, kind, _ in NumberFinder(PhoneValidator()).find(text)
    ]


# --- a run inside a value already found ---------------------------------------------------


@pytest.mark.parametrize(
    "iban", ["NL91ABNA0417164300", "GB82WEST12345698765432", "IT60X0542811101000000123456"]
)
@pytest.mark.parametrize(
    ("value", "kind"),
    [("13812345678", "phone"), ("390.533.447-05", "national_id"), ("4111 1111 1111 1111", "card")],
)
def test_a_value_after_an_iban_in_the_same_run_of_digits_is_found_too(iban, value, kind):
    """ "NL91ABNA0417164300  13812345678": the IBAN is found from its check digits, and the
    run that begins inside it goes on past it to the phone."""
    assert kinds(f"{iban}  {value}") == ["iban", kind]
    assert kinds(f"{iban}  {value} ok") == ["iban", kind]


@pytest.mark.parametrize("between", [", call ", "  1042, call ", "&id="])
def test_the_values_after_an_iban_and_what_ends_its_run_are_found(between):
    """The run that begins inside the IBAN ends with it, or holds nothing more of six
    characters ("  1042"): the finder goes on to the next run."""
    for iban in ("NL91ABNA0417164300", "IT60X0542811101000000123456"):
        assert kinds(f"{iban}{between}646-770-1943") == ["iban", "phone"]
        assert kinds(f"{iban}{between}4111 1111 1111 1111") == ["iban", "card"]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("390.533.447-05", "national_id"),
        ("AB123456C", "national_id"),
        ("X1234567L", "national_id"),
        ("13812345678 ok", "phone"),
        ("646.770.1943  2026-11-30", "phone"),
    ],
)
def test_a_value_opening_the_text_is_found_whatever_ends_the_text(text, kind):
    assert kinds(text) == [kind]
    assert kinds(f"NIE {text}") == [kind]


def test_the_values_after_an_amounts_thousands_are_found():
    assert kinds("1,500.00-2,000.00, call 646-770-1943") == ["phone"]
    assert kinds("total 339,990.28 or 12.5, call 646-770-1943") == ["phone"]


# --- look-alikes turned away before any check ---------------------------------------------


@pytest.mark.parametrize(
    "around", ["[{}]", "`{}`", "^{}", "]{}", "[{}](tel:)", "tel [{}]", "x `{}`", "a^{}", "see ]{}"]
)
def test_a_phone_in_brackets_or_backquotes_is_masked(around):
    """Only capitals (and a word before a dash) turn a run away unread: "[", "]", "^" and
    "`" sort between "Z" and "a" and are no letters."""
    assert kinds(around.format("646-770-1943")) == ["phone"]


@pytest.mark.parametrize(
    "text",
    ["-646-770-1943 call me", "Call\n-646-770-1943", "Phones:\n-646-770-1943\n-503-204-4660"],
)
def test_a_phone_after_a_dash_that_follows_no_word_is_masked(text):
    """ "ORD-2025-…" is a label's number; a dash after a newline, or opening the text, is a
    list's bullet."""
    assert kinds(text) == ["phone"] * text.count("-646") + ["phone"] * text.count("-503")


@pytest.mark.parametrize("first", ["SKU578912", "JD47781234", "ORD-2025-1234", "T-20251014-88"])
def test_the_values_after_a_number_glued_to_a_word_are_found(first):
    assert kinds(f"{first}, call 646-770-1943 or 4111 1111 1111 1111") == ["phone", "card"]


@pytest.mark.parametrize("word", ["ORD", "T", "ab_1"])
def test_a_number_after_a_word_and_a_dash_is_the_words(word):
    assert kinds(f"see {word}-13812345678 ok") == []


@pytest.mark.parametrize("prefix", ["Smith,", ",", "12 ,", "a,", "tel.,", "电话,"])
@pytest.mark.parametrize("after", ["", "  503-204-4660"])
def test_a_phone_after_a_comma_that_follows_no_digit_is_masked(prefix, after):
    """Only "<digit>," makes the next three digits and a decimal point an amount's."""
    text = f"{prefix}646.770 1943{after}"

    assert kinds(text) == ["phone"] * (1 + bool(after))


@pytest.mark.parametrize(
    "amount", ["balance 12,849.14 (9783)", "7,234.26 44701", "[3,650.733 (12)", "1,882.03(51000)"]
)
@pytest.mark.parametrize("after", ["", "  503-204-4660"])
def test_an_amounts_decimals_after_its_thousands_stay_readable_whatever_follows(amount, after):
    masker = Masker(b"key")

    masked = masker.mask_text(amount + after)

    assert masked.startswith(amount)
    assert [kind for kind, _ in masker.drain()] == ["phone"] * bool(after)


# --- JSON escapes ---------------------------------------------------------------------------


@pytest.mark.parametrize("escape", ["\\n", '\\"'])
def test_an_escaped_newline_or_quote_ends_a_url_before_a_phone(escape):
    """JSON written with its escapes (``json.dumps``' default): "\\n" and '\\"' end the URL
    as a newline and a quote would, and what follows is no part of its path."""
    text = f'{{"note": "https://shop.example.com/help{escape}phone=13812345678"}}'

    assert kinds(text) == ["phone"]
    assert kinds(text.replace(escape, "/")) == []


@pytest.mark.parametrize("char", ["+", "(", "-", ":", "#", "/", "=", ","])
@pytest.mark.parametrize("value", ["44 20 7946 0958", "13812345678", "646-770-1943"])
def test_an_escaped_character_is_read_as_the_character_it_stands_for(char, value):
    r""" "\u002b44 20 7946 0958" is "+44 20 7946 0958": every value is found where it is in
    the escaped text, as in the text it stands for (the escape six characters for one)."""
    escaped = f"x \\u{ord(char):04x}{value} y"
    plain = f"x {char}{value} y"

    expected = [(s + 5, e + 5, kind, e164) for s, e, kind, e164 in _find(plain)]
    assert _find(escaped) == expected


def _find(text: str) -> list:
    return NumberFinder(PhoneValidator()).find(text)


@pytest.mark.parametrize(
    "escape",
    [
        "\\t",
        "\\r",
        "\\n",
        '\\"',
        "\\\\",
        "\\b",
        "\\f",
        "\\/",
        "\\ud83d\\ude00",
        "\\u00e9",
        "\\u8bc1",
    ],
)
@pytest.mark.parametrize("value", ["13812345678", "510107198805062185", "NL91ABNA0417164300"])
def test_a_value_after_an_escape_is_found_where_it_is_in_the_escaped_text(escape, value):
    text = f'{{"a": "x{escape}{value} {escape}"}}'

    assert [v for _, v in found(text)] == [value]


@pytest.mark.parametrize("letter", ["A", "Z", "b", "x"])
def test_an_escaped_letter_or_digit_before_a_phone_glues_nothing_to_it(letter):
    r""" "\u0041646-770-1943": no number starts or continues in an escape, a letter's
    included (the escape reads as NULs)."""
    text = f'"503-204-4660\\u{ord(letter):04x}646-770-1943 \\u0031\\u0032"'

    assert [v for _, v in found(text)] == ["503-204-4660", "646-770-1943"]


def test_escaped_full_width_digits_start_no_run():
    text = json.dumps("\uff11\uff13\uff18\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18")

    assert found(text) == []


# --- clock times, URLs, masked forms ------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "phone:13812345678",
        ":4111 1111 1111 1111",
        "X\\b:390.533.447-05",
        "a+:13812345678",
        "x 12a:13812345678",
    ],
)
def test_a_value_after_a_colon_that_follows_no_digit_is_masked(text):
    assert len(kinds(text)) == 1


@pytest.mark.parametrize("text", ["at 08:13812345678", "8:13812345678", "t 8:53:04.664450"])
def test_digits_after_a_digit_and_a_colon_are_a_clock_times(text):
    assert kinds(text) == []


@pytest.mark.parametrize("kind", ["national_id", "phone", "iban", "card"])
def test_a_masked_form_at_the_start_of_the_text_is_left_as_it_is(kind):
    """Masking is idempotent: the fingerprint of a masked form is no number, even when the
    form opens the text."""
    assert found(f"[{kind}:03012345] and") == []
    assert found(f"[{kind}:536-90-4399]") == []


@pytest.mark.parametrize("padding", [0, 70])
def test_the_last_scheme_before_digits_decides_whether_they_are_a_urls(padding):
    """The digits of a URL's path, in another URL's query, are the inner URL's (its last
    "://"), however long the URL."""
    url = f"https://a.example.com/?next=https://b.example.com/{'x' * padding}/13812345678"

    assert kinds(f"see {url} now") == []
    assert kinds(f"see https://a.example.com/?next=x{'x' * padding}&p=13812345678 now") == ["phone"]


# --- labels ---------------------------------------------------------------------------------


def test_a_number_after_a_hash_opening_the_text_is_the_labels():
    assert kinds("#13812345678") == []
    assert kinds("+86 138 1234 5678 #") == ["phone"]
    assert kinds("13812345678 see #") == ["phone"]


def test_a_label_is_read_in_the_24_characters_before_the_number():
    assert kinds("order" + " " * 19 + "6467701943") == []
    assert kinds("order" + " " * 20 + "6467701943") == ["phone"]


def test_the_label_memo_holds_at_most_its_size():
    numbers_module._LABELLED.clear()
    most = 0
    for i in range(numbers_module.LABEL_MEMO_SIZE + 2):
        numbers_module._labelled(f"x{i:08d} ref 1234567", 14)
        most = max(most, len(numbers_module._LABELLED))

    assert most == numbers_module.LABEL_MEMO_SIZE


# --- the IBAN check -------------------------------------------------------------------------


_FULL_WIDTH = str.maketrans(
    "0123456789", "\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19"
)


def _with_check_digits(value: str) -> str:
    return value[:2] + stdnum_iban.calc_check_digits(value[:2] + "00" + value[4:]) + value[4:]


@pytest.mark.parametrize("country", sorted(standards.IBAN_REGISTRY))
@BOUNDED
@given(data=st.data())
def test_an_iban_is_valid_exactly_when_stdnum_says_so(country, data):
    """Its check digits (in full-width digits too, as the library reads them), its BBAN's
    format (each field's length and alphabet) and its country's own check (Belgium's,
    Spain's, Montenegro's, Norway's) are each checked."""
    value = data.draw(standards.ibans(country))
    at = data.draw(st.integers(4, len(value) - 1))
    other = data.draw(st.sampled_from("0123456789ABCXYZ"))
    changed = value[:at] + other + value[at + 1 :]

    full_width = value[:2] + value[2:4].translate(_FULL_WIDTH) + value[4:]
    for candidate in (value, changed, _with_check_digits(changed), full_width):
        assert checks.iban_ok(candidate) == stdnum_iban.is_valid(candidate), candidate
        assert checks.iban_ok(standards.grouped_in_fours(candidate)) == (
            stdnum_iban.is_valid(candidate)
        )


@pytest.mark.parametrize("country", ["BE", "ES", "ME", "NO"])
@BOUNDED
@given(data=st.data())
def test_an_iban_failing_its_countrys_own_check_is_none(country, data):
    value = data.draw(standards.ibans(country))
    at = len(value) - 1
    changed = _with_check_digits(value[:at] + str((int(value[at]) + 1) % 10))

    assert checks.iban_ok(value)
    assert checks.iban_ok(changed) == stdnum_iban.is_valid(changed)
