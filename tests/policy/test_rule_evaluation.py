"""What the chain and call rules decide for one call, through the policy services the engine
and replay ask (``check_call_rules``, ``evaluate_chain_rules`` over ``rules_for``): which rule
matches, which wins, and the reason a refused call carries back to the model."""

from __future__ import annotations

import pytest

from policy.services import (
    HeldLabelValue,
    RuleVerdict,
    check_call_rules,
    create_rule,
    current_version_key,
    evaluate_chain_rules,
    list_labels,
    record_labels,
    rules_for,
    update_rule,
)

pytestmark = pytest.mark.django_db

ADMIN = "alice"
PII = HeldLabelValue("pii", "call_1_1", "get_ticket")


def add(tenant: str = "acme", **rule) -> int:
    """A tenant rule through the service; returns the policy version it produced."""
    return create_rule(tenant, rule, ADMIN)[1]


def chain(tenant: str, tool: str, carries=(), sink=None, held=None) -> RuleVerdict:
    """The chain rules of ``tenant`` for one call, as the engine asks them."""
    key = current_version_key(tenant)
    return evaluate_chain_rules(rules_for(tenant, key), key[0], tool, carries, sink, held or {})


# --- flow rules --------------------------------------------------------------------------------


def test_a_run_holding_pii_is_refused_an_external_sink_with_the_call_that_brought_it_in():
    verdict = chain("acme", "send_external_email", sink="external", held={"pii": PII})

    assert (verdict.effect, verdict.rule, verdict.allowed) == (
        "refuse",
        "default-pii-no-external",
        False,
    )
    assert verdict.reason == (
        "refused by rule default-pii-no-external (policy v0): this run holds 'pii' since call "
        "call_1_1 (get_ticket), and send_external_email is an 'external' sink"
    )
    assert verdict.attributes() == {
        "rule": "default-pii-no-external",
        "reason": verdict.reason,
        "policy_version": 0,
        "label": "pii",
        "source_call_id": "call_1_1",
        "source_tool": "get_ticket",
    }


@pytest.mark.parametrize(
    ("sink", "held"),
    [
        ("external", {}),  # nothing personal read yet
        ("internal", {"pii": PII}),  # another kind of sink
        (None, {"pii": PII}),  # not a sink at all
        ("", {"pii": PII}),
    ],
)
def test_a_flow_rule_lets_other_sinks_and_runs_without_the_label_through(sink, held):
    verdict = chain("acme", "notify", sink=sink, held=held)

    assert verdict == RuleVerdict(version=0)
    assert verdict.allowed
    assert verdict.attributes() == {"rule": "", "reason": "", "policy_version": 0}


def test_a_flow_rule_for_any_sink_holds_every_sink_for_approval():
    version = add(
        name="pii-any-sink", kind="flow", label="pii", sink="*", effect="require_approval"
    )

    internal = chain("acme", "notify", sink="internal", held={"pii": PII})
    not_a_sink = chain("acme", "get_ticket", held={"pii": PII})

    assert (internal.effect, internal.rule, internal.version) == (
        "require_approval",
        "pii-any-sink",
        version,
    )
    assert internal.reason.startswith(
        f"held for approval by rule pii-any-sink (policy v{version}): this run holds 'pii'"
    )
    assert internal.reason.endswith("notify is an 'internal' sink")
    assert not_a_sink.allowed


def test_refusal_beats_approval_whatever_the_rules_order():
    add(name="a-pii-external", kind="flow", label="pii", sink="external", effect="require_approval")
    add(name="b-pii-any", kind="flow", label="pii", sink="*", effect="require_approval")

    external = chain("acme", "send_external_email", sink="external", held={"pii": PII})
    internal = chain("acme", "notify", sink="internal", held={"pii": PII})

    # The shipped refusal is first; an approval rule alone is the first approval rule.
    assert (external.effect, external.rule) == ("refuse", "default-pii-no-external")
    assert (internal.effect, internal.rule) == ("require_approval", "b-pii-any")


