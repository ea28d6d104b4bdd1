"""Replay's own reading and judging (``harness.replay.run``), without a run through the API:
the verdict a recorded call had, the one it gets today, what differs between them, the dry
ports replay decides with, and the report. The runs themselves are in ``test_replay.py``.

Fast on purpose: mutation testing (``make mutation MODULE=replay``) runs these first."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from gateway.messages import Message, ToolCall
from harness.agent_registry import AgentSpec
from harness.engine.decisions import (
    Decision,
    LimitRefusal,
    Outcome,
    ToolCallCount,
    tool_message,
)
from harness.engine.honesty import check_answer
from harness.errors import ReplayUnavailable, UnknownAgent
from harness.models import RunStatus
from harness.replay.run import (
    ALLOWED,
    NEEDS_APPROVAL,
    NOT_EXECUTED,
    REFUSED,
    CallReplay,
    ReplayReport,
    Verdict,
    _acl_line,
    _body,
    _DryPorts,
    _from_audit,
    _policy_spans,
    _ran,
    _Recorded,
    _recorded_conversation,
    _recorded_verdict,
    _reparsed,
    _replay_call,
    _replayed_answer,
    _verdict,
    replay_run,
)
from policy import services as policy
from policy.models import BudgetLedger
from tools.errors import ToolCallError, ToolErrorCode, ToolFileFault, ToolFilesInvalid
from tools.services import ToolDefinition, ToolRegistry
from traces.services import seal
from traces.span_records import PolicyCheck

# The mark files these tests with the other database tests, which pytest-django runs before
# the transactional ones (the runs through the API): under mutation testing they run first.
pytestmark = pytest.mark.django_db

NUMBER = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def tool(name: str, **fields: Any) -> ToolDefinition:
    defaults: dict[str, Any] = {
        "description": name,
        "parameters": NUMBER,
        "handler_path": "tests.nowhere",
        "access": (f"{name}:read", f"{name}:write"),
        "path": f"{name}.yaml",
    }
    return ToolDefinition(name=name, **(defaults | fields))


def result(call_id: str, body: Any, name: str = "lookup") -> Message:
    content = body if isinstance(body, str) else json.dumps(body)
    return Message(role="tool", content=content, tool_call_id=call_id, name=name)


def failure(code: str, message: str = "no", **details: Any) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message, "details": details}}


def span(status: str, **attributes: Any) -> dict[str, Any]:
    return {"status": status, "attributes": {"call_id": "c-1", "tool": "lookup"} | attributes}


CALL = ToolCall(id="c-1", name="lookup", arguments={"n": 1})


# --- verdicts and divergences ----------------------------------------------------------------


def test_two_verdicts_are_the_same_if_verdict_check_rule_and_violations_are():
    base = Verdict(REFUSED, "schema", "r", "why", ({"at": "/n"},), "line")

    assert base.same_as(Verdict(REFUSED, "schema", "r", "other", ({"at": "/n"},), "other line"))
    for other in (
        Verdict(ALLOWED, "schema", "r", "why", ({"at": "/n"},)),
        Verdict(REFUSED, "acl", "r", "why", ({"at": "/n"},)),
        Verdict(REFUSED, "schema", "q", "why", ({"at": "/n"},)),
        Verdict(REFUSED, "schema", "r", "why", ({"at": "/m"},)),
    ):
        assert not base.same_as(other)


def test_a_verdict_is_shown_without_its_empty_fields():
    assert Verdict(ALLOWED).to_dict() == {"verdict": "allowed"}
    full = Verdict(REFUSED, "schema", "r", "why", ({"at": "/n"},), "bob, acme")
    assert full.to_dict() == {
        "verdict": "refused",
        "check": "schema",
        "rule": "r",
        "reason": "why",
        "violations": [{"at": "/n"}],
        "permission": "bob, acme",
    }


@pytest.mark.parametrize(
    ("before", "after", "changed", "divergence"),
    [
        (Verdict(ALLOWED), Verdict(REFUSED, "acl"), False, "now_refused"),
        (Verdict(ALLOWED), Verdict(NEEDS_APPROVAL, "approval"), False, "now_needs_approval"),
        (Verdict(REFUSED, "acl"), Verdict(ALLOWED), False, "now_allowed"),
        (Verdict(ALLOWED), Verdict(NOT_EXECUTED), False, "now_not_executed"),
        (
            Verdict(REFUSED, "schema", violations=({"at": "/n"},)),
            Verdict(REFUSED, "schema", violations=({"at": "/m"},)),
            True,
            "validation_changed",
        ),
        (
            Verdict(REFUSED, "chain", "a"),
            Verdict(REFUSED, "chain", "b"),
            True,
            "refused_differently",
        ),
        (
            Verdict(NEEDS_APPROVAL, "approval", "a"),
            Verdict(NEEDS_APPROVAL, "approval", "b"),
            True,
            "rule_changed",
        ),
        (Verdict(ALLOWED), Verdict(ALLOWED), True, "arguments_changed"),
        (Verdict(REFUSED, "acl", "", "why"), Verdict(REFUSED, "acl", "", "else"), False, ""),
    ],
)
def test_a_call_diverges_in_the_one_word_for_what_changed(before, after, changed, divergence):
    replay = CallReplay(2, "c-1", "lookup", before, after, arguments_changed=changed)

    assert replay.divergence == divergence


def test_a_replayed_call_is_shown_with_its_arguments_only_when_they_changed():
    same = CallReplay(3, "c-1", "lookup", Verdict(ALLOWED), Verdict(REFUSED, "acl"))
    changed = CallReplay(
        1, "c-2", "mail", Verdict(ALLOWED), Verdict(ALLOWED), True, {"n": "1"}, {"n": 1}
    )

    assert same.to_dict() == {
        "step": 3,
        "call_id": "c-1",
        "tool": "lookup",
        "before": {"verdict": "allowed"},
        "after": {"verdict": "refused", "check": "acl"},
        "divergence": "now_refused",
    }
    assert changed.to_dict() == {
        "step": 1,
        "call_id": "c-2",
        "tool": "mail",
        "before": {"verdict": "allowed"},
        "after": {"verdict": "allowed"},
        "divergence": "arguments_changed",
        "recorded_arguments": {"n": "1"},
        "arguments": {"n": 1},
    }
    assert (
        CallReplay(1, "c", "t", Verdict(ALLOWED), Verdict(ALLOWED)).to_dict()["divergence"] is None
    )


def report(calls: list[CallReplay], recorded: str | None, replayed: str | None) -> ReplayReport:
    return ReplayReport(
        "r-1", "q-1", "sealed", 4, [{"op": "add"}], calls, recorded, replayed, ["n"]
    )


def test_the_report_names_the_first_divergence_and_every_call():
    quiet = CallReplay(1, "c-1", "lookup", Verdict(ALLOWED), Verdict(ALLOWED))
    first = CallReplay(2, "c-2", "mail", Verdict(ALLOWED), Verdict(REFUSED, "acl"))
    second = CallReplay(3, "c-3", "note", Verdict(ALLOWED), Verdict(NEEDS_APPROVAL, "approval"))
    shown = report([quiet, first, second], "done", "done")

    assert shown.divergent_calls == [first, second]
    assert shown.answer_changed is False
    assert shown.to_dict() == {
        "run_id": "r-1",
        "request_id": "q-1",
        "source": "sealed",
        "policy_version": 4,
        "proposed": [{"op": "add"}],
        "diverged": True,
        "first_divergence": {"step": 2, "call_id": "c-2", "tool": "mail"},
        "divergences": [first.to_dict(), second.to_dict()],
        "calls": [quiet.to_dict(), first.to_dict(), second.to_dict()],
        "answer": {"recorded": "done", "replayed": "done", "changed": False},
        "notes": ["n"],
    }


def test_a_report_diverges_by_its_answer_alone_or_not_at_all():
    quiet = CallReplay(1, "c-1", "lookup", Verdict(ALLOWED), Verdict(ALLOWED))

    by_answer = report([quiet], "sent it", "tried to send it").to_dict()
    unchanged = report([quiet], "sent it", "sent it").to_dict()

    assert (by_answer["diverged"], by_answer["first_divergence"], by_answer["divergences"]) == (
        True,
        None,
        [],
    )
    assert by_answer["answer"]["changed"] is True
    assert (unchanged["diverged"], unchanged["first_divergence"]) == (False, None)


# --- today's verdict --------------------------------------------------------------------------


def test_todays_decision_reads_as_a_verdict():
    asks = policy.RuleVerdict("require_approval", "ask", "lookup with n=1", 3)
    refuses = policy.RuleVerdict("refuse", "no", "lookup with n=9", 3)
    chain = policy.RuleVerdict("refuse", "no-pii", "holds pii", 3, "pii", "c-0", "read")
    limit = LimitRefusal("max_calls_per_tool", "at most 2")
    error = ToolCallError(ToolErrorCode.INVALID_ARGUMENTS, "bad n")
    acl_refused = PolicyCheck("c-1", "lookup", "acl", refused=True, rule=["bob", "acme", "x"])

    assert _verdict(Decision(Outcome.RUN)) == Verdict(ALLOWED)
    assert _verdict(Decision(Outcome.RUN, verdict=asks)) == Verdict(
        NEEDS_APPROVAL, "approval", "ask", "lookup with n=1"
    )
    assert _verdict(Decision(Outcome.HELD, "approval", verdict=asks)) == Verdict(
        NEEDS_APPROVAL, "approval", "ask", "lookup with n=1"
    )
    assert _verdict(Decision(Outcome.REFUSED, "limit", error=error, limit=limit)) == Verdict(
        REFUSED, "limit", "max_calls_per_tool", "at most 2"
    )
    assert _verdict(Decision(Outcome.REFUSED, "call_rule", error=error, verdict=refuses)) == (
        Verdict(REFUSED, "call_rule", "no", "lookup with n=9")
    )
    assert _verdict(Decision(Outcome.REFUSED, "chain", error=error, verdict=chain)) == Verdict(
        REFUSED, "chain", "no-pii", "bad n"
    )
    violations = ({"at": "/n"},)
    # The ACL allowed it, by a line: that line is not the one a refusal names.
    acl_allowed = PolicyCheck("c-1", "lookup", "acl", allowed=True, rule=["alice", "acme", "x"])
    schema = Decision(
        Outcome.REFUSED, "schema", error=error, violations=violations, checks=(acl_allowed,)
    )
    assert _verdict(schema) == Verdict(REFUSED, "schema", "", "bad n", violations)
    acl = Decision(Outcome.REFUSED, "acl", error=error, checks=(acl_refused,))
    assert _verdict(acl) == Verdict(REFUSED, "acl", "", "bad n", (), "bob, acme, x")


def test_the_permission_line_is_the_first_check_naming_a_casbin_line():
    named = PolicyCheck("c", "t", "acl", rule=["bob", "acme", "t:read", "deny"])
    assert _acl_line([PolicyCheck("c", "t", "acl", rule="by name"), named]) == (
        "bob, acme, t:read, deny"
    )
    assert _acl_line([PolicyCheck("c", "t", "acl")]) == ""
    assert _acl_line([]) == ""


def test_the_call_is_read_again_as_todays_gateway_reads_its_raw_text():
    plain = ToolCall(id="c-1", name="lookup", arguments={"n": 1})
    fenced = ToolCall(
        id="c-2", name="lookup", arguments=None, index=3, raw_arguments="{'n': 2,}", parse_error="x"
    )
    broken = ToolCall(id="c-3", name="lookup", arguments={"n": 3}, index=1, raw_arguments="[1]")

    assert _reparsed(plain) is plain
    assert _reparsed(fenced) == ToolCall(
        id="c-2", name="lookup", arguments={"n": 2}, index=3, raw_arguments="{'n': 2,}"
    )
    assert _reparsed(broken) == ToolCall(
        id="c-3",
        name="lookup",
        arguments=None,
        index=1,
        raw_arguments="[1]",
        parse_error="the arguments must be a JSON object, got list",
    )


# --- what the run recorded --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "ran"),
    [
        ({"ok": True, "result": None}, True),
        (failure("tool_failed"), True),
        (failure("timeout"), True),
        ({"ok": False}, True),
        *[
            (failure(code), False)
            for code in (
                "unknown_tool",
                "permission_denied",
                "invalid_arguments_json",
                "invalid_arguments",
                "limit_exceeded",
                "policy_refused",
                "approval_denied",
                "not_executed",
            )
        ],
    ],
)
def test_a_recorded_result_is_the_tools_own_unless_the_harness_refused_the_call(body, ran):
    assert _ran(result("c-1", body)) is ran


def test_no_recorded_result_means_the_call_did_not_run():
    assert _ran(None) is False


def test_a_result_that_is_not_a_json_object_reads_as_an_empty_body():
    assert _body(result("c-1", "not json")) == {}
    assert _body(result("c-1", "[1, 2]")) == {}
    assert _body(result("c-1", {"ok": True})) == {"ok": True}


def test_a_recorded_hold_is_read_from_its_span_first():
    spans = [
        span("refused", check="acl", refused=True, rule="x"),
        span("ok", check="approval", held=True, rule="ask", reason="big"),
    ]

    verdict = _recorded_verdict(CALL, result("c-1", {"ok": True}), spans)

    assert verdict == Verdict(NEEDS_APPROVAL, "approval", "ask", "big")


def test_a_recorded_refusal_is_read_from_its_span_with_the_error_shown():
    error = failure("invalid_arguments", "bad n", violations=[{"at": "/n"}])
    spans = [
        span("ok", check="acl", allowed=True),
        span("refused", check="approval", refused=True, rule="ask"),
        span("refused", check="honesty", refused=True, rule="h"),
        span("refused", check="schema", refused=True),
        span("refused", check="chain", refused=True, rule="later"),
    ]

    verdict = _recorded_verdict(CALL, result("c-1", error), spans)

    assert verdict == Verdict(REFUSED, "schema", "", "bad n", ({"at": "/n"},))


def test_a_recorded_limit_refusal_names_the_limit_and_an_acl_one_its_line():
    limit = failure("limit_exceeded", "too many", limit="max_tool_calls_per_run")
    acl = failure("permission_denied", "no")
    line = ["bob", "acme", "lookup:read", "deny"]

    assert _recorded_verdict(
        CALL, result("c-1", limit), [span("refused", check="limit", refused=True, rule="x")]
    ) == Verdict(REFUSED, "limit", "max_tool_calls_per_run", "too many")
    # No result to read the limit from: the rule is "", as every unnamed rule is, not None.
    assert _recorded_verdict(CALL, None, [span("refused", check="limit", refused=True)]) == Verdict(
        REFUSED, "limit", "", ""
    )
    assert _recorded_verdict(
        CALL, result("c-1", acl), [span("refused", check="acl", refused=True, rule=line)]
    ) == Verdict(REFUSED, "acl", "", "no", (), "bob, acme, lookup:read, deny")
    assert _recorded_verdict(
        CALL, None, [span("refused", check="call_rule", refused=True, rule="no-big")]
    ) == Verdict(REFUSED, "call_rule", "no-big", "")


def test_a_call_without_a_result_was_held_if_it_has_spans_else_not_executed():
    assert _recorded_verdict(CALL, None, [span("ok", check="acl", allowed=True)]) == Verdict(
        NEEDS_APPROVAL, "approval"
    )
    assert _recorded_verdict(CALL, None, []) == Verdict(NOT_EXECUTED)


@pytest.mark.parametrize(
    ("body", "verdict"),
    [
        ({"ok": True, "result": 1}, Verdict(ALLOWED)),
        (failure("not_executed", "repeated"), Verdict(NOT_EXECUTED, reason="repeated")),
        (failure("approval_denied", "no", rule="ask"), Verdict(NEEDS_APPROVAL, "approval", "ask")),
        (
            failure("policy_refused", "held pii", rule="no-pii", label="pii"),
            Verdict(REFUSED, "chain", "no-pii", "held pii"),
        ),
        (
            failure("policy_refused", "big", rule="no-big"),
            Verdict(REFUSED, "call_rule", "no-big", "big"),
        ),
        (
            failure("limit_exceeded", "many", limit="max_calls_per_tool"),
            Verdict(REFUSED, "limit", "max_calls_per_tool", "many"),
        ),
        (
            failure("invalid_arguments", "bad", violations=[{"at": "/n"}]),
            Verdict(REFUSED, "schema", "", "bad", ({"at": "/n"},)),
        ),
        (failure("unknown_tool", "none"), Verdict(REFUSED, "tool_enabled", "", "none")),
        (failure("permission_denied", "no"), Verdict(REFUSED, "acl", "", "no")),
        (failure("invalid_arguments_json", "?"), Verdict(REFUSED, "arguments_json", "", "?")),
        (failure("tool_failed", "boom"), Verdict(ALLOWED)),
        # An error without a message, details or rule: each is "", never "None".
        ({"ok": False, "error": {"code": "unknown_tool"}}, Verdict(REFUSED, "tool_enabled")),
        ({"ok": False, "error": {"code": "approval_denied"}}, Verdict(NEEDS_APPROVAL, "approval")),
        ({"ok": False, "error": {"code": "policy_refused"}}, Verdict(REFUSED, "call_rule")),
        (
            {"ok": False, "error": {"code": "limit_exceeded", "details": None}},
            Verdict(REFUSED, "limit"),
        ),
    ],
)
def test_a_call_without_spans_is_read_from_the_result_the_model_was_shown(body, verdict):
    assert _recorded_verdict(CALL, result("c-1", body), []) == verdict


# --- the dry ports ------------------------------------------------------------------------------


class Snapshot:
    version = 11
    rules = (policy.RuleSpec(name="r", kind="call", effect="refuse", tool="x"),)

    def __init__(self) -> None:
        self.asked: list[tuple[str, tuple[str, ...]]] = []

    def authorize_scopes(self, user: str, scopes: tuple[str, ...]) -> policy.Decision:
        self.asked.append((user, tuple(scopes)))
        return policy.Decision(user == "alice", scopes[0], "because")


def dry_ports(run_id: str = "r-1", user: str = "alice") -> tuple[_DryPorts, Snapshot]:
    snapshot = Snapshot()
    agent = AgentSpec(name="clerk", description="", system_prompt="", tools=("lookup",))
    registry = ToolRegistry({"lookup": tool("lookup")})
    run = SimpleNamespace(id=run_id, user_id=user)
    return _DryPorts(run, agent, registry, snapshot), snapshot  # type: ignore[arg-type]


def test_the_dry_ports_ask_the_snapshot_for_the_runs_user_and_approve_nothing():
    ports, snapshot = dry_ports(user="alice")

    assert ports.policy_version == 11
    assert ports.rules() == snapshot.rules
    assert ports.acl(tool("lookup")) == policy.Decision(True, "lookup:read", "because")
    assert snapshot.asked == [("alice", ("lookup:read", "lookup:write"))]
    assert ports.approval("c-1") is None
    assert ports.hold_granted(CALL) is False
    ports.ran_then.add("c-1")
    assert ports.hold_granted(CALL) is True
    assert ports.hold_granted(ToolCall(id="c-2", name="lookup", arguments={})) is False


def test_the_dry_ports_count_calls_from_none_against_the_runs_limits():
    BudgetLedger.objects.create(key="run:r-7", tool_calls_limit=5, calls_per_tool_limit=2)
    ports, _ = dry_ports("r-7")

    assert ports.tool_calls("lookup") == ToolCallCount(0, 0, 2, 5)
    assert ports.charge_tool_call("lookup") is None
    assert ports.charge_tool_call("lookup") is None
    assert ports.charge_tool_call("mail") is None
    assert ports.tool_calls("lookup") == ToolCallCount(2, 3, 2, 5)
    assert ports.tool_calls("mail") == ToolCallCount(1, 3, 2, 5)
    assert ports.tool_calls("note") == ToolCallCount(0, 3, 2, 5)
    assert dry_ports("r-8")[0].tool_calls("lookup") == ToolCallCount(0, 0, None, None)


def test_the_dry_ports_hold_each_label_once_from_the_first_call_noted():
    ports, _ = dry_ports()
    first = policy.HeldLabelValue("pii", "c-1", "lookup")
    other = policy.HeldLabelValue("finance", "c-2", "ledger")

    assert ports.labels == {}
    ports.hold_labels([first])
    ports.hold_labels([other])

    assert ports.labels == {"pii": first, "finance": other}


# --- one call replayed --------------------------------------------------------------------------


def test_a_call_the_run_did_not_execute_then_is_not_decided_again():
    ports, snapshot = dry_ports()
    shown = result("c-1", failure("not_executed", "repeated"))
    before = Verdict(NOT_EXECUTED, reason="repeated")

    replay, message = _replay_call(ports, CALL, before, shown)

    assert replay == CallReplay(0, "c-1", "lookup", before, before)
    assert message is shown
    assert (snapshot.asked, ports.calls_total) == ([], 0)


def test_a_call_that_ran_then_and_runs_now_is_shown_its_recorded_result():
    ports, _ = dry_ports()
    shown = result("c-1", {"ok": True, "result": 5})

    replay, message = _replay_call(ports, CALL, Verdict(ALLOWED), shown)

    assert replay == CallReplay(0, "c-1", "lookup", Verdict(ALLOWED), Verdict(ALLOWED))
    assert message is shown
    assert ports.ran_then == {"c-1"}
    assert ports.calls_per_tool == {"lookup": 1}


def test_a_call_held_then_and_executed_counts_as_approved_now():
    ports, _ = dry_ports()
    ports.snapshot.rules = (  # type: ignore[misc]
        policy.RuleSpec(name="ask", kind="call", effect="require_approval", tool="lookup"),
    )
    ports.registry = ToolRegistry({"lookup": tool("lookup", approval="policy")})
    shown = result("c-1", {"ok": True, "result": 5})
    before = Verdict(NEEDS_APPROVAL, "approval", "ask", "lookup with any arguments")

    replay, message = _replay_call(ports, CALL, before, shown)

    assert replay.after == before
    assert message is shown


def test_a_call_held_then_but_not_run_is_held_now_without_a_result():
    ports, _ = dry_ports()
    ports.snapshot.rules = (  # type: ignore[misc]
        policy.RuleSpec(name="ask", kind="call", effect="require_approval", tool="lookup"),
    )
    ports.registry = ToolRegistry({"lookup": tool("lookup", approval="policy")})
    denied = result("c-1", failure("approval_denied", "bob denied it", rule="ask"))
    before = Verdict(NEEDS_APPROVAL, "approval", "ask")

    replay, message = _replay_call(ports, CALL, before, denied)

    assert replay.after == Verdict(NEEDS_APPROVAL, "approval", "ask", "lookup with any arguments")
    assert message is denied
    assert ports.ran_then == set()


def test_a_call_refused_now_is_shown_todays_refusal():
    ports, _ = dry_ports(user="bob")  # the snapshot refuses bob
    shown = result("c-1", {"ok": True, "result": 5})

    replay, message = _replay_call(ports, CALL, Verdict(ALLOWED), shown)

    error = ToolCallError(
        ToolErrorCode.PERMISSION_DENIED,
        "You may not call lookup for this user: because.",
        {"tool": "lookup", "scope": "lookup:read"},
    )
    assert replay.after == Verdict(REFUSED, "acl", "", error.message)
    assert message == tool_message(CALL, error=error)


def test_a_call_refused_then_and_allowed_now_is_shown_a_success_of_its_own():
    ports, _ = dry_ports()
    refused = result("c-1", failure("permission_denied", "no"))
    before = Verdict(REFUSED, "acl", "", "no")

    replay, message = _replay_call(ports, CALL, before, refused)

    assert replay.after == Verdict(ALLOWED)
    assert message == tool_message(CALL)
    assert ports.ran_then == set()


def test_a_call_read_differently_today_shows_both_readings():
    ports, _ = dry_ports()
    call = ToolCall(id="c-1", name="lookup", arguments={"n": 1}, raw_arguments='{"n": 2}')

    replay, _ = _replay_call(ports, call, Verdict(ALLOWED), None)

    assert (replay.arguments_changed, replay.recorded_arguments, replay.arguments) == (
        True,
        {"n": 1},
        {"n": 2},
    )


def test_a_call_read_differently_today_is_decided_on_todays_arguments():
    ports, _ = dry_ports()
    call = ToolCall(id="c-1", name="lookup", arguments=None, raw_arguments='{"n": 2,}')

    replay, message = _replay_call(ports, call, Verdict(REFUSED, "arguments_json"), None)

    assert (replay.arguments_changed, replay.recorded_arguments, replay.arguments) == (
        True,
        None,
        {"n": 2},
    )
    assert replay.after == Verdict(ALLOWED)
    assert message == tool_message(_reparsed(call))


# --- the answer ----------------------------------------------------------------------------------


def recorded(messages: list[Message], answer: str | None = "recorded") -> Any:
    return _Recorded("sealed", messages, 0, answer)


def test_the_answer_is_checked_again_only_for_a_run_that_ended_with_its_answer():
    final = Message(role="assistant", content="I looked it up.")
    asking = Message(role="assistant", content="", tool_calls=(CALL,))
    done = SimpleNamespace(status=RunStatus.SUCCEEDED)
    failed = SimpleNamespace(status=RunStatus.FAILED)
    failed_lookup = [
        Message(role="assistant", content="", tool_calls=(CALL,)),
        Message(
            role="tool",
            content=json.dumps(failure("tool_failed", "down")),
            tool_call_id="c-1",
            name="lookup",
            is_error=True,
        ),
    ]

    rechecked = _replayed_answer(done, recorded([final]), [*failed_lookup, final])

    assert rechecked == check_answer("I looked it up.", [*failed_lookup, final]).answer
    assert _replayed_answer(done, recorded([final]), [final]) == "I looked it up."
    assert _replayed_answer(failed, recorded([final]), [final]) == "recorded"
    assert _replayed_answer(done, recorded([asking]), [asking]) == "recorded"
    assert _replayed_answer(done, recorded([final, failed_lookup[1]]), []) == "recorded"
    assert _replayed_answer(done, recorded([]), []) == "recorded"


# --- the recorded conversation and the whole replay, their reads replaced ----------------------


def tool_call(call_id: str, name: str, index: int = 0, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments, index=index)


def run_of(**fields: Any) -> Any:
    values = {
        "id": "r-1",
        "request_id": "q-1",
        "tenant": SimpleNamespace(slug="acme"),
        "agent": "clerk",
        "user_id": "alice",
        "status": RunStatus.SUCCEEDED,
        "sealed": "",
        "input": "Look it up.",
        "answer": "",
    }
    return SimpleNamespace(**(values | fields))


def policy_span(status: str, **attributes: Any) -> dict[str, Any]:
    return {"kind": "policy_check", "status": status, "attributes": attributes, "audit": []}


@pytest.fixture
def reads(monkeypatch):
    """What replay reads, in memory: the clear conversation and the trace."""
    state = SimpleNamespace(messages=[], spans=[], asked=[], loaded=[])

    def trace(request_id: str) -> dict[str, Any]:
        state.asked.append(request_id)
        return {"request_id": request_id, "spans": state.spans}

    def messages(run: Any) -> list[Message]:
        state.loaded.append(run.id)
        return state.messages

    monkeypatch.setattr("harness.replay.run.load_run_messages", messages)
    monkeypatch.setattr("harness.replay.run.get_trace", trace)
    return state


def test_the_conversation_is_the_stored_one_first_then_the_sealed_one_then_the_audit(reads):
    stored = [Message(role="user", content="hi"), Message(role="assistant", content="yes")]
    whole = [
        Message(role="user", content="before"),
        Message(role="assistant", content="earlier"),
        Message(role="user", content="now"),
        Message(role="assistant", content="done"),
    ]
    sealed = seal({"answer": "done", "messages": [m.to_dict() for m in whole]})

    reads.messages = stored
    from_rows = _recorded_conversation(run_of(sealed=sealed))
    reads.messages = []
    from_copy = _recorded_conversation(run_of(sealed=sealed))
    answer_only = _recorded_conversation(run_of(sealed=seal({"answer": "x"}), answer="masked"))
    unreadable = _recorded_conversation(run_of(sealed="torn", answer="masked"))

    assert from_rows == _Recorded("sealed", stored, 0, "done")
    assert from_copy == _Recorded("sealed", whole, 2, "done")
    assert (answer_only.source, answer_only.answer) == ("audit", "masked")
    assert (unreadable.source, unreadable.answer) == ("audit", "masked")
    assert reads.asked == ["q-1", "q-1"]
    assert reads.loaded == ["r-1"] * 4


def test_a_conversation_rebuilt_from_the_audit_is_what_the_model_was_shown(reads):
    first = [tool_call("c-1", "lookup", 0, n=1), tool_call("c-2", "mail", 1)]
    refusal = {"code": "invalid_arguments", "message": "bad", "details": {}}
    reads.spans = [
        {"kind": "agent_session", "status": "error", "attributes": {"error": "x"}, "audit": []},
        policy_span("ok", call_id="c-1", tool="lookup", check="acl", allowed=True),
        policy_span("refused", call_id="c-2", tool="mail", check="schema", error=refusal),
        policy_span("refused", call_id="c-3", tool="note", check="acl", error={"code": "old"}),
        {
            "kind": "model_call",
            "status": "ok",
            "attributes": {},
            "audit": [
                {
                    "kind": "model_response",
                    "payload": {"text": "", "tool_calls": [c.to_dict() for c in first]},
                },
                {"kind": "model_request", "payload": {"messages": []}},
            ],
        },
        {
            "kind": "tool_call",
            "status": "ok",
            "attributes": {},
            "audit": [
                {
                    "kind": "tool_io",
                    "payload": {"call_id": "c-1", "tool": "lookup", "result": {"n": 1}},
                },
                {
                    "kind": "tool_io",
                    "payload": {
                        "call_id": "c-3",
                        "tool": "note",
                        "error": {"code": "tool_failed", "message": "down"},
                    },
                },
                {
                    "kind": "tool_io",
                    "payload": {
                        "call_id": "c-4",
                        "tool": "note",
                        "status": "error",
                        "detail": "lost",
                    },
                },
                {
                    "kind": "tool_io",
                    "payload": {"call_id": "c-5", "tool": "note", "status": "ok", "result": 2},
                },
            ],
        },
        {
            "kind": "model_call",
            "status": "ok",
            "attributes": {},
            "audit": [
                {
                    "kind": "model_response",
                    "payload": {
                        "text": "more",
                        "tool_calls": [
                            tool_call(i, "note").to_dict() for i in ("c-3", "c-4", "c-5", "c-6")
                        ],
                    },
                },
                {"kind": "model_response", "payload": {"text": None}},
                {"kind": "model_response", "payload": {"text": "Done.", "tool_calls": None}},
            ],
        },
    ]

    rebuilt = _from_audit(run_of(answer="Done, masked."))

    def tool_result(call_id: str, name: str, body: dict[str, Any], error: bool) -> Message:
        return Message(
            role="tool",
            content=json.dumps(body),
            tool_call_id=call_id,
            name=name,
            is_error=error,
        )

    assert rebuilt.messages == [
        Message(role="user", content="Look it up."),
        Message(role="assistant", content="", tool_calls=tuple(first)),
        tool_result("c-1", "lookup", {"ok": True, "result": {"n": 1}}, False),
        tool_result("c-2", "mail", {"ok": False, "error": refusal}, True),
        Message(
            role="assistant",
            content="more",
            tool_calls=tuple(tool_call(i, "note") for i in ("c-3", "c-4", "c-5", "c-6")),
        ),
        tool_result(
            "c-3", "note", {"ok": False, "error": {"code": "tool_failed", "message": "down"}}, True
        ),
        tool_result("c-4", "note", {"ok": False, "error": "lost"}, True),
        tool_result("c-5", "note", {"ok": True, "result": 2}, False),
        Message(role="assistant", content=""),
        Message(role="assistant", content="Done."),
    ]
    assert (rebuilt.source, rebuilt.start, rebuilt.answer) == ("audit", 0, "Done, masked.")
    assert rebuilt.notes == [
        "No clear copy of this run's conversation: it was rebuilt from the masked audit "
        "records, so masked arguments may fail validation that the clear ones passed."
    ]
    assert _from_audit(run_of(answer="")).answer is None


def test_the_policy_spans_are_grouped_by_the_call_they_decided(reads):
    acl = policy_span("ok", call_id="c-1", tool="lookup", check="acl")
    schema = policy_span("refused", call_id="c-1", tool="lookup", check="schema")
    other = policy_span("ok", call_id="c-2", tool="mail", check="acl")
    reads.spans = [
        acl,
        {"kind": "tool_call", "status": "ok", "attributes": {"call_id": "c-1"}, "audit": []},
        policy_span("ok", check="honesty", original_answer="x"),
        policy_span("ok", tool="mail", check="acl"),
        other,
        schema,
    ]

    assert _policy_spans("q-9") == {"c-1": [acl, schema], "c-2": [other]}
    assert reads.asked == ["q-9"]


class Edit:
    def describe(self) -> dict[str, Any]:
        return {"op": "add", "rule": "ask"}


def test_a_run_is_replayed_call_by_call_step_by_step_in_the_models_order(reads, monkeypatch):
    agent = AgentSpec(name="clerk", description="", system_prompt="", tools=("lookup", "mail"))
    registry = ToolRegistry({"lookup": tool("lookup"), "mail": tool("mail")})
    monkeypatch.setattr("harness.replay.run.get_agent", {"clerk": agent}.__getitem__)
    monkeypatch.setattr("harness.replay.run.get_tool_registry", lambda: registry)
    snapshot = Snapshot()
    snapshot.rules = (
        policy.RuleSpec(
            name="no-more", kind="call", effect="refuse", tool="lookup", match={"n": 3}
        ),
    )
    snapshot.edits = (Edit(),)  # type: ignore[attr-defined]
    # The second call of the first step comes first in the message, its index says second.
    step_one = (tool_call("c-2", "mail", 1, n=2), tool_call("c-1", "lookup", 0, n=1))
    third = tool_call("c-3", "lookup", 0, n=3)
    mail_failed = Message(
        role="tool",
        content=json.dumps(failure("tool_failed", "down")),
        tool_call_id="c-2",
        name="mail",
        is_error=True,
    )
    reads.messages = [
        Message(role="user", content="Look it up and mail it."),
        Message(role="assistant", content="", tool_calls=step_one),
        Message(
            role="tool", content='{"ok": true, "result": 1}', tool_call_id="c-1", name="lookup"
        ),
        mail_failed,
        Message(role="assistant", content="thinking"),
        Message(role="assistant", content="", tool_calls=(third,)),
        Message(
            role="tool", content='{"ok": true, "result": 3}', tool_call_id="c-3", name="lookup"
        ),
        Message(role="assistant", content="I mailed it."),
    ]
    # The run held c-1 for approval, and it ran once approved.
    reads.spans = [
        policy_span("ok", call_id="c-1", tool="lookup", check="acl", allowed=True),
        policy_span("ok", call_id="c-1", tool="lookup", check="approval", held=True, rule="ask"),
    ]
    run = run_of(sealed=seal({"answer": "I mailed it."}))

    replayed = replay_run(run, snapshot)  # type: ignore[arg-type]

    refused = Verdict(REFUSED, "call_rule", "no-more", "lookup with n=3")
    shown_today = [
        *reads.messages[:6],
        tool_message(third, error=_refusal_of_the_third()),
        reads.messages[7],
    ]
    assert replayed == ReplayReport(
        run_id="r-1",
        request_id="q-1",
        source="sealed",
        policy_version=11,
        proposed=[{"op": "add", "rule": "ask"}],
        calls=[
            CallReplay(
                1, "c-1", "lookup", Verdict(NEEDS_APPROVAL, "approval", "ask"), Verdict(ALLOWED)
            ),
            CallReplay(1, "c-2", "mail", Verdict(ALLOWED), Verdict(ALLOWED)),
            CallReplay(2, "c-3", "lookup", Verdict(ALLOWED), refused),
        ],
        recorded_answer="I mailed it.",
        replayed_answer=check_answer("I mailed it.", shown_today).answer,
        notes=[],
    )
    # The mail failed then: shown its recorded result, the guard corrects the answer.
    assert "The tool mail failed (tool_failed): down" in replayed.replayed_answer
    assert reads.asked == ["q-1"]
    lookup, mail = ("lookup:read", "lookup:write"), ("mail:read", "mail:write")
    assert snapshot.asked == [("alice", lookup), ("alice", mail), ("alice", lookup)]


def test_a_run_without_a_clear_copy_is_replayed_from_the_audit_and_says_so(reads, monkeypatch):
    agent = AgentSpec(name="clerk", description="", system_prompt="", tools=())
    monkeypatch.setattr("harness.replay.run.get_agent", {"clerk": agent}.__getitem__)
    monkeypatch.setattr("harness.replay.run.get_tool_registry", lambda: ToolRegistry({}))
    snapshot = Snapshot()
    snapshot.edits = ()  # type: ignore[attr-defined]

    replayed = replay_run(run_of(status=RunStatus.FAILED, answer="masked"), snapshot)  # type: ignore[arg-type]

    assert (replayed.source, replayed.recorded_answer, replayed.replayed_answer) == (
        "audit",
        "masked",
        "masked",
    )
    assert replayed.notes == _from_audit(run_of()).notes != []


def _refusal_of_the_third() -> ToolCallError:
    return ToolCallError(
        ToolErrorCode.POLICY_REFUSED,
        "lookup was refused by policy rule no-more: lookup with n=3.",
        {"tool": "lookup", "rule": "no-more", "reason": "lookup with n=3", "policy_version": 11},
    )


@pytest.mark.parametrize(
    "fault",
    [
        UnknownAgent("clerk", []),
        ToolFilesInvalid([ToolFileFault("lookup.yaml", "broken")]),
    ],
)
def test_a_run_whose_agent_or_tools_cannot_be_loaded_is_not_replayed(reads, monkeypatch, fault):
    def fails(*args: Any) -> Any:
        raise fault

    registry = ToolRegistry({})
    agent = AgentSpec(name="clerk", description="", system_prompt="", tools=())
    monkeypatch.setattr(
        "harness.replay.run.get_agent",
        fails if isinstance(fault, UnknownAgent) else lambda n: agent,
    )
    monkeypatch.setattr("harness.replay.run.get_tool_registry", lambda: registry)
    if isinstance(fault, ToolFilesInvalid):
        monkeypatch.setattr("harness.replay.run.get_tool_registry", fails)

    with pytest.raises(ReplayUnavailable) as raised:
        replay_run(run_of(), Snapshot())  # type: ignore[arg-type]

    assert raised.value.message == f"The run's agent or tools cannot be loaded today: {fault}"
    assert raised.value.details == {"run_id": "r-1"}
    assert raised.value.__cause__ is fault
    assert reads.asked == []


def test_a_run_is_replayed_under_the_tenants_policy_of_today_by_default(reads, monkeypatch):
    snapshot = Snapshot()
    asked = []
    agent = AgentSpec(name="clerk", description="", system_prompt="", tools=())
    monkeypatch.setattr("harness.replay.run.get_agent", {"clerk": agent}.__getitem__)
    monkeypatch.setattr("harness.replay.run.get_tool_registry", lambda: ToolRegistry({}))
    monkeypatch.setattr(
        "harness.replay.run.policy.policy_snapshot", lambda tenant: asked.append(tenant) or snapshot
    )
    snapshot.edits = ()  # type: ignore[attr-defined]
    reads.messages = [Message(role="user", content="hi"), Message(role="assistant", content="yo")]

    replayed = replay_run(run_of(), None)

    assert asked == ["acme"]
    assert (replayed.policy_version, replayed.calls, replayed.proposed) == (11, [], [])
