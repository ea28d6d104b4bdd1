"""The masking rules themselves: what each detector takes, and what checksums leave alone."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from stdnum.cn import ric

from traces.masking import Masker, under


@pytest.fixture
def masker():
    return Masker(b"test-key")


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("call 13812345678 now", "call 138****5678 now"),
        ("call 138-1234-5678", "call 138****5678"),
        ("手机13812345678。", "手机138****5678。"),
        ("+86 138 1234 5678", "+86 138****5678"),
        ("+1 415 555 0100", "+14*****0100"),
        ("mail Zhang.Wei@example.com", "mail Z***@example.com"),
        ("13812345678@qq.com", "1***@qq.com"),
        ("card 4111 1111 1111 1111.", "card ****1111."),
        ("card 5500-0000-0000-0004", "card ****0004"),
        ("IBAN GB82WEST12345698765432", "IBAN GB****5432"),
        (
            "Authorization: Bearer abcdEFGH1234ijklMNOP",
            "Authorization: Bearer [bearer_token removed]",
        ),
        ("key AKIAIOSFODNN7EXAMPLE", "key [api_key removed]"),
        ('{"api_key": "abcd1234efgh"}', '{"api_key": "[secret removed]"}'),
        ("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n", "[private_key removed]"),
        # Phones the way people write them (masking v2).
        ("call (718) 951-1807 today", "call 718***1807 today"),
        ("call 503-204-4660.", "call 503***4660."),
        ("call 646.770.1943", "call 646***1943"),
        ("call 1-718-951-1807", "call 171****1807"),
        ("Berlin 030 12345678", "Berlin 030****5678"),
        ("Paris 06 12 34 56 78", "Paris 061***5678"),
        ("Tokyo 090-1234-5678", "Tokyo 090****5678"),
        ("Delhi 98765 43210", "Delhi 987***3210"),
        ("Madrid 91 123 45 67", "Madrid *****4567"),
        ("Roma +39 312 345 6789", "Roma +39******6789"),
        ("London +44 (0)20 7946 0958", "London +44*******0958"),
        ("电话：0755-8888 1234。", "电话：075*****1234。"),
        ("IBAN GB82 WEST 1234 5698 7654 32 ok", "IBAN GB****5432 ok"),
        ("NL91ABNA0417164300", "NL****4300"),
        ("card 3782 822463 10005", "card ****0005"),
        ("order ref 4111 1111 1111 1111", "order ref ****1111"),  # no label unmasks a card
    ],
)
def test_each_detector_masks_its_kind(masker, text, masked):
    assert masker.mask_text(text) == masked


@pytest.mark.parametrize(
    "text",
    [
        "SSN 536-90-4399",
        "SSN 536 90 4399",
        "NI number AB 12 34 56 C",
        "NINO AB123456C.",
        "AB 123456 C, the text's first characters",
        "AB123456C",
        "DNI 12345678Z",
        "DNI 12345678-Z",
        "NIE X1234567L",
        "Aadhaar 2341 2341 2346",
        "Aadhaar 234123412346",
        "CPF 390.533.447-05",
        "身份证11010519491231002X。",
    ],
)
def test_national_ids_checked_by_python_stdnum_become_fingerprints(masker, text):
    masked = masker.mask_text(text)

    assert "[national_id:" in masked
    assert not any(c.isdigit() for c in masked.split("[national_id:")[0])


@pytest.mark.parametrize(
    "text",
    [
        "SSN 666-12-3456 (area 666 is never issued)",
        "SSN 536-00-4399 (group 00 is never issued)",
        "NINO BG123456C (BG is never issued)",
        "DNI 12345678A (wrong letter)",
        "Aadhaar 2341 2341 2347 (fails Verhoeff)",
        "CPF 390.533.447-06 (fails its check digits)",
        "tracking YT2233445566778899 and JD0012345678901 are no IBANs",
        "YT22 3344 5566 7788 99 is no IBAN either",
        "order 7189511807, invoice #5032044660, created_at 1764469680",
        '{"order_id": "7189511807", "ts": "5032044660"}',
        "amounts $1,234,567.89 and 1234567.89 EUR, IP 192.168.100.200, v10.20.30",
        "at 2026-11-30 14:22:05, on 30/11/2026 and 2026/11/30, 20261130142205",
        "https://shop.example.com/orders/7189511807?ts=5032044660",
        "SKU-4471-BLK-XL, SKU7189511807, EAN 4006381333931",
        "10:22:04.664450 and 08:53:04.718951",
    ],
)
def test_look_alikes_of_the_new_kinds_stay_readable(masker, text):
    assert masker.mask_text(text) == text


def test_a_phone_written_either_way_has_one_fingerprint(masker):
    masker.mask_text("(718) 951-1807 / 718.951.1807 / +1 718-951-1807 / 001 718 951 1807")

    assert len(masker.drain()) == 1


def test_a_national_number_valid_in_two_regions_takes_the_region_it_is_formatted_for(masker):
    masker.mask_text("06 12 34 56 78")
    french = masker.drain()
    masker.mask_text("+33 6 12 34 56 78")

    assert masker.drain() == []  # already found: the same E.164 number
    assert len(french) == 1


def test_phone_regions_are_configurable(settings):
    settings.HARNESS_PHONE_REGIONS = ("CN",)
    masker = Masker(b"test-key")

    assert masker.mask_text("call (718) 951-1807") == "call (718) 951-1807"
    assert masker.mask_text("call +1 718 951 1807") == "call +17*****1807"


def test_an_unknown_phone_region_is_refused(settings):
    settings.HARNESS_PHONE_REGIONS = ("CN", "XX")

    with pytest.raises(ImproperlyConfigured, match=r"HARNESS_PHONE_REGIONS: .*XX"):
        Masker(b"test-key")


def test_the_new_kinds_mask_idempotently(masker):
    once = masker.mask_text(
        "(718) 951-1807, 030 12345678, SSN 536-90-4399, NINO AB123456C, DNI 12345678Z, "
        "Aadhaar 2341 2341 2346, CPF 390.533.447-05, GB82 WEST 1234 5698 7654 32"
    )

    assert masker.mask_text(once) == once


@pytest.mark.parametrize(
    "masked", ["[national_id:03012345]", "[address:02123456]", "[customer_number:0301234567]"]
)
def test_a_fingerprint_of_digits_only_in_a_masked_form_is_left_alone(masker, masked):
    # 8 hex digits are all decimal digits in 2% of fingerprints: some are valid phone numbers.
    assert masker.mask_text(f"re {masked}, ok") == f"re {masked}, ok"


def test_a_resident_id_becomes_a_fingerprint_only(masker):
    masked = masker.mask_text("ID 11010519491231002X")

    assert masked.startswith("ID [national_id:")
    assert "1949" not in masked


@pytest.mark.parametrize(
    "text",
    [
        "ticket T-20250318-007, order ORD-55213, invoice INV-2025-0318",
        "110105194912310021 fails the ID check digit",
        "4111111111111112 fails Luhn",
        "GB82WEST12345698765433 fails mod 97",
        "12345678901 is no Chinese mobile, 2026-11-30T02:28:00.123456+00:00 no phone",
        "run 5f0c6a2e8b7d4c1e9a0b313812345678 and key acme:call_2_1",
    ],
)
def test_numbers_that_fail_their_checksum_or_shape_stay_readable(masker, text):
    assert masker.mask_text(text) == text


def test_masking_is_idempotent(masker):
    once = masker.mask_text(
        "13812345678 a@b.example 4111111111111111 password=hunter22hunter "
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig"
    )

    assert masker.mask_text(once) == once


def test_declared_fields_are_masked_by_kind_and_remembered_in_free_text(masker):
    result = {"holder": "Zhang Wei", "ids": [{"id": "G12345678"}], "pin": "1234", "n": 7}

    masked = masker.mask(result, {"/holder": "name", "/ids/*/id": "national_id", "/pin": "secret"})

    assert masked["holder"] == "Z**** W**"
    assert masked["ids"][0]["id"].startswith("[national_id:")
    assert masked["pin"] == "[secret removed]"
    assert masked["n"] == 7
    assert result["holder"] == "Zhang Wei"  # the caller's value is not touched
    assert masker.mask_text("Dear Zhang Wei, re G12345678") == (
        f"Dear Z**** W**, re {masked['ids'][0]['id']}"
    )
    assert masker.mask_text("Zhang Weiss") == "Zhang Weiss"  # whole words only


def test_members_named_like_credentials_are_removed_and_numbers_are_checked(masker):
    masked = masker.mask(
        {
            "token": "opaque-value",
            "prompt_tokens": 12,
            "phone": 13812345678,
            "amount_cents": 7189511807,  # 10-digit integers are amounts, ids, epoch seconds
            "card": 4111111111111111,
            "order": 20261130142205,
        }
    )

    assert masked == {
        "token": "[secret removed]",
        "prompt_tokens": 12,
        "phone": "138****5678",
        "amount_cents": 7189511807,
        "card": "****1111",
        "order": 20261130142205,
    }


def test_each_identifier_is_fingerprinted_once_whatever_its_spelling(masker):
    masker.mask_text("13812345678, 138 1234 5678, +86 138-1234-5678")

    found = masker.drain()

    assert len(found) == 1
    assert found[0][0] == "phone"
    assert masker.drain() == []


@pytest.mark.parametrize(
    "text",
    [
        "nothing secret here " * 20,
        "ok",
        "sk-",
        "pwd=hunter22",
        "call 13812345678",
        "Bearer abcdEFGH1234ijklMNOP",
        "filler " * 40 + "Authorization: Bearer abcdEFGH1234ijklMNOP and PASSWORD=hunter22hunter",
        "filler " * 40
        + "key sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2M3n4 eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.s",
        "短" * 200 + "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----",
    ],
)
def test_the_needle_gate_finds_the_same_with_or_without_hyperscan(monkeypatch, text):
    from traces.masking import gate
    from traces.masking.detectors import TEXT_DETECTORS

    with_engine = gate.NeedleGate(TEXT_DETECTORS)
    monkeypatch.setattr(gate, "hyperscan", None)
    pure_python = gate.NeedleGate(TEXT_DETECTORS)

    assert pure_python.engine == "python"
    assert [d.kind for d in with_engine.candidates(text)] == [
        d.kind for d in pure_python.candidates(text)
    ]


def test_a_resident_id_shaped_number_whose_area_is_no_county_is_left_readable(masker):
    # 110001 is in stdnum's table as part of Beijing but names no county; the library raises
    # KeyError for it rather than saying the birth place is invalid.
    body = "110001" + "19900101001"
    number = body + ric.calc_check_digit(body + "0")

    assert masker.mask_text(f"ID {number} ok") == f"ID {number} ok"


# --- declared fields: what each pointer reaches is masked by its kind, whatever it holds ---


def test_a_declared_root_value_is_masked_and_learnt():
    masker = Masker(b"key")

    assert masker.mask("Zhang Wei", {"": "name"}) == "Z**** W**"
    assert masker.mask_text("Dear Zhang Wei") == "Dear Z**** W**"


def test_every_value_inside_a_declared_list_or_object_is_masked_by_the_kind():
    masker = Masker(b"key")
    value = {
        "holders": ["Zhang Wei", "Li Na"],
        "home": {"street": "1 Main Street", "city": "Springfield"},
        "none": [],
        "empty": {},
    }

    masked = masker.mask(
        value, {"/holders": "name", "/home": "address", "/none": "name", "/empty": "address"}
    )

    assert masked["holders"] == ["Z**** W**", "L* N*"]
    assert set(masked["home"]) == {"street", "city"}
    assert all(v.startswith("[address:") for v in masked["home"].values())
    assert masked["none"] == []
    assert masked["empty"] == {}
    assert masker.mask_text("Li Na lives at 1 Main Street") == (
        f"L* N* lives at {masked['home']['street']}"
    )


def test_a_declared_field_holding_null_or_a_boolean_is_kept_as_it_is():
    value = {"holder": None, "vip": True, "blocked": False}

    assert Masker(b"key").mask(value, {"/holder": "name", "/vip": "name", "/blocked": "phone"}) == (
        value
    )


def test_pointers_re_rooted_under_a_member_mask_the_fields_below_it():
    sensitive = under("/result", {"/holder": "name", "/phones/*": "phone"})

    masked = Masker(b"key").mask(
        {"result": {"holder": "Zhang Wei", "phones": ["13812345678"]}, "holder": "Zhang Wei"},
        sensitive,
    )

    assert sensitive == {"/result/holder": "name", "/result/phones/*": "phone"}
    assert masked["result"] == {"holder": "Z**** W**", "phones": ["138****5678"]}
    assert masked["holder"] == "Z**** W**"  # learnt: masked wherever it shows up again


def test_pointers_reach_members_whose_names_hold_a_slash_or_a_tilde():
    # RFC 6901: "~1" is "/" and "~0" is "~" in a pointer's segment.
    value = {"a/b": "Zhang Wei", "m~n": "Li Na", "m~1n": "Wang Fang"}

    masked = Masker(b"key").mask(value, {"/a~1b": "name", "/m~0n": "name", "/m~01n": "name"})

    assert masked == {"a/b": "Z**** W**", "m~n": "L* N*", "m~1n": "W*** F***"}


def test_a_sensitive_field_that_is_no_json_pointer_is_refused_naming_it():
    with pytest.raises(ValueError, match="not a JSON pointer: 'holder'"):
        Masker(b"key").mask({"holder": "Zhang Wei"}, {"holder": "name"})


def test_declared_fields_are_masked_in_a_payload_holding_values_json_has_no_type_for():
    import datetime
    import decimal
    import uuid

    value = {
        "holder": "Zhang Wei",
        "at": datetime.date(2026, 11, 30),
        "amount": decimal.Decimal("12.50"),
        "id": uuid.UUID(int=7),
    }

    masked = Masker(b"key").mask(value, {"/holder": "name"})

    assert masked == {
        "holder": "Z**** W**",
        "at": "2026-11-30",
        "amount": "12.50",
        "id": "00000000-0000-0000-0000-000000000007",
    }


def test_a_declared_value_is_found_again_whole_when_a_shorter_one_it_begins_with_is_known():
    masker = Masker(b"key")
    masker.mask({"surname": "Zhang", "name": "Zhang Wei"}, {"/surname": "name", "/name": "name"})

    assert masker.mask_text("Dear Zhang Wei, and Mr Zhang") == "Dear Z**** W**, and Mr Z****"


@pytest.mark.parametrize(
    ("declared", "text", "stored"),
    [
        ("张伟", "客户张伟来电", "客户张*来电"),  # two characters: long enough to look for
        ("Li", "Li called", "L* called"),
        ("张伟", "user张伟2024", "user张*2024"),  # not ASCII: found wherever it is
        ("José", "Josés", "J***s"),
        ("Li", "Lin, Li2 and Li", "Lin, Li2 and L*"),  # ASCII: whole words only
    ],
)
def test_a_declared_value_of_two_characters_or_more_is_found_in_later_text(declared, text, stored):
    masker = Masker(b"key")
    masker.mask({"holder": declared}, {"/holder": "name"})

    assert masker.mask_text(text) == stored


def test_a_declared_value_of_one_character_is_not_looked_for_in_free_text():
    masker = Masker(b"key")
    assert masker.mask({"initial": "X"}, {"/initial": "name"}) == {"initial": "X"}
    assert masker.mask({"floor": "7"}, {"/floor": "address"})["floor"].startswith("[address:")

    assert masker.mask_text("Plan X is ready on floor 7") == "Plan X is ready on floor 7"


def test_pointers_reach_list_elements_by_index_and_every_member_by_a_star():
    value = {
        "holders": ["Zhang Wei", "Li Na"],
        "by_id": {"c1": {"name": "Wang Fang"}, "c2": {"name": "Chen Jie"}},
    }

    masked = Masker(b"key").mask(value, {"/holders/1": "name", "/by_id/*/name": "name"})

    assert masked == {
        "holders": ["Zhang Wei", "L* N*"],
        "by_id": {"c1": {"name": "W*** F***"}, "c2": {"name": "C*** J**"}},
    }


@pytest.mark.parametrize(
    "pointer", ["/missing", "/holders/2", "/holders/first", "/holders/0/deeper", "/n/x"]
)
def test_a_pointer_that_does_not_resolve_masks_nothing_and_is_no_error(pointer):
    value = {"holders": ["Anna", "Bert"], "n": 7}

    assert Masker(b"key").mask(value, {pointer: "name"}) == value


def test_an_address_whose_local_part_is_longer_than_the_search_window_is_masked_whole():
    # emails.find_emails looks back 80 characters at a time from the "@".
    masker = Masker(b"key")

    assert masker.mask_text("to 中" + "a" * 100 + "@example.com ok") == "to 中a***@example.com ok"
