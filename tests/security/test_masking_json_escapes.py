"""A declared value written into a JSON text with non-ASCII characters as they are (the form
the loop's tool messages use: ``json.dumps(..., ensure_ascii=False)``) must be masked there
too (it once remembered the ``ensure_ascii=True`` escape only: docs/mutation.md, "Found on the
way")."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.traces.test_masking_remembered import WORD, declared, escaped
from traces.masking import Masker


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
