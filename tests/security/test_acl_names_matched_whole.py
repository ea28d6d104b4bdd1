"""The ACL's subjects, user ids, role names and scopes are matched whole (``policy/acl.py``).
``NAME_PATTERN`` and ``SCOPE_PATTERN`` were ``^…$`` patterns used with ``re.match``, and ``$``
also matches before a trailing newline: a deny line for ``"bob\\n"`` (through the admin's
``save_line``, which does not go through the API's serializer) was stored, and never denied
``bob``. Every refusal names its field, and nothing is stored or audited."""

from __future__ import annotations

import string

import pytest
from casbin_adapter.models import CasbinRule
from hypothesis import example, given
from hypothesis import strategies as st

from policy import acl
from policy.errors import InvalidRule
from policy.models import PolicyChange

pytestmark = pytest.mark.django_db

NAME_CHARS = string.ascii_letters + string.digits + "_.@-"
names = st.text(NAME_CHARS, min_size=1, max_size=20)
# Control characters, the line breaks ``$`` and ``\s`` know among them, and a few separators.
controls = st.sampled_from(["\n", "\r", "\r\n", "\t", "\x00", "\x0b", "\x0c", "\x1f", "\x7f"])


@st.composite
def spoiled(draw, base=names):
    """A valid value with a control character put anywhere in it, the end included."""
    value = draw(base)
    at = draw(st.integers(0, len(value)))
    return value[:at] + draw(controls) + value[at:]


def _nothing_stored():
    assert not CasbinRule.objects.exists()
    assert not PolicyChange.objects.exists()


@given(subject=spoiled())
@example(subject="bob\n")
def test_a_permission_for_a_subject_with_a_control_character_is_refused(subject):
    for write in (
        lambda: acl.add_permission("acme", subject, "refund:write", "deny", "alice"),
        lambda: acl.save_line(None, "p", [subject, "acme", "refund", "write", "deny"], "alice"),
    ):
        with pytest.raises(InvalidRule) as caught:
            write()

        assert caught.value.details == {"subject": subject}
    _nothing_stored()


@given(role=spoiled())
@example(role="member\n")
def test_a_role_name_with_a_control_character_is_refused(role):
    for subject in ("role:" + role,):
        with pytest.raises(InvalidRule) as caught:
            acl.add_permission("acme", subject, "refund:write", "allow", "alice")
        assert caught.value.details == {"role": role}
    for write in (
        lambda: acl.assign_role("acme", "dave", role, "alice"),
        lambda: acl.save_line(None, "g", ["dave", "role:" + role, "acme"], "alice"),
    ):
        with pytest.raises(InvalidRule) as caught:
            write()
        assert caught.value.details == {"role": role}
    _nothing_stored()


@given(user=spoiled())
@example(user="dave\n")
def test_a_user_id_with_a_control_character_is_given_no_role(user):
    for write in (
        lambda: acl.assign_role("acme", user, "member", "alice"),
        lambda: acl.save_line(None, "g", [user, "member", "acme"], "alice"),
    ):
        with pytest.raises(InvalidRule) as caught:
            write()
        assert caught.value.details == {"user": user}
    _nothing_stored()


scopes = st.builds(
    "{}:{}".format,
    st.text(string.ascii_lowercase + string.digits + "_-", min_size=1, max_size=10),
    st.text(string.ascii_lowercase + string.digits + "_-", min_size=1, max_size=10),
)


@given(scope=spoiled(scopes))
@example(scope="refund:write\n")
def test_a_scope_with_a_control_character_is_refused(scope):
    with pytest.raises(InvalidRule) as caught:
        acl.add_permission("acme", "bob", scope, "deny", "alice")
    assert caught.value.details == {"scope": scope}
    obj, act = scope.split(":", 1) if scope.count(":") == 1 else (scope, "")
    with pytest.raises(InvalidRule) as caught:
        acl.save_line(None, "p", ["bob", "acme", obj, act, "deny"], "alice")
    assert caught.value.details == {"scope": f"{obj}:{act}"}
    _nothing_stored()


def test_a_line_without_a_tenant_or_of_no_known_type_names_its_field():
    with pytest.raises(InvalidRule) as caught:
        acl.save_line(None, "p", ["bob", "", "refund", "write", "deny"], "alice")
    assert caught.value.details == {"tenant": ""}
    with pytest.raises(InvalidRule) as caught:
        acl.save_line(None, "x", ["bob", "acme"], "alice")
    assert caught.value.details == {"ptype": "x"}
    _nothing_stored()


def test_the_deny_line_written_whole_denies_bob():
    acl.add_permission("acme", "bob", "refund:write", "allow", "alice")
    assert acl.decide("acme", "bob", "refund:write").allowed
    acl.save_line(None, "p", ["bob", "acme", "refund", "write", "deny"], "alice")

    assert not acl.decide("acme", "bob", "refund:write").allowed
