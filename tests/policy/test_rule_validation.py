"""A rule edit through the policy services (what the admin, the console and the policy preview
call without the API's serializer): a rule of the wrong shape is refused with a message that
says what is wrong and details naming the field; edits are audited; shipped defaults stay."""

from __future__ import annotations

import pytest

from policy.errors import InvalidRule, RuleNotFound
from policy.models import PolicyChange, PolicyRule
from policy.services import create_rule, delete_rule, get_rule, list_rules, update_rule

pytestmark = pytest.mark.django_db

ADMIN = "alice"
FLOW = {
    "name": "pii-internal",
    "kind": "flow",
    "label": "pii",
    "sink": "internal",
    "effect": "refuse",
}
EXCLUSIVE = {
    "name": "finance-or-hr",
    "kind": "exclusive",
    "label": "finance",
    "other_label": "hr",
    "effect": "refuse",
}
CALL = {"name": "no-refunds", "kind": "call", "tool": "refund", "effect": "require_approval"}


def refusal(data: dict) -> tuple[str, dict]:
    with pytest.raises(InvalidRule) as caught:
        create_rule("acme", data, ADMIN)
    assert caught.value.code == "invalid_rule"
    assert not PolicyRule.objects.exists()
    assert not PolicyChange.objects.exists()
    return caught.value.message, caught.value.details


NAME_RULE = "name: 1-100 lower-case letters, digits, '_' or '-'"
LABEL_RULE = "must be a label such as 'pii'"


@pytest.mark.parametrize(
    ("data", "message", "details"),
    [
        ({**FLOW, "name": "Pii"}, NAME_RULE, {"name": "Pii"}),
        ({**FLOW, "name": "-pii"}, NAME_RULE, {"name": "-pii"}),
        ({**FLOW, "name": "a" * 101}, NAME_RULE, {"name": "a" * 101}),
        ({k: v for k, v in FLOW.items() if k != "name"}, NAME_RULE, {"name": ""}),
        (
            {**FLOW, "name": "default-mine"},
            "names starting 'default-' are reserved",
            {"name": "default-mine"},
        ),
        (
            {**FLOW, "kind": "sometimes"},
            "kind must be one of ['flow', 'exclusive', 'call']",
            {"kind": "sometimes"},
        ),
        (
            {**FLOW, "effect": "allow"},
            "effect must be one of ['refuse', 'require_approval']",
            {"effect": "allow"},
        ),
        ({**FLOW, "sink": ""}, "a flow rule needs 'sink'", {"field": "sink"}),
        ({**FLOW, "label": None}, "a flow rule needs 'label'", {"field": "label"}),
        ({**FLOW, "tool": "refund"}, "a flow rule takes no 'tool'", {"field": "tool"}),
        (
            {**EXCLUSIVE, "other_label": ""},
            "a exclusive rule needs 'other_label'",
            {"field": "other_label"},
        ),
        ({**EXCLUSIVE, "sink": "external"}, "a exclusive rule takes no 'sink'", {"field": "sink"}),
        ({**CALL, "tool": ""}, "a call rule needs 'tool'", {"field": "tool"}),
        ({**CALL, "label": "pii"}, "a call rule takes no 'label'", {"field": "label"}),
        (
            {**CALL, "other_label": "hr"},
            "a call rule takes no 'other_label'",
            {"field": "other_label"},
        ),
        ({**FLOW, "label": "PII"}, f"label {LABEL_RULE}", {"field": "label"}),
        ({**FLOW, "label": "*"}, f"label {LABEL_RULE}", {"field": "label"}),
        (
            {**EXCLUSIVE, "other_label": "h r"},
            f"other_label {LABEL_RULE}",
            {"field": "other_label"},
        ),
        (
            {**FLOW, "sink": "Ext ernal"},
            "sink must be a sink kind such as 'external', or '*'",
            {"field": "sink"},
        ),
        ({**CALL, "tool": "send mail"}, "tool must be a tool name, or '*'", {"field": "tool"}),
        (
            {**EXCLUSIVE, "other_label": "finance"},
            "an exclusive rule needs two different labels",
            {"field": "other_label"},
        ),
        (
            {**FLOW, "match": {"action": "escalate"}},
            "match is an object of argument values, for call rules only",
            {"field": "match"},
        ),
        (
            {**CALL, "match": ["action", "escalate"]},
            "match is an object of argument values, for call rules only",
            {"field": "match"},
        ),
        (
            {**CALL, "match": {"action": ["escalate"]}},
            "match values must be strings, numbers, booleans or null",
            {"field": "match"},
        ),
        (
            {**CALL, "match": {"to": {"country": "FR"}}},
            "match values must be strings, numbers, booleans or null",
            {"field": "match"},
        ),
    ],
)
def test_a_rule_of_the_wrong_shape_is_refused_saying_what_and_naming_the_field(
    data, message, details
):
    assert refusal(data) == (message, details)


