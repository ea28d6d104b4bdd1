"""The console's policy editor: a structured form turned into the change the what-if API takes,
checked by the API's serializers. Every valid edit goes form -> change -> form unchanged; an
invalid one is refused on the field at fault and saves nothing."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.console.policy_editor import (
    PolicyEditForm,
    change_of,
    check_change,
    form_data_of,
    refusals_of,
)
from harness.models import StaffTenantGrant, Tenant
from policy import services as policy
from policy.models import PolicyChange, PolicyRule

EDITOR = "/admin/policy/editor/"

names = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,30}", fullmatch=True).filter(
    lambda name: not name.startswith("default-")
)
labels = st.from_regex(r"[a-z0-9_-]{1,20}", fullmatch=True)
sinks = labels | st.just("*")
tools = st.from_regex(r"[a-zA-Z0-9_-]{1,30}", fullmatch=True) | st.just("*")
effects = st.sampled_from(["refuse", "require_approval"])
descriptions = st.text(st.characters(codec="utf-8", exclude_categories=["Cc", "Cs"]), max_size=60)
scalars = (
    st.text(st.characters(codec="utf-8", exclude_categories=["Cc", "Cs"]), max_size=12)
    | st.integers(-(10**6), 10**6)
    | st.booleans()
    | st.none()
)
matches = st.dictionaries(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), scalars, max_size=3)


def _rule(kind: str, **fields) -> dict:
    return {"name": fields.pop("name"), "kind": kind, **fields}


def _rules(kind: str, **fields) -> st.SearchStrategy[dict]:
    """Valid rules of ``kind``: the fields every rule has, and ``fields``."""
    common = {"name": names, "effect": effects, "description": descriptions}
    return st.builds(lambda **f: _rule(kind, **f), enabled=st.booleans(), **common, **fields)


call_rules = _rules("call", tool=tools, match=matches)
flow_rules = _rules("flow", label=labels, sink=sinks)
exclusive_rules = st.builds(
    lambda name, pair, **f: _rule("exclusive", name=name, label=pair[0], other_label=pair[1], **f),
    name=names,
    pair=st.tuples(labels, labels).filter(lambda pair: pair[0] != pair[1]),
    effect=effects,
    description=descriptions,
    enabled=st.booleans(),
)
rule_edits = st.builds(
    lambda op, rule: {"op": op, "rule": rule},
    st.sampled_from(["add", "update"]),
    call_rules | flow_rules | exclusive_rules,
)
permission_edits = st.builds(
    lambda op, subject, scope, effect: {
        "op": op,
        "permission": {"subject": subject, "scope": scope, "effect": effect},
    },
    st.sampled_from(["add", "remove"]),
    st.from_regex(r"(role:)?[A-Za-z0-9_.@-]{1,20}", fullmatch=True),
    st.from_regex(r"([a-z0-9_-]{1,10}|\*):([a-z0-9_-]{1,10}|\*)", fullmatch=True),
    st.sampled_from(["allow", "deny"]),
)
role_edits = st.builds(
    lambda op, user, role: {"op": op, "role": {"user": user, "role": role}},
    st.sampled_from(["add", "remove"]),
    st.from_regex(r"[A-Za-z0-9_.@-]{1,20}", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9_.@-]{1,20}", fullmatch=True),
)
removals = st.builds(lambda name: {"op": "remove", "rule": {"name": name}}, names)


def _posted(data: dict) -> dict:
    """The form's fields as a browser posts them (a checkbox is sent only when ticked)."""
    posted = {key: value for key, value in data.items() if key != "enabled"}
    return posted | ({"enabled": "on"} if data.get("enabled") else {})


def _through_the_form(data: dict) -> dict:
    form = PolicyEditForm(_posted(data))
    assert form.is_valid(), form.errors
    return change_of(form.cleaned_data)


@settings(max_examples=150, deadline=None)
@given(rule_edits | permission_edits | role_edits | removals)
def test_every_valid_edit_goes_form_to_change_to_form_unchanged(change):
    assert check_change(change) == {}  # the API takes it as it is

    data = form_data_of(change)
    back = _through_the_form(data)

    assert back == change
    assert form_data_of(back) == data


