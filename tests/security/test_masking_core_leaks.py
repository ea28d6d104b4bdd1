"""Credentials the masker removed from a parsed object but kept in clear in text: the same JSON
in a tool result's text, a log line or a query string (found by the mutation work on the
masker's core), and HTTP Basic credentials anywhere."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traces.masking import Masker

KEY = b"test-key"
SECRET = "s3cr3t-Value-99"
# Each a name masker._SECRET_MEMBER removes under a parsed object.
TOKEN_NAMES = ["token", "id_token", "idToken", "session_token", "sessionToken", "TOKEN"]


@pytest.mark.parametrize("name", TOKEN_NAMES)
def test_a_token_is_removed_from_json_text_as_from_the_parsed_object(name):
    masker = Masker(KEY)
    payload = {name: SECRET, "note": "kept"}

    assert masker.mask(payload) == {name: "[secret removed]", "note": "kept"}
    for text in (json.dumps(payload), json.dumps(json.dumps(payload)), f"{name}={SECRET}"):
        masked = masker.mask_text(text)
        assert SECRET not in masked, masked
        assert "[secret removed]" in masked
        assert "kept" in masked or "note" not in text


def test_a_token_in_a_query_string_is_removed_and_the_rest_kept():
    masked = Masker(KEY).mask_text(f"GET https://api.example.com/cb?state=ok&token={SECRET}&x=1")
    assert masked == "GET https://api.example.com/cb?state=ok&token=[secret removed]&x=1"


@pytest.mark.parametrize(
    "text",
    [
        "next_page_token=abcd1234",  # a name that ends in "token" is not "token"
        "the token: 42",  # too short to be a credential
        "tokens: 1500",
        "basic information",  # a word after "basic" is no base64 of user:password
        "basic salary 4000",
        "Basic dGVzdA==",  # base64, but of "test": no user:password
    ],
)
def test_text_that_only_looks_like_a_credential_is_kept(text):
    assert Masker(KEY).mask_text(text) == text


@settings(max_examples=60, deadline=None)
@given(
    user=st.text(st.characters(codec="utf-8", exclude_characters=":\n"), max_size=20),
    password=st.text(st.characters(codec="utf-8"), min_size=1, max_size=30),
    scheme=st.sampled_from(["Basic", "basic", "BASIC"]),
)
def test_http_basic_credentials_are_removed_wherever_they_are_written(user, password, scheme):
    credentials = base64.b64encode(f"{user}:{password}".encode()).decode()
    masker = Masker(KEY)
    for text in (
        f"Authorization: {scheme} {credentials}",
        json.dumps({"headers": {"Authorization": f"{scheme} {credentials}"}}),
        f"curl -H 'authorization: {scheme} {credentials}' https://api.example.com",
    ):
        masked = masker.mask_text(text)
        assert credentials not in masked, masked
        assert f"{scheme} [secret removed]" in masked


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("Tel. 030 123456", "Tel. *****3456"),  # nine digits: "030**3456" showed seven
        ("Madrid 91 123 45 67", "Madrid *****4567"),
        ("call 0612345678", "call 061***5678"),  # ten digits and more: as before
        ("tel 06221 123", "tel ****1123"),  # eight digits
        ("Tel. +49 301234", "Tel. +****1234"),  # "+49**1234" showed six of eight
        ("Tel. +49 3012345", "Tel. +*****2345"),  # "+49***2345" showed six of nine
        ("Tel. +49 30 123456", "Tel. +49****3456"),  # ten digits and more: as before
    ],
)
def test_a_short_number_keeps_its_last_four_digits_only(text, masked):
    """A number of eight or nine digits (Germany's, Spain's, national or international) was
    stored with its first two or three and last four digits: six or seven of eight in clear."""
    assert Masker(b"key").mask_text(text) == masked


@settings(max_examples=40, deadline=None)
@given(
    credential=st.text("abcdefABCDEF0123456789_-", min_size=8, max_size=40).filter(
        lambda value: any(c.isdigit() for c in value) and value[0] not in "-_"
    ),
    name=st.sampled_from(["authorization", "Authorization", "AUTHORIZATION"]),
)
def test_an_authorization_without_a_scheme_is_removed_from_text_as_from_the_object(
    credential, name
):
    # '"authorization": "<key>"' in a tool result's text, a header line, a query string: the
    # parsed object lost the value, its text kept it (the detectors knew only "Bearer" and
    # "Basic" after the name).
    masker = Masker(KEY)
    payload = {name: credential, "note": "kept"}

    assert masker.mask(payload)[name] == "[secret removed]"
    for text in (
        json.dumps(payload),
        json.dumps(json.dumps(payload)),
        f"{name}: {credential}",
        f"GET /cb?{name}={credential}&x=1",
    ):
        masked = masker.mask_text(text)
        assert credential not in masked, masked
        assert "[secret removed]" in masked, masked


@pytest.mark.parametrize(
    "text",
    [
        "the authorization: approved",  # a word, not a credential: no digit
        "authorization: pending review",
        "Authorization: Digest username=1",  # a scheme's: left to its own rules
    ],
)
def test_an_authorization_that_is_a_word_or_has_a_scheme_is_kept(text):
    assert Masker(KEY).mask_text(text) == text