@pytest.mark.parametrize(
    "data",
    [
        FLOW,
        {**FLOW, "sink": "*"},
        {**FLOW, "label": "a" * 64, "sink": "x_y-1"},
        EXCLUSIVE,
        CALL,
        {**CALL, "tool": "*"},
        {**CALL, "tool": "Update_Ticket-2", "match": {"a": 1, "b": None, "c": True, "d": "x"}},
        {**CALL, "name": "a" * 100},
    ],
)
def test_a_rule_of_the_right_shape_is_stored_as_given(data):
    spec, version = create_rule("acme", {**data, "description": "why"}, ADMIN)

    assert get_rule("acme", data["name"]) == spec
    expected = {
        "label": "",
        "other_label": "",
        "sink": "",
        "tool": "",
        "match": {},
        "description": "why",
        "enabled": True,
        "default": False,
    } | data
    assert spec.to_dict() == expected
    [change] = PolicyChange.objects.filter(tenant="acme")
    assert (change.actor, change.action, change.rule, change.version) == (
        ADMIN,
        "add",
        ["rule", data["name"]],
        version,
    )
    assert (change.before, change.after) == (None, expected)


def test_a_rule_name_is_taken_once_per_tenant():
    create_rule("acme", CALL, ADMIN)
    create_rule("globex", CALL, ADMIN)  # another tenant's name space

    with pytest.raises(InvalidRule) as caught:
        create_rule("acme", {**CALL, "tool": "other"}, ADMIN)

    assert (caught.value.message, caught.value.details) == (
        "A rule named 'no-refunds' exists already.",
        {"name": "no-refunds"},
    )
    assert get_rule("acme", "no-refunds").tool == "refund"


def test_an_update_keeps_what_it_does_not_name_and_records_before_and_after():
    create_rule("acme", {**CALL, "match": {"amount": 5}, "description": "big"}, ADMIN)

    spec, version = update_rule(
        "acme", "no-refunds", {"effect": "refuse", "name": "renamed"}, ADMIN
    )

    assert spec == get_rule("acme", "no-refunds")
    assert (spec.name, spec.effect, spec.match, spec.description, spec.tool) == (
        "no-refunds",
        "refuse",
        {"amount": 5},
        "big",
        "refund",
    )
    row = PolicyRule.objects.get(tenant="acme", name="no-refunds")
    assert (row.effect, row.updated_by) == ("refuse", ADMIN)
    change = PolicyChange.objects.get(action="update")
    assert (change.actor, change.rule, change.version) == (ADMIN, ["rule", "no-refunds"], version)
    assert (change.before["effect"], change.after["effect"]) == ("require_approval", "refuse")
    assert change.after == spec.to_dict()


def test_an_update_that_would_leave_the_rule_invalid_changes_nothing():
    create_rule("acme", CALL, ADMIN)

    with pytest.raises(InvalidRule) as caught:
        update_rule("acme", "no-refunds", {"label": "pii"}, ADMIN)

    assert caught.value.details == {"field": "label"}
    assert get_rule("acme", "no-refunds").label == ""
    assert not PolicyChange.objects.filter(action="update").exists()