# Invalid values of one field of a valid rule: the field the API refuses, and the value.
INVALID = {
    "call": {
        "name": st.sampled_from(["Bad Name", "default-mine", "", "-lead", "a/b"]),
        "tool": st.sampled_from(["", "send mail", "a/b", "x" * 65]),
        "match": st.sampled_from(['["a"]', "not json", '{"a": {"b": 1}}', '"text"']),
    },
    "flow": {
        "label": st.sampled_from(["", "PII", "p i", " pii", "pii\n", "x" * 65]),
        "sink": st.sampled_from(["", "Ext", "a b", "**"]),
    },
    "exclusive": {"other_label": st.sampled_from(["", "Finance", "fin ance"])},
}


@st.composite
def invalid_edits(draw):
    kind = draw(st.sampled_from(sorted(INVALID)))
    rule = draw({"call": call_rules, "flow": flow_rules, "exclusive": exclusive_rules}[kind])
    field = draw(st.sampled_from(sorted(INVALID[kind])))
    data = form_data_of({"op": "add", "rule": rule}) | {field: draw(INVALID[kind][field])}
    return data, field


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(invalid_edits())
def test_an_invalid_field_is_refused_on_that_field(db, case):
    data, field = case

    errors = refusals_of("acme", _through_the_form(data))

    assert list(errors) == [field], errors
    assert errors[field]


def test_an_exclusive_rule_naming_one_label_twice_is_refused_on_the_other_label():
    change = {
        "op": "add",
        "rule": {"name": "x", "kind": "exclusive", "label": "pii", "other_label": "pii"}
        | {
            "effect": "refuse",
            "description": "",
            "enabled": True,
        },
    }

    assert list(check_change(change)) == ["other_label"]


def test_a_match_value_that_is_an_object_passes_the_shape_and_is_refused_by_the_policy(db):
    change = {
        "op": "add",
        "rule": {"name": "x", "kind": "call", "tool": "t", "match": {"a": {"b": 1}}}
        | {"effect": "refuse", "description": "", "enabled": True},
    }

    assert check_change(change) == {}  # the what-if API's shape allows it
    assert list(refusals_of("acme", change)) == ["match"]


@pytest.mark.parametrize(("op", "name"), [("add", "hold-reads"), ("update", "mine")])
def test_an_approval_rule_for_a_tool_never_held_is_refused_on_the_tool_as_the_api_does(
    db, op, name
):
    policy.create_rule(
        "acme", {"name": "mine", "kind": "call", "tool": "t", "effect": "refuse"}, actor="tests"
    )
    rule = {"name": name, "kind": "call", "tool": "get_ticket", "match": {}}
    rule |= {"effect": "require_approval", "description": "", "enabled": True}

    errors = refusals_of("acme", {"op": op, "rule": rule})

    assert list(errors) == ["tool"]
    assert 'get_ticket\'s tool file says approval: "never"' in errors["tool"]


def test_a_rule_name_taken_already_is_refused_on_the_name(db):
    policy.create_rule(
        "acme", {"name": "mine", "kind": "call", "tool": "t"} | {"effect": "refuse"}, actor="tests"
    )
    change = {
        "op": "add",
        "rule": {"name": "mine", "kind": "call", "tool": "u", "match": {}}
        | {"effect": "refuse", "description": "", "enabled": True},
    }

    assert list(refusals_of("acme", change)) == ["name"]


def test_a_permission_with_a_bad_scope_is_refused_on_the_scope_and_its_effect_on_acl_effect():
    bad_scope = {
        "op": "add",
        "permission": {"subject": "bob", "scope": "ticket", "effect": "allow"},
    }
    bad_effect = {"op": "add", "permission": {"subject": "bob", "scope": "a:b", "effect": "maybe"}}

    assert list(check_change(bad_scope)) == ["scope"]
    assert list(check_change(bad_effect)) == ["acl_effect"]