def test_a_refusal_after_approvals_in_rule_order_still_wins():
    add(
        name="pii-internal-held",
        kind="flow",
        label="pii",
        sink="internal",
        effect="require_approval",
    )
    add(name="pii-internal-no", kind="flow", label="pii", sink="internal", effect="refuse")

    verdict = chain("acme", "notify", sink="internal", held={"pii": PII})

    assert (verdict.effect, verdict.rule) == ("refuse", "pii-internal-no")


# --- exclusive rules ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("have", "bring"), [("finance", "hr"), ("hr", "finance")], ids=["first", "second"]
)
def test_never_both_labels_refuses_the_call_that_brings_the_second_either_way(have, bring):
    version = add(
        name="no-finance-with-hr",
        kind="exclusive",
        label="finance",
        other_label="hr",
        effect="refuse",
    )
    held = {have: HeldLabelValue(have, "call_2_1", "read_books")}

    verdict = chain("acme", "read_staff", carries=("x", bring), held=held)

    assert (verdict.effect, verdict.rule, verdict.label) == ("refuse", "no-finance-with-hr", have)
    assert verdict.reason == (
        f"refused by rule no-finance-with-hr (policy v{version}): this run holds {have!r} since "
        f"call call_2_1 (read_books), and read_staff would bring in {bring!r}, and never both "
        "may be in one run"
    )


@pytest.mark.parametrize(
    ("held", "carries"),
    [
        ({"finance"}, ("other",)),  # brings something else
        ({"finance", "hr"}, ("hr",)),  # both in already: this call brings nothing new
        (set(), ("finance", "hr")),  # holds neither
    ],
)
def test_an_exclusive_rule_lets_a_call_through_that_brings_no_second_label(held, carries):
    add(
        name="no-finance-with-hr",
        kind="exclusive",
        label="finance",
        other_label="hr",
        effect="refuse",
    )
    labels = {label: HeldLabelValue(label, "call_1_1", "read") for label in held}

    assert chain("acme", "read_more", carries=carries, held=labels).allowed


# --- call rules and the tool's own approval setting -------------------------------------------


def test_a_call_rule_matches_every_value_it_names_and_says_which():
    add(
        name="no-big-refunds",
        kind="call",
        tool="refund",
        match={"amount": 500, "currency": "EUR"},  # in the order jsonb keeps
        effect="refuse",
    )

    matching = check_call_rules(
        "acme", "refund", "policy", {"currency": "EUR", "amount": 500, "n": 1}
    )
    other_value = check_call_rules("acme", "refund", "policy", {"currency": "EUR", "amount": 5})
    missing = check_call_rules("acme", "refund", "policy", {"currency": "EUR"})
    other_tool = check_call_rules(
        "acme", "refund_all", "policy", {"currency": "EUR", "amount": 500}
    )

    assert (matching.effect, matching.rule) == ("refuse", "no-big-refunds")
    assert matching.reason == "refund with amount=500, currency='EUR'"
    assert matching.attributes() == {
        "rule": "no-big-refunds",
        "reason": "refund with amount=500, currency='EUR'",
        "policy_version": current_version_key("acme")[0],
    }
    assert other_value.allowed
    assert missing.allowed
    assert other_tool.allowed


def test_a_call_rule_for_any_tool_and_any_arguments_holds_every_call():
    version = add(name="hold-everything", kind="call", tool="*", effect="require_approval")

    verdict = check_call_rules("acme", "get_ticket", "policy", {})

    assert verdict == RuleVerdict(
        "require_approval", "hold-everything", "get_ticket with any arguments", version
    )


def test_the_shipped_escalation_rule_holds_an_escalation_only():
    escalate = check_call_rules("acme", "update_ticket", "policy", {"action": "escalate"})
    resolve = check_call_rules("acme", "update_ticket", "policy", {"action": "resolve"})

    assert (escalate.effect, escalate.rule, escalate.reason) == (
        "require_approval",
        "default-escalation-approval",
        "update_ticket with action='escalate'",
    )
    assert resolve == RuleVerdict(version=0)


