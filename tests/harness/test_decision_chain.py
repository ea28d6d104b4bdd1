"""The decision chain itself (``harness.engine.decisions.decide_call``), with its ports in
memory: no run, no API, no database row. Each test states the whole ``Decision`` (what
happens to the call, the check that decided, the error the model is shown, the policy checks
as the trace records them) and what was charged and noted through the ports.

Fast on purpose: mutation testing (``make mutation MODULE=decisions``) runs these first."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.messages import Message, ToolCall
from harness.agent_registry import AgentSpec
from harness.engine.decisions import (
    CallApproval,
    Decision,
    LimitRefusal,
    Outcome,
    ToolCallCount,
    callable_tools,
    decide_call,
    limit_refusal,
    recheck_call_rules,
    rule_gate,
    tool_message,
)
from policy import services as policy
from policy.models import ToolApproval
from tools.errors import ToolCallError, ToolErrorCode
from tools.services import ToolDefinition, ToolRegistry
from traces.services import seal
from traces.span_records import PolicyCheck

# The database is not used; the mark files these tests with the other database tests, which
# pytest-django runs before the transactional ones (the runs through the API), so that under
# mutation testing they run first.
pytestmark = pytest.mark.django_db

VERSION = 7
NUMBER = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "note": {"type": "string"}},
    "required": ["n"],
    "additionalProperties": False,
}


def tool(name: str, **fields: Any) -> ToolDefinition:
    defaults: dict[str, Any] = {
        "description": f"{name} does it",
        "parameters": NUMBER,
        "handler_path": "tests.nowhere",
        "access": (f"{name}:read",),
        "path": f"{name}.yaml",
    }
    return ToolDefinition(name=name, **(defaults | fields))


ALLOW = policy.Decision(True, "", "granted", ("alice", "acme", "*", "read", "allow"), VERSION)


@dataclass
class Ports:
    """``DecisionPorts`` in memory; remembers what the chain charged and noted."""

    tools: list[ToolDefinition]
    agent_tools: tuple[str, ...] | None = None
    acl_by_tool: dict[str, policy.Decision] = field(default_factory=dict)
    rule_list: tuple[policy.RuleSpec, ...] = ()
    held: dict[str, policy.HeldLabelValue] = field(default_factory=dict)
    states: dict[str, CallApproval] = field(default_factory=dict)
    granted: set[str] = field(default_factory=set)
    count: ToolCallCount = field(default_factory=lambda: ToolCallCount(0, 0, None, None))
    daily: LimitRefusal | None = None
    charged: list[str] = field(default_factory=list)
    noted: list[list[policy.HeldLabelValue]] = field(default_factory=list)
    counted_for: list[str] = field(default_factory=list)

    @property
    def agent(self) -> AgentSpec:
        names = self.agent_tools
        if names is None:
            names = tuple(t.name for t in self.tools)
        return AgentSpec(name="clerk", description="", system_prompt="", tools=names)

    @property
    def registry(self) -> ToolRegistry:
        return ToolRegistry({t.name: t for t in self.tools})

    @property
    def policy_version(self) -> int:
        return VERSION

    @property
    def labels(self) -> dict[str, policy.HeldLabelValue]:
        return self.held

    def acl(self, tool: ToolDefinition) -> policy.Decision:
        return self.acl_by_tool.get(tool.name, ALLOW)

    def rules(self) -> tuple[policy.RuleSpec, ...]:
        return self.rule_list

    def approval(self, call_id: str) -> CallApproval | None:
        return self.states.get(call_id)

    def hold_granted(self, call: ToolCall) -> bool:
        return call.id in self.granted

    def tool_calls(self, tool: str) -> ToolCallCount:
        self.counted_for.append(tool)
        return self.count

    def charge_tool_call(self, tool: str) -> LimitRefusal | None:
        self.charged.append(tool)
        return self.daily

    def hold_labels(self, labels: list[policy.HeldLabelValue]) -> None:
        self.noted.append(labels)
        self.held.update((value.label, value) for value in labels)


def acl_check(call: ToolCall, scopes: tuple[str, ...], decision=ALLOW) -> PolicyCheck:
    return PolicyCheck(
        call.id,
        call.name,
        "acl",
        refused=not decision.allowed,
        allowed=decision.allowed,
        rule=list(decision.rule),
        reason=decision.reason,
        policy_version=VERSION,
        extra={"scopes": list(scopes)},
    )


def refusal_record(call: ToolCall, check: str, error: ToolCallError) -> PolicyCheck:
    return PolicyCheck(
        call.id, call.name, check, refused=True, allowed=False, error=error.to_dict()
    )


def call_of(name: str = "lookup", arguments: Any = None, call_id: str = "c-1", **more: Any):
    return ToolCall(
        id=call_id, name=name, arguments={"n": 1} if arguments is None else arguments, **more
    )


# --- 1. the tool exists and is enabled ---------------------------------------------------------


@pytest.mark.parametrize(
    ("ports", "name", "listed"),
    [
        # Not a tool at all; the list names the agent's enabled tools the user may call.
        (
            Ports(
                [tool("lookup"), tool("notify"), tool("off", enabled=False), tool("secret")],
                acl_by_tool={"secret": policy.Decision(False, "secret:read", "no")},
            ),
            "nowhere",
            ["lookup", "notify"],
        ),
        # A tool of the registry the agent does not have.
        (Ports([tool("lookup"), tool("other")], agent_tools=("lookup",)), "other", ["lookup"]),
        # The agent's, but disabled.
        (Ports([tool("lookup"), tool("off", enabled=False)]), "off", ["lookup"]),
        # Nothing to call at all.
        (Ports([tool("off", enabled=False)], agent_tools=("off", "gone")), "gone", []),
    ],
)
def test_a_call_of_a_tool_the_agent_cannot_call_is_refused_with_the_tools_it_can(
    ports, name, listed
):
    call = call_of(name)

    decision = decide_call(call, ports)

    shown = ", ".join(listed) or "none"
    error = ToolCallError(
        ToolErrorCode.UNKNOWN_TOOL,
        f"There is no tool {name!r} you can call. Tools you can call: {shown}.",
        {"tool": name, "available": listed},
    )
    assert decision == Decision(
        Outcome.REFUSED,
        "tool_enabled",
        error=error,
        checks=(refusal_record(call, "tool_enabled", error),),
    )
    assert (ports.charged, ports.noted, ports.counted_for) == ([], [], [])


def test_the_tools_the_model_may_call_are_the_agents_enabled_ones_the_user_may_use():
    tools = [tool("a"), tool("b", enabled=False), tool("c"), tool("d")]
    registry = ToolRegistry({t.name: t for t in tools})
    agent = AgentSpec(
        name="x", description="", system_prompt="", tools=("d", "gone", "a", "b", "c")
    )

    shown = callable_tools(agent, registry, lambda t: t.name != "c")

    assert [t.name for t in shown] == ["d", "a"]


# --- 2. ACL ------------------------------------------------------------------------------------


def test_a_call_the_acl_refuses_is_refused_before_its_arguments_are_read():
    denied = policy.Decision(
        False,
        "lookup:read",
        "alice lacks lookup:read",
        ("alice", "acme", "lookup", "read", "deny"),
        3,
    )
    ports = Ports(
        [tool("lookup", access=("lookup:read", "crm:read"))], acl_by_tool={"lookup": denied}
    )
    call = ToolCall(id="c-1", name="lookup", arguments=None, raw_arguments="{", parse_error="bad")

    decision = decide_call(call, ports)

    error = ToolCallError(
        ToolErrorCode.PERMISSION_DENIED,
        "You may not call lookup for this user: alice lacks lookup:read.",
        {"tool": "lookup", "scope": "lookup:read"},
    )
    assert decision == Decision(
        Outcome.REFUSED,
        "acl",
        error=error,
        checks=(acl_check(call, ("lookup:read", "crm:read"), denied),),
    )
    assert decision.checks[0].attributes() == {
        "call_id": "c-1",
        "tool": "lookup",
        "check": "acl",
        "refused": True,
        "allowed": False,
        "rule": ["alice", "acme", "lookup", "read", "deny"],
        "reason": "alice lacks lookup:read",
        "policy_version": VERSION,
        "scopes": ["lookup:read", "crm:read"],
    }
    assert (ports.charged, ports.noted, ports.counted_for) == ([], [], [])


def test_a_call_that_runs_has_the_acl_allowing_it_as_its_only_record_and_is_charged_once():
    ports = Ports([tool("lookup")])
    call = call_of(arguments={"n": 4})

    decision = decide_call(call, ports)

    assert decision == Decision(
        Outcome.RUN,
        tool=ports.tools[0],
        arguments={"n": 4},
        checks=(acl_check(call, ("lookup:read",)),),
    )
    assert decision.checks[0].attributes() == {
        "call_id": "c-1",
        "tool": "lookup",
        "check": "acl",
        "refused": False,
        "allowed": True,
        "rule": ["alice", "acme", "*", "read", "allow"],
        "reason": "granted",
        "policy_version": VERSION,
        "scopes": ["lookup:read"],
    }
    assert (ports.charged, ports.counted_for, ports.noted) == (["lookup"], ["lookup"], [[]])


# --- 3. chain rules ----------------------------------------------------------------------------

PII_OUT = policy.RuleSpec(
    name="no-pii-out", kind="flow", effect="refuse", label="pii", sink="external"
)
PII_ASK = policy.RuleSpec(
    name="ask-pii-out", kind="flow", effect="require_approval", label="pii", sink="external"
)
HOLDING_PII = {"pii": policy.HeldLabelValue("pii", "c-0", "read_customer")}


def test_a_call_a_chain_rule_refuses_is_refused_with_the_label_and_where_it_came_from():
    mail = tool("mail", sink="external")
    ports = Ports([mail], rule_list=(PII_ASK, PII_OUT), held=dict(HOLDING_PII))
    call = call_of("mail")

    decision = decide_call(call, ports)

    reason = (
        f"refused by rule no-pii-out (policy v{VERSION}): this run holds 'pii' since call c-0 "
        "(read_customer), and mail is an 'external' sink"
    )
    verdict = policy.RuleVerdict(
        "refuse", "no-pii-out", reason, VERSION, "pii", "c-0", "read_customer"
    )
    error = ToolCallError(
        ToolErrorCode.POLICY_REFUSED,
        f"mail was refused by policy rule no-pii-out: {reason}.",
        {
            "tool": "mail",
            "rule": "no-pii-out",
            "reason": reason,
            "policy_version": VERSION,
            "label": "pii",
            "source_call_id": "c-0",
            "source_tool": "read_customer",
        },
    )
    record = PolicyCheck(
        "c-1",
        "mail",
        "chain",
        refused=True,
        allowed=False,
        rule="no-pii-out",
        reason=reason,
        policy_version=VERSION,
        extra={"label": "pii", "source_call_id": "c-0", "source_tool": "read_customer"},
    )
    assert decision == Decision(
        Outcome.REFUSED,
        "chain",
        error=error,
        verdict=verdict,
        checks=(acl_check(call, ("mail:read",)), record),
    )
    assert (ports.charged, ports.noted, ports.counted_for) == ([], [], [])


def test_a_call_that_would_bring_in_a_label_exclusive_with_one_held_is_refused():
    never_both = policy.RuleSpec(
        name="pii-or-finance", kind="exclusive", effect="refuse", label="pii", other_label="finance"
    )
    ledger = tool("ledger", carries=("finance",))
    ports = Ports([ledger], rule_list=(never_both,), held=dict(HOLDING_PII))
    call = call_of("ledger")

    decision = decide_call(call, ports)

    reason = (
        f"refused by rule pii-or-finance (policy v{VERSION}): this run holds 'pii' since call "
        "c-0 (read_customer), and ledger would bring in 'finance', and never both may be in "
        "one run"
    )
    assert (decision.outcome, decision.check, decision.verdict) == (
        Outcome.REFUSED,
        "chain",
        policy.RuleVerdict(
            "refuse", "pii-or-finance", reason, VERSION, "pii", "c-0", "read_customer"
        ),
    )
    assert (ports.charged, ports.noted) == ([], [])


def test_a_call_a_chain_rule_holds_for_approval_is_held_with_that_rule():
    mail = tool("mail", sink="external")
    ports = Ports([mail], rule_list=(PII_ASK,), held=dict(HOLDING_PII))
    call = call_of("mail", {"n": 2})

    decision = decide_call(call, ports)

    reason = (
        f"held for approval by rule ask-pii-out (policy v{VERSION}): this run holds 'pii' "
        "since call c-0 (read_customer), and mail is an 'external' sink"
    )
    verdict = policy.RuleVerdict(
        "require_approval", "ask-pii-out", reason, VERSION, "pii", "c-0", "read_customer"
    )
    held = PolicyCheck(
        "c-1",
        "mail",
        "approval",
        held=True,
        rule="ask-pii-out",
        reason=reason,
        policy_version=VERSION,
        extra={"label": "pii", "source_call_id": "c-0", "source_tool": "read_customer"},
    )
    assert decision == Decision(
        Outcome.HELD,
        "approval",
        mail,
        verdict=verdict,
        arguments={"n": 2},
        checks=(acl_check(call, ("mail:read",)), held),
    )
    assert (ports.charged, ports.noted, ports.counted_for) == ([], [], [])


# --- 4 and 5. the arguments parse and fit the schema ------------------------------------------


def test_arguments_that_do_not_parse_are_refused_with_the_first_500_characters_received():
    raw = "{" + "x" * 600
    call = ToolCall(id="c-1", name="lookup", arguments=None, raw_arguments=raw, parse_error="oops")
    ports = Ports([tool("lookup")])

    decision = decide_call(call, ports)

    error = ToolCallError(
        ToolErrorCode.INVALID_ARGUMENTS_JSON,
        "The arguments for lookup could not be read: oops. Send them as one JSON object.",
        {"tool": "lookup", "received": raw[:500]},
    )
    assert decision == Decision(
        Outcome.REFUSED,
        "arguments_json",
        error=error,
        checks=(acl_check(call, ("lookup:read",)), refusal_record(call, "arguments_json", error)),
    )
    assert (ports.charged, ports.noted, ports.counted_for) == ([], [], [])


def test_arguments_the_schema_refuses_are_refused_with_every_violation():
    call = call_of(arguments={"n": "one", "extra": True})
    ports = Ports([tool("lookup")])

    decision = decide_call(call, ports)

    violations = [
        {
            "at": "/",
            "problem": "Additional properties are not allowed ('extra' was unexpected)",
            "expected": "additionalProperties: false",
            "got": '{"n": "one", "extra": true}',
        },
        {
            "at": "/n",
            "problem": "'one' is not of type 'integer'",
            "expected": 'type: "integer"',
            "got": '"one"',
        },
    ]
    error = ToolCallError(
        ToolErrorCode.INVALID_ARGUMENTS,
        "The arguments for lookup are invalid (2 problem(s)):\n"
        f"- at /: {violations[0]['problem']}\n"
        f"- at /n: {violations[1]['problem']}\n"
        "Fix the arguments and call the tool again.",
        {"tool": "lookup", "violations": violations},
    )
    assert decision == Decision(
        Outcome.REFUSED,
        "schema",
        error=error,
        violations=tuple(violations),
        checks=(acl_check(call, ("lookup:read",)), refusal_record(call, "schema", error)),
    )
    assert (ports.charged, ports.noted, ports.counted_for) == ([], [], [])


# --- 6. call rules and approvals ---------------------------------------------------------------

BIG_REFUSED = policy.RuleSpec(
    name="no-big", kind="call", effect="refuse", tool="lookup", match={"n": 9}
)
BIG_ASKED = policy.RuleSpec(
    name="ask-big", kind="call", effect="require_approval", tool="*", match={"n": 9}
)
NOTE_ASKED = policy.RuleSpec(
    name="ask-note", kind="call", effect="require_approval", tool="lookup", match={"note": "x"}
)


def test_a_call_a_call_rule_refuses_is_refused_even_if_another_asks_approval():
    ports = Ports([tool("lookup", approval="policy")], rule_list=(BIG_ASKED, BIG_REFUSED))
    call = call_of(arguments={"n": 9})

    decision = decide_call(call, ports)

    verdict = policy.RuleVerdict("refuse", "no-big", "lookup with n=9", VERSION)
    error = ToolCallError(
        ToolErrorCode.POLICY_REFUSED,
        "lookup was refused by policy rule no-big: lookup with n=9.",
        {
            "tool": "lookup",
            "rule": "no-big",
            "reason": "lookup with n=9",
            "policy_version": VERSION,
        },
    )
    record = PolicyCheck(
        "c-1",
        "lookup",
        "call_rule",
        refused=True,
        allowed=False,
        rule="no-big",
        reason="lookup with n=9",
        policy_version=VERSION,
    )
    assert decision == Decision(
        Outcome.REFUSED,
        "call_rule",
        error=error,
        verdict=verdict,
        checks=(acl_check(call, ("lookup:read",)), record),
    )
    assert (ports.charged, ports.noted, ports.counted_for) == ([], [], [])


@pytest.mark.parametrize(
    ("approval", "rules", "verdict"),
    [
        (
            "policy",
            (BIG_ASKED,),
            policy.RuleVerdict("require_approval", "ask-big", "lookup with n=9", VERSION),
        ),
        (
            "always",
            (),
            policy.RuleVerdict(
                "require_approval",
                "tool-approval-always",
                "lookup is declared to need approval for every call",
                VERSION,
            ),
        ),
    ],
)
def test_a_call_the_rules_hold_is_held_for_a_human_and_not_charged(approval, rules, verdict):
    lookup = tool("lookup", approval=approval, carries=("pii",))
    ports = Ports([lookup], rule_list=rules)
    call = call_of(arguments={"n": 9})

    decision = decide_call(call, ports)

    held = PolicyCheck(
        "c-1",
        "lookup",
        "approval",
        held=True,
        rule=verdict.rule,
        reason=verdict.reason,
        policy_version=VERSION,
    )
    assert decision == Decision(
        Outcome.HELD,
        "approval",
        lookup,
        verdict=verdict,
        arguments={"n": 9},
        checks=(acl_check(call, ("lookup:read",)), held),
    )
    assert (ports.charged, ports.noted, ports.counted_for) == ([], [], [])


def test_a_held_call_already_let_through_runs_and_names_the_rule_that_asked():
    lookup = tool("lookup", approval="policy", carries=("pii",))
    ports = Ports([lookup], rule_list=(BIG_ASKED,), granted={"c-1"})
    call = call_of(arguments={"n": 9})

    decision = decide_call(call, ports)

    verdict = policy.RuleVerdict("require_approval", "ask-big", "lookup with n=9", VERSION)
    assert decision == Decision(
        Outcome.RUN,
        tool=lookup,
        verdict=verdict,
        arguments={"n": 9},
        checks=(acl_check(call, ("lookup:read",)),),
    )
    assert ports.charged == ["lookup"]
    assert ports.noted == [[policy.HeldLabelValue("pii", "c-1", "lookup")]]


def test_a_call_no_rule_matches_runs_without_a_verdict_though_a_rule_is_granted():
    lookup = tool("lookup", approval="policy")
    ports = Ports([lookup], rule_list=(BIG_ASKED, BIG_REFUSED), granted={"c-1"})
    call = call_of(arguments={"n": 3})

    assert decide_call(call, ports) == Decision(
        Outcome.RUN, tool=lookup, arguments={"n": 3}, checks=(acl_check(call, ("lookup:read",)),)
    )


def approval_row(status: str, arguments: dict[str, Any], **fields: Any) -> ToolApproval:
    values = {
        "tenant": "acme",
        "run_id": "r-1",
        "call_id": "c-1",
        "tool": "lookup",
        "user_id": "alice",
        "arguments": arguments,
        "arguments_sha256": policy.hash_arguments(arguments),
        "rule": "ask-big",
        "reason": "lookup with n=9",
        "policy_version": 5,
        "status": status,
        "decided_by": "" if status in ("pending", "expired") else "bob",
    }
    return ToolApproval(**(values | fields))


def test_a_call_whose_approval_is_pending_waits_and_is_not_charged():
    lookup = tool("lookup", approval="policy")
    row = approval_row("pending", {"n": 9})
    ports = Ports([lookup], rule_list=(BIG_REFUSED,), states={"c-1": CallApproval(row)})
    call = call_of(arguments={"n": 9})

    decision = decide_call(call, ports)

    assert decision == Decision(
        Outcome.WAITING, tool=lookup, approval=row, checks=(acl_check(call, ("lookup:read",)),)
    )
    assert (ports.charged, ports.noted, ports.counted_for) == ([], [], [])


@pytest.mark.parametrize(
    ("status", "fields", "why"),
    [
        ("denied", {"comment": "not today"}, "bob denied it (not today)"),
        ("denied", {}, "bob denied it"),
        ("expired", {}, "nobody approved it before the approval expired"),
        ("approved", {"arguments_sha256": "0" * 64}, "its arguments differ from the approved ones"),
        # A later round whose sealed arguments no longer open.
        (
            "approved",
            {"round": 2, "sealed_arguments": "torn"},
            "its arguments differ from the approved ones",
        ),
    ],
)
def test_a_call_its_approval_does_not_let_run_is_refused_with_who_and_why(status, fields, why):
    row = approval_row(status, {"n": 9}, **fields)
    ports = Ports([tool("lookup", approval="policy")], states={"c-1": CallApproval(row, "eve")})
    call = call_of(arguments={"n": 9})

    decision = decide_call(call, ports)

    error = ToolCallError(
        ToolErrorCode.APPROVAL_DENIED,
        f"lookup was not run: {why}. Do not retry it; tell the user.",
        {"tool": "lookup", "approval": status, "rule": "ask-big"},
    )
    record = PolicyCheck(
        "c-1",
        "lookup",
        "approval",
        refused=True,
        allowed=False,
        rule="ask-big",
        policy_version=5,
        decision=status,
        decided_by=row.decided_by,
    )
    assert decision == Decision(
        Outcome.REFUSED,
        "approval",
        error=error,
        approval=row,
        checks=(acl_check(call, ("lookup:read",)), record),
    )
    assert (ports.charged, ports.noted, ports.counted_for) == ([], [], [])


def test_an_approved_call_runs_with_its_own_arguments_and_is_charged():
    lookup = tool("lookup", approval="policy", carries=("pii",))
    row = approval_row("approved", {"n": 9})
    ports = Ports([lookup], rule_list=(BIG_ASKED,), states={"c-1": CallApproval(row)})
    call = call_of(arguments={"n": 9})

    decision = decide_call(call, ports)

    assert decision == Decision(
        Outcome.RUN,
        tool=lookup,
        arguments={"n": 9},
        approval=row,
        checks=(acl_check(call, ("lookup:read",)),),
    )
    assert ports.charged == ["lookup"]
    assert ports.noted == [[policy.HeldLabelValue("pii", "c-1", "lookup")]]


def test_an_approved_later_round_runs_with_the_arguments_sealed_for_it():
    lookup = tool("lookup", approval="policy")
    asked = {"n": 9, "note": "y"}
    row = approval_row("approved", asked, round=2, sealed_arguments=seal(asked))
    ports = Ports([lookup], rule_list=(BIG_ASKED,), states={"c-1": CallApproval(row)})
    call = call_of(arguments={"n": 1})  # the model's own: not what round 2 was asked about

    decision = decide_call(call, ports)

    assert decision == Decision(
        Outcome.RUN,
        tool=lookup,
        arguments=asked,
        approval=row,
        checks=(acl_check(call, ("lookup:read",)),),
    )


def test_a_first_round_is_decided_on_the_models_arguments_not_on_a_sealed_copy():
    lookup = tool("lookup", approval="policy")
    row = approval_row("approved", {"n": 9}, sealed_arguments=seal({"n": 1}))
    ports = Ports([lookup], states={"c-1": CallApproval(row)})
    call = call_of(arguments={"n": 9})

    assert decide_call(call, ports).arguments == {"n": 9}


def edited_row(asked: dict[str, Any], edited: Any, sealed: str | None = None, **fields: Any):
    edits = {
        "edited_arguments": edited,
        "edited_arguments_sha256": policy.hash_arguments(edited),
        "sealed_edited_arguments": seal(edited) if sealed is None else sealed,
    }
    return approval_row("approved", asked, **(edits | fields))


def eves_approved_edit(edit_round: int) -> PolicyCheck:
    """The record of bob's approval of eve's edit of {"n": 9} to {"n": 8} in ``edit_round``."""
    return PolicyCheck(
        "c-1",
        "lookup",
        "approval",
        allowed=True,
        rule="ask-big",
        policy_version=5,
        decision="approved",
        decided_by="bob",
        extra={
            "edited": True,
            "edited_by": "eve",
            "round": edit_round,
            "arguments_sha256": policy.hash_arguments({"n": 9}),
            "edited_arguments_sha256": policy.hash_arguments({"n": 8}),
        },
    )


def test_an_approvers_edit_runs_and_the_record_says_who_changed_what():
    lookup = tool("lookup", approval="policy")
    row = edited_row({"n": 9}, {"n": 8}, round=3, sealed_arguments=seal({"n": 9}))
    ports = Ports([lookup], rule_list=(BIG_ASKED,), states={"c-1": CallApproval(row, "eve")})
    call = call_of(arguments={"n": 9})

    decision = decide_call(call, ports)

    record = eves_approved_edit(edit_round=3)
    assert decision == Decision(
        Outcome.RUN,
        tool=lookup,
        arguments={"n": 8},
        edited_by="eve",
        approval=row,
        checks=(acl_check(call, ("lookup:read",)), record),
    )
    assert ports.charged == ["lookup"]


@pytest.mark.parametrize(
    "fields",
    [
        lambda: {"sealed_edited_arguments": "not a sealed value"},
        lambda: {"edited_arguments_sha256": "0" * 64},
        # Opens, to what the hash names, but not to an object.
        lambda: {
            "sealed_edited_arguments": seal([{"n": 8}]),
            "edited_arguments_sha256": policy.hash_arguments([{"n": 8}]),
        },
    ],
    ids=["unreadable", "another hash", "not an object"],
)
def test_an_approvers_edit_that_cannot_be_read_back_as_approved_is_refused(fields):
    row = edited_row({"n": 9}, {"n": 8}, **fields())
    ports = Ports([tool("lookup", approval="policy")], states={"c-1": CallApproval(row, "bob")})
    call = call_of(arguments={"n": 9})

    decision = decide_call(call, ports)

    error = ToolCallError(
        ToolErrorCode.APPROVAL_DENIED,
        "lookup was not run: the approver's changed arguments could not be read back as "
        "approved. Do not retry it; tell the user.",
        {"tool": "lookup", "approval": "approved", "rule": "ask-big"},
    )
    assert decision == Decision(
        Outcome.REFUSED,
        "approval",
        error=error,
        checks=(acl_check(call, ("lookup:read",)), refusal_record(call, "approval", error)),
    )
    assert (ports.charged, ports.noted, ports.counted_for) == ([], [], [])


def test_an_approvers_edit_the_schema_of_today_refuses_is_refused_naming_the_approver():
    """The tool's schema changed between the decision and the resume: the approver's
    arguments no longer fit it, and they are not run (``_read_edits`` 33)."""
    strict = {**NUMBER, "properties": {"n": {"type": "integer", "maximum": 5}}}
    row = edited_row({"n": 3}, {"n": 6})
    lookup = tool("lookup", approval="policy", parameters=strict)
    ports = Ports([lookup], states={"c-1": CallApproval(row, "eve")})
    call = call_of(arguments={"n": 3})

    decision = decide_call(call, ports)

    violations = [
        {
            "at": "/n",
            "problem": "6 is greater than the maximum of 5",
            "expected": "maximum: 5",
            "got": "6",
        }
    ]
    error = ToolCallError(
        ToolErrorCode.INVALID_ARGUMENTS,
        "The arguments for lookup are invalid (1 problem(s)):\n"
        f"- at /n: {violations[0]['problem']}\n"
        "Fix the arguments and call the tool again.",
        {"tool": "lookup", "violations": violations, "edited_by": "bob"},
    )
    assert decision == Decision(
        Outcome.REFUSED,
        "schema",
        error=error,
        checks=(acl_check(call, ("lookup:read",)), refusal_record(call, "schema", error)),
    )
    assert (ports.charged, ports.noted, ports.counted_for) == ([], [], [])


@pytest.mark.parametrize("editor", ["eve", ""])
def test_an_approved_call_a_rule_of_today_refuses_is_refused_refusal_beats_approval(editor):
    rule = policy.RuleSpec(name="no-8", kind="call", effect="refuse", tool="lookup", match={"n": 8})
    if editor:
        row = edited_row({"n": 9}, {"n": 8}, round=2, sealed_arguments=seal({"n": 9}))
        call = call_of(arguments={"n": 1})
    else:
        row = approval_row("approved", {"n": 8})
        call = call_of(arguments={"n": 8})
    lookup = tool("lookup", approval="policy")
    ports = Ports([lookup], rule_list=(BIG_ASKED, rule), states={"c-1": CallApproval(row, editor)})

    decision = decide_call(call, ports)

    verdict = policy.RuleVerdict("refuse", "no-8", "lookup with n=8", VERSION)
    record = PolicyCheck(
        "c-1",
        "lookup",
        "call_rule",
        refused=True,
        allowed=False,
        rule="no-8",
        reason="lookup with n=8",
        policy_version=VERSION,
        extra={"edited_by": "eve", "round": 2} if editor else {},
    )
    error = ToolCallError(
        ToolErrorCode.POLICY_REFUSED,
        "lookup was refused by policy rule no-8: lookup with n=8.",
        {"tool": "lookup", "rule": "no-8", "reason": "lookup with n=8", "policy_version": VERSION},
    )
    assert decision == Decision(
        Outcome.REFUSED,
        "call_rule",
        lookup,
        error=error,
        verdict=verdict,
        arguments={"n": 8},
        edited_by=editor,
        approval=row,
        checks=(acl_check(call, ("lookup:read",)), record),
    )
    assert (ports.charged, ports.noted, ports.counted_for) == ([], [], [])


def test_an_edit_a_rule_the_approver_was_not_asked_about_holds_is_held_again():
    row = edited_row({"n": 9}, {"n": 9, "note": "x"})
    lookup = tool("lookup", approval="policy")
    ports = Ports(
        [lookup], rule_list=(BIG_ASKED, NOTE_ASKED), states={"c-1": CallApproval(row, "eve")}
    )
    call = call_of(arguments={"n": 9})

    decision = decide_call(call, ports)

    verdict = policy.RuleVerdict("require_approval", "ask-note", "lookup with note='x'", VERSION)
    held = PolicyCheck(
        "c-1",
        "lookup",
        "approval",
        held=True,
        rule="ask-note",
        reason="lookup with note='x'",
        policy_version=VERSION,
    )
    assert decision == Decision(
        Outcome.HELD,
        "approval",
        lookup,
        verdict=verdict,
        arguments={"n": 9, "note": "x"},
        edited_by="eve",
        approval=row,
        checks=(acl_check(call, ("lookup:read",)), held),
    )
    assert (ports.charged, ports.noted, ports.counted_for) == ([], [], [])


def test_an_edit_of_a_tool_declared_never_to_need_approval_is_not_held_by_a_call_rule():
    """The tool's own ``approval: never`` still holds on the recheck: a chain rule held the
    call, a call rule asking approval matches the edit only, and the call runs."""
    row = edited_row({"n": 9}, {"n": 9, "note": "x"})
    lookup = tool("lookup", approval="never")
    ports = Ports([lookup], rule_list=(NOTE_ASKED,), states={"c-1": CallApproval(row, "eve")})

    decision = decide_call(call_of(arguments={"n": 9}), ports)

    assert (decision.outcome, decision.arguments) == (Outcome.RUN, {"n": 9, "note": "x"})
    assert ports.charged == ["lookup"]


def test_rechecking_refuses_on_any_refusal_and_holds_on_the_first_new_rule_only():
    refuse = policy.RuleVerdict("refuse", "r", "no")
    ask_a = policy.RuleVerdict("require_approval", "a", "ask a")
    ask_b = policy.RuleVerdict("require_approval", "b", "ask b")
    ask_c = policy.RuleVerdict("require_approval", "c", "ask c")

    assert recheck_call_rules([], []) is None
    assert recheck_call_rules([ask_a], [ask_a]) is None
    assert recheck_call_rules([ask_a], [ask_a, refuse]) == ("refuse", refuse)
    assert recheck_call_rules([ask_a], [ask_a, ask_b, ask_c]) == ("hold", ask_b)
    assert recheck_call_rules([ask_b], [ask_a, ask_b]) == ("hold", ask_a)
    assert recheck_call_rules([ask_a, ask_b], [ask_b, ask_a]) is None


def test_the_rule_gate_refuses_on_a_refusal_and_holds_on_a_call_or_chain_demand():
    allow = policy.RuleVerdict()
    refuse = policy.RuleVerdict("refuse", "r", "no")
    ask = policy.RuleVerdict("require_approval", "a", "ask")
    chain_ask = policy.RuleVerdict("require_approval", "c", "chain asks")

    assert rule_gate(allow, allow) is None
    assert rule_gate(refuse, chain_ask) == ("refuse", refuse)
    assert rule_gate(ask, allow) == ("hold", ask)
    assert rule_gate(ask, chain_ask) == ("hold", ask)
    assert rule_gate(allow, chain_ask) == ("hold", chain_ask)
    assert rule_gate(allow, refuse) is None  # a chain refusal was decided before


# --- 7. limits ---------------------------------------------------------------------------------


def expected_limit(count: ToolCallCount) -> LimitRefusal | None:
    if count.per_tool_limit is not None and count.of_tool >= count.per_tool_limit:
        return LimitRefusal(
            "max_calls_per_tool", f"this run may call lookup at most {count.per_tool_limit} times"
        )
    if count.total_limit is not None and count.total >= count.total_limit:
        return LimitRefusal(
            "max_tool_calls_per_run", f"this run may make {count.total_limit} tool calls"
        )
    return None


LIMITS = st.none() | st.integers(min_value=0, max_value=4)


@given(
    of_tool=st.integers(min_value=0, max_value=5),
    others=st.integers(min_value=0, max_value=5),
    per_tool=LIMITS,
    total=LIMITS,
)
def test_a_call_over_a_limit_is_refused_and_not_charged_every_other_one_is_charged(
    of_tool, others, per_tool, total
):
    count = ToolCallCount(of_tool, of_tool + others, per_tool, total)
    ports = Ports([tool("lookup", carries=("pii",))], count=count)
    call = call_of()

    decision = decide_call(call, ports)

    refusal = expected_limit(count)
    assert limit_refusal("lookup", count) == refusal
    if refusal is None:
        assert decision.outcome == Outcome.RUN
        assert (ports.charged, ports.noted) == (
            ["lookup"],
            [[policy.HeldLabelValue("pii", "c-1", "lookup")]],
        )
    else:
        error = ToolCallError(
            ToolErrorCode.LIMIT_EXCEEDED,
            f"lookup was not run: {refusal.reason}. Answer with what you have.",
            {"tool": "lookup", "limit": refusal.rule},
        )
        assert decision == Decision(
            Outcome.REFUSED,
            "limit",
            error=error,
            limit=refusal,
            checks=(acl_check(call, ("lookup:read",)), refusal_record(call, "limit", error)),
        )
        assert (ports.charged, ports.noted) == ([], [])


def test_the_limits_are_at_the_boundary():
    assert limit_refusal("t", ToolCallCount(1, 1, 2, 2)) is None
    assert limit_refusal("t", ToolCallCount(2, 2, 2, 3)) == LimitRefusal(
        "max_calls_per_tool", "this run may call t at most 2 times"
    )
    assert limit_refusal("t", ToolCallCount(0, 3, 2, 3)) == LimitRefusal(
        "max_tool_calls_per_run", "this run may make 3 tool calls"
    )
    assert limit_refusal("t", ToolCallCount(0, 2, None, 3)) is None


def test_a_call_the_daily_count_refuses_is_refused_after_its_approval_record():
    lookup = tool("lookup", approval="policy", carries=("pii",))
    row = edited_row({"n": 9}, {"n": 8})
    daily = LimitRefusal("max_tool_calls_per_day", "acme may make 10 tool calls a day")
    ports = Ports([lookup], states={"c-1": CallApproval(row, "eve")}, daily=daily)
    call = call_of(arguments={"n": 9})

    decision = decide_call(call, ports)

    error = ToolCallError(
        ToolErrorCode.LIMIT_EXCEEDED,
        "lookup was not run: acme may make 10 tool calls a day. Answer with what you have.",
        {"tool": "lookup", "limit": "max_tool_calls_per_day"},
    )
    approved = eves_approved_edit(edit_round=1)
    assert decision == Decision(
        Outcome.REFUSED,
        "limit",
        error=error,
        limit=daily,
        checks=(acl_check(call, ("lookup:read",)), approved, refusal_record(call, "limit", error)),
    )
    assert ports.charged == ["lookup"]
    assert ports.noted == []


# --- 8. labels ---------------------------------------------------------------------------------


def test_a_call_that_runs_brings_in_only_the_labels_the_run_did_not_hold():
    held = {"pii": policy.HeldLabelValue("pii", "c-0", "read_customer")}
    lookup = tool("lookup", carries=("pii", "finance", "health"))
    ports = Ports([lookup], held=dict(held))

    decide_call(call_of(call_id="c-5"), ports)

    assert ports.noted == [
        [
            policy.HeldLabelValue("finance", "c-5", "lookup"),
            policy.HeldLabelValue("health", "c-5", "lookup"),
        ]
    ]
    assert ports.held["pii"] == held["pii"]


# --- the message the model is shown ------------------------------------------------------------


def test_the_message_for_a_result_an_error_or_an_edit_is_this_json():
    call = call_of("lookup", call_id="c-9")
    error = ToolCallError(ToolErrorCode.POLICY_REFUSED, "no", {"rule": "é"})

    success = tool_message(call, {"when": "ça", "n": 1})
    failure = tool_message(call, error=error)
    edited = tool_message(call, {"a": 1}, edited=("eve", {"n": 8}))

    assert success == Message(
        role="tool",
        content='{"ok": true, "result": {"when": "ça", "n": 1}}',
        tool_call_id="c-9",
        name="lookup",
        is_error=False,
    )
    assert failure == Message(
        role="tool",
        content='{"ok": false, "error": {"code": "policy_refused", "message": "no", '
        '"details": {"rule": "é"}}}',
        tool_call_id="c-9",
        name="lookup",
        is_error=True,
    )
    assert json.loads(edited.content) == {
        "ok": True,
        "result": {"a": 1},
        "arguments_changed": {
            "by": "eve",
            "arguments": {"n": 8},
            "note": "An approver changed this call's arguments before it ran; it ran with these.",
        },
    }


def test_a_result_json_has_no_type_for_is_shown_as_text():
    from datetime import date

    shown = tool_message(call_of(), {"on": date(2026, 1, 2)})

    assert shown.content == '{"ok": true, "result": {"on": "2026-01-02"}}'
