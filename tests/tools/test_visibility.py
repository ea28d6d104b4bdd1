"""The model is shown only the agent's tools that the user may call: the policy decides."""

from policy import services as policy
from tests.support.agents import DEMO_TOOLS


def shown_tools(done):
    return [tool["name"] for tool in done.model_requests[0]["tools"]]


def test_a_member_is_not_shown_the_tools_whose_scope_they_lack(run_script):
    done = run_script(user="bob")

    assert shown_tools(done) == ["get_ticket", "search_tickets", "update_ticket", "notify_user"]


def test_an_admin_is_shown_every_tool_of_the_agent(run_script):
    done = run_script(user="alice")

    assert shown_tools(done) == DEMO_TOOLS  # the agent's (run_script's) tools, in order


def test_a_deny_rule_hides_a_tool_the_role_would_allow(run_script):
    policy.add_permission("acme", "bob", "ticket:write", "deny", actor="test")

    done = run_script(user="bob")

    assert shown_tools(done) == ["get_ticket", "search_tickets", "notify_user"]


def test_a_user_with_no_role_is_shown_no_tools(run_script):
    done = run_script(user="mallory")

    assert shown_tools(done) == []


def test_only_the_agents_own_tools_are_shown(run_script):
    done = run_script(user="alice", tools=["get_customer", "get_ticket"])

    assert shown_tools(done) == ["get_customer", "get_ticket"]
