"""Phone numbers written after another number and a space ("Room 12 0612345678", "tel
0612345678 13812345678"): the number finder judged the whole run of digits and spaces as one
number, found it was none, and kept the phone in clear (found reading the mutation run's
survivors of ``masking_numbers``, docs/mutation.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.traces import standards
from traces.masking import Masker
from traces.masking.phones import DEFAULT_REGIONS

NATIONAL = [
    (region, kind)
    for region in DEFAULT_REGIONS
    for kind in standards.NATIONAL_TYPES
    if standards.phonenumbers.example_number_for_type(region, standards.PHONE_TYPES[kind])
    and (region, kind) != ("IN", "toll_free")  # written without its prefix: no phone to us
]


@pytest.mark.parametrize(("region", "kind"), NATIONAL)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_a_phone_after_a_number_and_a_space_is_masked(region, kind, data):
    number = data.draw(standards.phones(region, kind))
    # Numbers a text puts before a phone: a room, a flight, a count, another phone.
    before = data.draw(st.sampled_from(["Room 7", "Flight 1425", "qty 3", "tel 13812345678"]))
    masker = Masker(b"key")

    for written in standards.phone_forms(number, national=True):
        text = f"{before} {written} please"

        masked = masker.mask_text(text)

        assert standards.leaks(masked, written) == [], (text, masked)
        assert masked.endswith(" please")


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("tel 0612345678 0698765432", "tel 061***5678 069***5432"),
        ("Flight SK1425 0612345678", "Flight SK1425 061***5678"),
        ("SKU5789 0612345678", "SKU5789 061***5678"),
        ("order 55 13812345678", "order 55 138****5678"),
        ("Ticket 20 (718) 951-1807", "Ticket 20 718***1807"),
    ],
)
def test_each_phone_among_numbers_in_a_row_is_masked_alone(text, masked):
    assert Masker(b"key").mask_text(text) == masked


@pytest.mark.parametrize(
    "text",
    [
        "YT22 3344 5566 7788 99",  # a tracking number's groups: not read from inside
        # Groups of one length, a phone among them if read from inside ("0401 1980", French
        # "01 74 94 10", "0859 2132"): one number.
        "see 8483 0401 1980 ok",
        "see 51 01 74 94 10 ok",
        "see 9883 1818 0859 2132 ok",
        "order 1234 5678 9012",  # a label's number, whatever its parts
        "ref 123 456 7890",
        "2025 10 14 report",
    ],
)
def test_the_groups_of_one_number_and_a_labels_numbers_stay_readable(text):
    assert Masker(b"key").mask_text(text) == text


def test_numbers_in_a_row_opening_the_text_are_each_masked():
    # The first number is read alone: its character before is none (a space), not the text's
    # last one.
    assert Masker(b"key").mask_text("0612345678 0698765432") == "061***5678 069***5432"


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("order 55 0612345 x", "order 55 ******* x"),  # seven digits stand alone
        ("order 55 646 770 1943", "order 55 646 770 1943"),  # the label's number, in groups
    ],
)
def test_after_a_labels_number_only_a_number_that_stands_alone_begins_a_value(text, masked):
    assert Masker(b"key").mask_text(text) == masked


@pytest.mark.parametrize("brand", [brand for brand, _, _ in standards.CARD_BRANDS])
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_a_card_followed_by_another_number_is_masked(brand, data):
    # The run "<card> <phone>" is no value as a whole: the card was read neither alone after a
    # label nor in its groups, and stayed in clear beside the masked phone.
    number = data.draw(standards.cards(brand))
    before = data.draw(st.sampled_from(["see", "order", "ref", "order 55", "#"]))
    masker = Masker(b"key")

    for written in standards.card_groupings(number):
        text = f"{before} {written} 13812345678 please"

        masked = masker.mask_text(text)

        assert standards.leaks(masked, written) == [], (text, masked)
        assert "13812345678" not in masked, (text, masked)
        assert masked.startswith(f"{before} "), masked
        assert masked.endswith(" please"), masked


@settings(max_examples=20, deadline=None)
@given(resident_id=standards.resident_ids())
def test_a_resident_id_after_a_label_and_before_another_number_is_masked(resident_id):
    text = f"order {resident_id} 13812345678"

    masked = Masker(b"key").mask_text(text)

    assert resident_id not in masked, masked
    assert "13812345678" not in masked, masked


@pytest.mark.parametrize(
    ("text", "phone"),
    [
        # The groups of one number before a phone are skipped, and the phone after them read.
        ("see 12 34 56 0612345678", "0612345678"),
        ("qty 10 20 30 13812345678", "13812345678"),
        ("see 1425 1426 1427 0612345678", "0612345678"),
        # Seven digits are a number of their own, never a group of one: after a seven-digit
        # number of the same length, the phone is still read.
        ("call 8087388 0612345 x", "0612345"),
        ("ref 7254679 0187893 x", "0187893"),
    ],
)
def test_a_phone_after_numbers_of_one_length_is_masked(text, phone):
    masked = Masker(b"key").mask_text(text)

    assert phone not in masked, masked
    assert masked.endswith(text[text.index(phone) + len(phone) :])


@pytest.mark.parametrize(("region", "kind"), NATIONAL)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_a_phone_followed_by_another_number_is_masked(region, kind, data):
    # "call +44 20 7946 0958 2 times": the run of numbers is no phone as a whole, and its
    # phone was looked for only at the run's end or a number alone, so it stayed in clear.
    number = data.draw(standards.phones(region, kind))
    after = data.draw(st.sampled_from(["2 times", "24 hours", "13812345678 too", "1 2 3"]))
    masker = Masker(b"key")

    for written in standards.phone_forms(number, national=True):
        text = f"call {written} {after}"

        masked = masker.mask_text(text)

        assert standards.leaks(masked, written) == [], (text, masked)


FULL_WIDTH_PHONE = "020 7946 0958".translate({ord(d): 0xFF10 + int(d) for d in "0123456789"})


@pytest.mark.parametrize(
    ("text", "phone"),
    [
        ("call 0044 20 7946 0958 2 times", "0044 20 7946 0958"),  # "00" for the "+"
        (f"call {FULL_WIDTH_PHONE} 2 times", FULL_WIDTH_PHONE),  # CJK text's digits
    ],
)
def test_a_phone_in_other_writings_followed_by_another_number_is_masked(text, phone):
    masked = Masker(b"key").mask_text(text)

    assert phone not in masked, masked
    assert masked.endswith(" 2 times"), masked


@pytest.mark.parametrize(
    "text",
    [
        # Ten digits valid as a phone in a default region, read out of a longer run: grouped
        # 4-6 as no region writes them, they stay a number.
        "see 7483 378876 82 ok",
        "see 6109 906958 36 ok",
        # An Aadhaar's digits (12, Verhoeff-valid) as the first groups of a longer grouping.
        "see 9883 1818 0859 2132 ok",
    ],
)
def test_a_value_read_out_of_a_longer_run_must_be_written_as_one(text):
    assert Masker(b"key").mask_text(text) == text


@pytest.mark.parametrize(
    ("text", "phone"),
    [
        # Two numbers after it: each later number's end is tried, not every other one.
        ("call 020 7946 0958 24 7", "020 7946 0958"),
        # A longer reading that is no value ("… 6789 (24"), then the phone's own.
        ("tel +86 131 2345 6789 (24) 7 days", "+86 131 2345 6789"),
        # Far into the text: how long a value is counts from its start, not the text's.
        ("For urgent matters, please call us on 020 7946 0958 24 hours a day", "020 7946 0958"),
    ],
)
def test_a_phone_before_numbers_is_masked_whole(text, phone):
    assert_masked_whole(text, phone)


def assert_masked_whole(text, phone):
    """``phone`` in ``text`` masked as it is alone, not a part of it read with the numbers
    after it."""
    masked = Masker(b"key").mask_text(text)

    alone = Masker(b"key").mask_text(phone)
    assert alone != phone
    assert alone in masked, masked


def test_a_card_before_a_number_as_long_as_its_groups_is_masked():
    # "1225", an expiry date: the card's last group is followed by one of its length, which
    # for another kind of value would be a group of one longer number.
    masked = Masker(b"key").mask_text("card 4111 1111 1111 1111 1225 ok")

    assert "4111" not in masked, masked
    assert masked.endswith(" 1225 ok"), masked


@pytest.mark.parametrize(("region", "kind"), NATIONAL)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_a_phone_followed_by_a_dash_and_a_name_in_capitals_is_masked(region, kind, data):
    # "13812345678-ZHANG WEI": a number, a dash and a capital were read as a Spanish DNI's
    # letter or nothing, and the phone stayed in clear.
    number = data.draw(standards.phones(region, kind))
    masker = Masker(b"key")

    for written in standards.phone_forms(number, national=True):
        text = f"contact {written}-ZHANG WEI"

        masked = masker.mask_text(text)

        assert standards.leaks(masked, written) == [], (text, masked)
        assert masked.endswith("-ZHANG WEI"), masked


@pytest.mark.parametrize(
    ("text", "phone"),
    [
        # After an amount's thousands any number may begin a value, not only one standing
        # alone: a phone in groups after an amount.
        ("total 2,000.00 020 7946 0958", "020 7946 0958"),
        ("Paid 2,000.00 138 1234 5678 today", "138 1234 5678"),
        # A code's run with no value in it, then a phone in a later run.
        ("SKU5789 12 ok, call 0612345678", "0612345678"),
    ],
)
def test_a_phone_after_an_amount_or_a_codes_run_is_masked(text, phone):
    assert_masked_whole(text, phone)
