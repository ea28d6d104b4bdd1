"""The honesty guard and context trimming on long sessions."""

import pytest

from tests.factories import write_script
from tests.runs import agent_with

FAIL = {"tool_calls": [{"name": "always_fails", "arguments": {"ticket_id": "T-20250318-007"}}]}


def run(client, name, user="bob"):
    return client.post("/api/v1/runs", {"agent": name, "user": user, "input": "go"}).json()


@pytest.mark.parametrize(
    ("claimed", "expected"),
    [
        ("I assigned the ticket to agent-li.", "The tool always_fails failed (tool_failed)"),
        ("我已经把工单分配给了 agent-li。", "工具 always_fails 调用失败（tool_failed）"),
    ],
)
def test_an_answer_that_hides_a_failed_tool_is_replaced(acme, agent_dir, claimed, expected):
    name = agent_with(agent_dir, [FAIL, {"text": claimed}])

    result = run(acme, name)

    assert result["status"] == "succeeded"
    assert expected in result["answer"]
    assert "unreachable" in result["answer"]
    spans = acme.get(result["links"]["trace"]).json()["spans"]
    [guard] = [s for s in spans if s["name"] == "honesty guard"]
    assert guard["attributes"]["original_answer"] == claimed


@pytest.mark.parametrize(
    "reported",
    [
        "I could not assign the ticket: the ticket system is unreachable.",
        "分配失败：工单系统无法连接。",
    ],
)
def test_an_answer_that_reports_the_failure_is_kept(acme, agent_dir, reported):
    name = agent_with(agent_dir, [FAIL, {"text": reported}])

    assert run(acme, name)["answer"] == reported


def test_a_failure_redeemed_by_a_later_success_of_the_same_tool_is_not_flagged(acme, agent_dir):
    lookup_bad = {
        "tool_calls": [{"name": "get_ticket", "arguments": {"ticket_id": "T-20990101-001"}}]
    }
    lookup_good = {
        "tool_calls": [{"name": "get_ticket", "arguments": {"ticket_id": "T-20250318-007"}}]
    }
    name = agent_with(agent_dir, [lookup_bad, lookup_good, {"text": "It is unassigned."}])

    assert run(acme, name)["answer"] == "It is unassigned."


def long_session(count):
    return [
        {"tool_calls": [{"name": "search_tickets", "arguments": {"limit": n + 1}}]}
        for n in range(count)
    ] + [{"text": "Finished the review."}]


def model_calls(client, result):
    spans = client.get(result["links"]["trace"]).json()["spans"]
    return [s for s in spans if s["kind"] == "model_call"]


def test_a_30_step_session_is_kept_under_the_context_budget_with_a_summary(acme, agent_dir):
    summary = write_script(agent_dir.parent, [{"text": "The user asked for a ticket review."}])
    name = agent_with(
        agent_dir,
        long_session(30),
        max_steps=40,
        context_tokens=1500,
        summary_model=f"scripted:{summary}",
    )

    result = run(acme, name)

    assert result["status"] == "succeeded"
    calls = model_calls(acme, result)
    assert len(calls) == 31
    late = calls[-1]["attributes"]
    assert late["context_method"] == "summary"
    assert late["context_saved_tokens"] > 0
    assert late["context_tokens"] <= 1500 < late["context_full_tokens"]
    system = calls[-1]["audit"][0]["payload"]["messages"][0]["content"]
    assert "The user asked for a ticket review." in system
    assert "Tools called earlier:" in system
    assert "search_tickets(limit=1)" in system


def test_when_a_summary_would_not_save_40_percent_older_turns_are_dropped(acme, agent_dir):
    bloated = write_script(agent_dir.parent, [{"text": "word " * 5000}])
    name = agent_with(
        agent_dir,
        long_session(12),
        max_steps=20,
        context_tokens=1500,
        summary_model=f"scripted:{bloated}",
    )

    result = run(acme, name)

    late = model_calls(acme, result)[-1]
    assert late["attributes"]["context_method"] == "truncate"
    system = late["audit"][0]["payload"]["messages"][0]["content"]
    assert "earlier messages were omitted" in system
    assert "word word" not in system


def test_the_honesty_instructions_are_sent_once_even_if_the_agent_file_repeats_them():
    from harness.engine.context import HARNESS_INSTRUCTIONS, system_message

    plain = system_message("You help with tickets.").content
    repeating = system_message(f"You help with tickets. {HARNESS_INSTRUCTIONS}").content

    assert plain == f"You help with tickets.\n\n{HARNESS_INSTRUCTIONS}"
    assert repeating.count(HARNESS_INSTRUCTIONS) == 1