def test_a_tool_declared_approval_always_is_held_for_any_arguments():
    version = add(name="unrelated", kind="call", tool="refund", effect="refuse")

    verdict = check_call_rules("acme", "wire_money", "always", {"amount": 1})

    assert verdict == RuleVerdict(
        "require_approval",
        "tool-approval-always",
        "wire_money is declared to need approval for every call",
        version,
    )


def test_a_tool_declared_approval_never_is_never_held_but_still_refused():
    add(name="hold-wires", kind="call", tool="wire_money", effect="require_approval")
    add(name="no-wires", kind="call", tool="wire_money", match={"to": "abroad"}, effect="refuse")

    escalation = check_call_rules("acme", "update_ticket", "never", {"action": "escalate"})
    held = check_call_rules("acme", "wire_money", "never", {"to": "home"})
    refused = check_call_rules("acme", "wire_money", "never", {"to": "abroad"})

    assert escalation.allowed
    assert held.allowed
    assert (refused.effect, refused.rule) == ("refuse", "no-wires")


def test_a_refusing_call_rule_beats_the_tools_approval_always():
    add(name="no-wires", kind="call", tool="wire_money", effect="refuse")

    verdict = check_call_rules("acme", "wire_money", "always", {})

    assert (verdict.effect, verdict.rule) == ("refuse", "no-wires")


# --- a tenant's rule set, as of its policy version --------------------------------------------


def test_a_tenants_rules_apply_to_it_only_and_an_edit_applies_at_once():
    add(name="no-refunds", kind="call", tool="refund", effect="refuse")
    assert check_call_rules("acme", "refund", "policy", {}).rule == "no-refunds"
    assert check_call_rules("globex", "refund", "policy", {}).allowed

    update_rule("acme", "no-refunds", {"effect": "require_approval"}, ADMIN)
    held = check_call_rules("acme", "refund", "policy", {})
    update_rule("acme", "no-refunds", {"enabled": False}, ADMIN)
    disabled = check_call_rules("acme", "refund", "policy", {})

    assert (held.effect, held.rule) == ("require_approval", "no-refunds")
    assert disabled.allowed
    assert [rule.name for rule in rules_for("acme", current_version_key("acme"))] == [
        "default-pii-no-external",
        "default-escalation-approval",
    ]


def test_a_rule_created_disabled_does_not_apply():
    add(name="dormant", kind="call", tool="refund", effect="refuse", enabled=False)

    assert check_call_rules("acme", "refund", "policy", {}).allowed


# --- labels a run holds --------------------------------------------------------------------------


def test_the_first_call_to_bring_a_label_in_is_the_one_kept():
    record_labels("run-1", [PII, HeldLabelValue("finance", "call_1_2", "read_books")])
    record_labels("run-1", [HeldLabelValue("pii", "call_3_1", "get_customer")])
    record_labels("run-1", [])

    held = {label.label: (label.call_id, label.tool) for label in list_labels("run-1")}

    assert held == {"pii": ("call_1_1", "get_ticket"), "finance": ("call_1_2", "read_books")}
    assert list_labels("run-2") == []


def test_a_tenants_rules_are_read_once_per_policy_version(django_assert_num_queries):
    """One query (the version) per check once cached; an edit in one tenant does not cost
    another tenant its cached rules."""
    add(name="no-refunds", kind="call", tool="refund", effect="refuse")
    add("globex", name="no-wires", kind="call", tool="wire_money", effect="refuse")
    check_call_rules("acme", "refund", "policy", {})
    check_call_rules("globex", "wire_money", "policy", {})

    with django_assert_num_queries(1):
        assert check_call_rules("acme", "refund", "policy", {}).rule == "no-refunds"
    add(name="no-gifts", kind="call", tool="gift", effect="refuse")  # acme's version moves
    with django_assert_num_queries(2):  # the version, then acme's rules as of it
        assert check_call_rules("acme", "gift", "policy", {}).rule == "no-gifts"
    with django_assert_num_queries(1):
        assert check_call_rules("globex", "wire_money", "policy", {}).rule == "no-wires"
