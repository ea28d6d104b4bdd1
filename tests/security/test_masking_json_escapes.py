"""A declared value written into a JSON text with non-ASCII characters as they are (the form
the loop's tool messages use: ``json.dumps(..., ensure_ascii=False)``) must be masked there
too (it once remembered the ``ensure_ascii=True`` escape only: docs/mutation.md, "Found on the
way")."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.traces import standards
from tests.traces.test_masking_remembered import WORD, declared, escaped
from traces.masking import Masker
from traces.masking.phones import DEFAULT_REGIONS


@settings(max_examples=50, deadline=None)
@given(
    name=st.builds(
        lambda a, sep, b: a + sep + b,
        st.text(alphabet="çéöñ张伟", min_size=2, max_size=4),
        st.sampled_from(['"', "\\", ' "x" ']),
        WORD,
    )
)
def test_a_declared_value_in_a_json_text_written_with_unicode_as_is_is_masked(name):
    masker = Masker(b"test-key")
    masked = declared(masker, name)
    later = json.dumps({"ok": True, "result": {"note": f"Dear {name}."}}, ensure_ascii=False)

    stored = masker.mask_text(later)

    assert escaped(name, ensure_ascii=False) not in stored
    assert f"Dear {masked}." in stored  # all of it: no first or last character left


@pytest.mark.parametrize("region", DEFAULT_REGIONS)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_a_phone_whose_plus_or_parenthesis_is_escaped_is_masked_as_written_plain(region, data):
    # "\u002b44 20 …": the span began on the escape's last character, so the stored text read
    # "\u002442…" ("$42…") or showed the escape's digits ("002***…") instead of the mask.
    number = data.draw(standards.phones(region, "mobile"))
    masker = Masker(b"test-key")

    for written in standards.phone_forms(number, national=True):
        if written[0] not in "+(":
            continue
        escaped_text = json.dumps({"phone": written}).replace(
            written[0], f"\\u{ord(written[0]):04x}", 1
        )

        masked = json.loads(masker.mask_text(escaped_text))["phone"]

        assert masked == masker.mask_text(written), (escaped_text, masked)