# --- through the page: a policy admin's invalid edit saves nothing ---------------------------


def policy_admin_client() -> Client:
    """alice, staff granted acme with the rules' and lines' admin permissions; the demo's
    policy makes her tenant_admin in acme (policy:admin)."""
    user = get_user_model().objects.create_user("alice", password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            codename__in=[
                "view_policyrule",
                "add_policyrule",
                "change_policyrule",
                "delete_policyrule",
                "view_run",
            ]
        )
    )
    StaffTenantGrant.objects.create(user=user, tenant=Tenant.objects.get(slug="acme"))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def alice(demo) -> Client:
    return policy_admin_client()


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(invalid_edits())
def test_saving_an_invalid_edit_shows_the_field_error_and_saves_nothing(alice, case):
    data, field = case
    rules, changes = PolicyRule.objects.count(), PolicyChange.objects.count()

    response = alice.post(EDITOR, _posted(data) | {"tenant": "acme", "save": "1"})

    assert response.status_code == 200
    assert response.context["form"].errors[field]
    assert PolicyRule.objects.count() == rules
    assert PolicyChange.objects.count() == changes


def test_a_policy_admin_previews_then_saves_a_structured_call_rule(alice):
    data = {
        "kind": "call",
        "op": "add",
        "name": "no-resolve",
        "tool": "update_ticket",
        "match": '{"action": "resolve"}',
        "effect": "refuse",
        "description": "Tickets are resolved by people.",
        "enabled": "on",
        "limit": "5",
    }

    preview = alice.post(EDITOR, data | {"tenant": "acme", "preview": "1"})
    saved = alice.post(EDITOR, data | {"tenant": "acme", "save": "1"})

    assert preview.status_code == 200
    assert preview.context["preview"]["policy_version"] >= 1
    assert 'name="save"' in preview.content.decode()
    assert json.loads(preview.context["raw"]) == change_of(preview.context["form"].cleaned_data)
    assert saved.status_code == 302
    assert saved["Location"].endswith("/admin/policy/effective/?tenant=acme#change-log")
    rule = policy.get_rule("acme", "no-resolve")
    assert (rule.tool, rule.match, rule.effect) == (
        "update_ticket",
        {"action": "resolve"},
        "refuse",
    )
    change = PolicyChange.objects.filter(tenant="acme").first()
    assert (change.actor, change.action, change.rule) == (
        "admin:alice",
        "add",
        ["rule", "no-resolve"],
    )


@pytest.mark.parametrize("enabled", [True, False])
def test_the_raw_json_is_previewed_as_the_form_would_be_and_bad_json_is_said_so(alice, enabled):
    change = {
        "op": "add",
        "rule": {"name": "no-mail-after-pii", "kind": "flow", "label": "pii", "sink": "*"}
        | {"effect": "require_approval", "description": "", "enabled": enabled},
    }

    used = alice.post(EDITOR, {"tenant": "acme", "raw": json.dumps(change), "use_raw": "1"})
    broken = alice.post(EDITOR, {"tenant": "acme", "raw": "{nope", "use_raw": "1"})

    assert used.status_code == 200
    assert used.context["preview"] is not None
    assert used.context["form"]["label"].value() == "pii"
    # What the form now holds is the JSON's edit: saving it from the form saves that edit.
    resent = PolicyEditForm(used.context["form"].data)
    assert resent.is_valid()
    assert change_of(resent.cleaned_data) == change
    assert broken.context["raw_error"].startswith("Not JSON")
    assert broken.context["preview"] is None


def test_a_stored_rule_opens_in_the_form_as_it_was_saved(alice):
    policy.create_rule(
        "acme",
        {"name": "hold-refunds", "kind": "call", "tool": "refund", "match": {"amount": 100}}
        | {"effect": "require_approval"},
        actor="tests",
    )

    page = alice.get(EDITOR, {"tenant": "acme", "rule": "hold-refunds"})

    form = page.context["form"]
    assert form["op"].value() == "update"
    assert form["tool"].value() == "refund"
    assert json.loads(form["match"].value()) == {"amount": 100}
