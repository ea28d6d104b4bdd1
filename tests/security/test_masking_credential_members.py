"""Whatever a member named like a credential holds is removed: a numeric PIN or password, a
list of keys, an object holding the value (``{"client_secret": {"value": "…"}}``) were stored
in clear, only a string directly under the name was removed (issue 20, found by the mutation
work on the masker)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traces.masking import Masker

CREDENTIAL_NAMES = ["password", "pwd", "client_secret", "api_key", "access_token", "token"]
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(min_size=1).filter(lambda text: not text.endswith(" removed]")),
)
JSON = st.recursive(
    LEAVES,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(["value", "id", "keys", "v2"]), children, max_size=4)
    ),
    max_leaves=12,
)


def leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in leaves(item)]
    return [value]


def shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(item) for item in value]
    return None if value is None or isinstance(value, bool) else "leaf"


@settings(max_examples=80, deadline=None)
@given(name=st.sampled_from(CREDENTIAL_NAMES), value=JSON)
def test_every_string_and_number_under_a_credential_name_is_removed(name, value):
    masked = Masker(b"key").mask({name: value, "note": "kept"})

    assert masked["note"] == "kept"
    kept = [leaf for leaf in leaves(masked[name]) if leaf != "[secret removed]"]
    assert all(leaf is None or isinstance(leaf, bool) for leaf in kept), kept
    assert shape(masked[name]) == shape(value)


@pytest.mark.parametrize(
    "payload",
    [
        {"password": 12345678},
        {"pin": 1234, "api_key": ["AbC123opaque", "XyZ789opaque"]},
        {"client_secret": {"value": "opaque-value-1", "rotated": "opaque-value-0"}},
        {"token": {"access": "opaque-1", "refresh": "opaque-2", "expires_in": 3600}},
    ],
)
def test_no_credential_is_stored_in_clear_whatever_it_is_held_in(payload):
    stored = repr(Masker(b"key").mask(payload))

    for clear in ("12345678", "AbC123opaque", "XyZ789opaque", "opaque-value", "opaque-1"):
        assert clear not in stored


@pytest.mark.parametrize(
    "payload",
    [
        {"token": "[jwt removed]", "api_key": "[api_key removed]"},
        {"password": ["[secret removed]", None, True], "secret": {"value": "[secret removed]"}},
        {"password": "", "token": None, "api_key": False},
    ],
)
def test_a_credential_removed_already_or_empty_is_stored_as_it_is(payload):
    assert Masker(b"key").mask(payload) == payload