def test_a_deleted_rule_is_gone_and_the_deletion_recorded():
    spec, _ = create_rule("acme", CALL, ADMIN)

    version = delete_rule("acme", "no-refunds", ADMIN)

    with pytest.raises(RuleNotFound) as caught:
        get_rule("acme", "no-refunds")
    assert (caught.value.code, caught.value.message, caught.value.details) == (
        "rule_not_found",
        "No rule 'no-refunds' in acme.",
        {"rule": "no-refunds"},
    )
    change = PolicyChange.objects.get(action="remove")
    assert (change.actor, change.rule, change.version) == (ADMIN, ["rule", "no-refunds"], version)
    assert (change.before, change.after) == (spec.to_dict(), None)


EDITS = {
    "update": lambda tenant, name: update_rule(tenant, name, {"enabled": False}, ADMIN),
    "delete": lambda tenant, name: delete_rule(tenant, name, ADMIN),
}


@pytest.mark.parametrize("edit", ["update", "delete"])
def test_a_missing_rule_cannot_be_edited(edit):
    create_rule("globex", CALL, ADMIN)  # the name exists in another tenant only

    with pytest.raises(RuleNotFound) as caught:
        EDITS[edit]("acme", "no-refunds")

    assert (caught.value.message, caught.value.details) == (
        "No rule 'no-refunds' in acme.",
        {"rule": "no-refunds"},
    )
    assert PolicyRule.objects.filter(tenant="globex").exists()


@pytest.mark.parametrize("edit", ["update", "delete"])
def test_the_shipped_defaults_are_read_only(edit):
    with pytest.raises(InvalidRule) as caught:
        EDITS[edit]("acme", "default-pii-no-external")

    assert (caught.value.message, caught.value.details) == (
        "'default-pii-no-external' is a shipped default: it applies to every tenant and cannot "
        "be edited.",
        {"rule": "default-pii-no-external"},
    )
    assert not PolicyChange.objects.exists()


def test_the_defaults_come_first_then_every_rule_of_the_tenant_enabled_or_not():
    create_rule("acme", CALL, ADMIN)
    create_rule("acme", {**FLOW, "enabled": False}, ADMIN)
    create_rule("globex", EXCLUSIVE, ADMIN)

    listed = list_rules("acme")

    assert [(r.name, r.default, r.enabled) for r in listed] == [
        ("default-pii-no-external", True, True),
        ("default-escalation-approval", True, True),
        ("no-refunds", False, True),
        ("pii-internal", False, False),
    ]
    assert get_rule("globex", "default-escalation-approval").match == {"action": "escalate"}


def test_an_edit_or_a_read_names_one_rule_of_one_tenant():
    create_rule("acme", {**CALL, "name": "b-first"}, ADMIN)  # first by id and by name
    create_rule("acme", CALL, ADMIN)
    create_rule("acme", FLOW, ADMIN)
    create_rule("globex", EXCLUSIVE, ADMIN)

    assert get_rule("acme", "pii-internal").kind == "flow"
    with pytest.raises(RuleNotFound):
        get_rule("acme", "finance-or-hr")  # globex's
    update_rule("acme", "no-refunds", {"effect": "refuse"}, ADMIN)
    assert get_rule("acme", "no-refunds").effect == "refuse"
    delete_rule("acme", "no-refunds", ADMIN)

    assert [(rule.name, rule.kind, rule.effect) for rule in list_rules("acme")[2:]] == [
        ("b-first", "call", "require_approval"),
        ("pii-internal", "flow", "refuse"),
    ]
    assert get_rule("globex", "finance-or-hr").kind == "exclusive"


@pytest.mark.parametrize("description", [None, ""], ids=["null", "empty"])
def test_a_rule_without_a_description_has_an_empty_one(description):
    spec, _ = create_rule("acme", {**CALL, "description": description}, ADMIN)
    create_rule("acme", FLOW, ADMIN)  # none given at all

    assert spec.description == ""
    assert [rule.description for rule in list_rules("acme")[2:]] == ["", ""]
