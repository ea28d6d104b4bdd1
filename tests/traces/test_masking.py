"""The masking rules themselves: what each detector takes, and what checksums leave alone."""

import pytest

from traces.masking import Masker


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
    ],
)
def test_each_detector_masks_its_kind(masker, text, masked):
    assert masker.mask_text(text) == masked


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
    masked = masker.mask({"token": "opaque-value", "prompt_tokens": 12, "phone": 13812345678})

    assert masked == {"token": "[secret removed]", "prompt_tokens": 12, "phone": "138****5678"}


def test_each_identifier_is_fingerprinted_once_whatever_its_spelling(masker):
    masker.mask_text("13812345678, 138 1234 5678, +86 138-1234-5678")

    found = masker.drain()

    assert len(found) == 1
    assert found[0][0] == "phone"
    assert masker.drain() == []
