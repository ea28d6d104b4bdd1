"""A rule's name, labels, sink and tool are matched whole by the policy services (the admin,
the console and the policy preview reach them without the API's serializer): a value with a
trailing newline passed a ``^…$`` pattern, was stored, and a refusal rule for ``"refund\\n"``
never matched the tool ``refund`` — the call it was written to refuse went through."""

from __future__ import annotations

import pytest

from policy.errors import InvalidRule
from policy.models import PolicyRule
from policy.services import check_call_rules, create_rule

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("field", "rule"),
    [
        ("tool", {"name": "no-refunds", "kind": "call", "tool": "refund\n"}),
        ("label", {"name": "no-pii-out", "kind": "flow", "label": "pii\n", "sink": "external"}),
        ("sink", {"name": "no-pii-out", "kind": "flow", "label": "pii", "sink": "external\n"}),
        (
            "other_label",
            {"name": "no-both", "kind": "exclusive", "label": "pii", "other_label": "hr\n"},
        ),
    ],
)
def test_a_rule_field_with_a_trailing_newline_is_refused_not_stored_dead(field, rule):
    with pytest.raises(InvalidRule) as caught:
        create_rule("acme", {**rule, "effect": "refuse"}, "alice")

    assert caught.value.details == {"field": field}
    assert not PolicyRule.objects.exists()


def test_a_rule_name_with_a_trailing_newline_is_refused():
    with pytest.raises(InvalidRule) as caught:
        create_rule(
            "acme", {"name": "x\n", "kind": "call", "tool": "refund", "effect": "refuse"}, "a"
        )

    assert caught.value.details == {"name": "x\n"}


def test_the_refund_rule_written_whole_refuses_the_call():
    create_rule(
        "acme",
        {"name": "no-refunds", "kind": "call", "tool": "refund", "effect": "refuse"},
        "alice",
    )

    assert check_call_rules("acme", "refund", "policy", {"amount": 5}).effect == "refuse"
