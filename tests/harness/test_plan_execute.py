"""Plan, then act: an agent with "strategy": "plan_execute" writes a plan before acting, follows
it, and revises it once when a step fails."""

import re

from django.contrib.auth import get_user_model
from django.test import Client

from harness.models import Run, RunEvent
from tests.runs import TICKET, agent_with, call, spans_of

PLAN = {"text": '["Look the ticket up with get_ticket", "Tell the user its status"]'}
REVISED = {"text": "1. Try get_ticket instead\n2. Answer with what it says"}
LOOKUP = call("get_ticket", ticket_id=TICKET)
FAILING = call("always_fails", ticket_id=TICKET)


def run(client, name):
    response = client.post("/api/v1/runs", {"agent": name, "user": "bob", "input": "status?"})
    assert response.status_code == 200, response.content
    return response.json()


def events_of(run_id, kind):
    return [e.data for e in RunEvent.objects.filter(run_id=run_id, type=kind)]


def test_a_plan_is_written_first_shown_and_followed(acme, agent_dir):
    name = agent_with(agent_dir, [PLAN, LOOKUP, {"text": "It is open."}], strategy="plan_execute")

    result = run(acme, name)

    assert result["status"] == "succeeded"
    assert result["answer"] == "It is open."
    steps = ["Look the ticket up with get_ticket", "Tell the user its status"]
    assert events_of(result["id"], "plan.created") == [{"steps": steps, "reason": "first plan"}]
    assert Run.objects.get(id=result["id"]).plans == [{"steps": steps, "reason": "first plan"}]
    plan_span, *step_spans = spans_of(acme, result, "model_call")
    assert plan_span["name"] == "plan"
    assert plan_span["attributes"]["plan_steps"] == steps
    assert [s["name"] for s in step_spans] == ["step 1", "step 2"]
    # The steps that follow see the plan in their system prompt.
    request = next(r for r in step_spans[0]["audit"] if r["kind"] == "model_request")
    assert "Follow this plan" in request["payload"]["messages"][0]["content"]
    assert "1. Look the ticket up with get_ticket" in request["payload"]["messages"][0]["content"]


def test_a_failed_step_revises_the_plan_once(acme, agent_dir):
    script = [PLAN, FAILING, REVISED, FAILING, {"text": "always_fails failed twice."}]
    name = agent_with(agent_dir, script, strategy="plan_execute")

    result = run(acme, name)

    assert result["status"] == "succeeded"
    [revised] = events_of(result["id"], "plan.revised")
    assert revised["steps"] == ["Try get_ticket instead", "Answer with what it says"]
    assert revised["reason"].startswith("always_fails: ")
    assert len(Run.objects.get(id=result["id"]).plans) == 2  # the second failure: no third


def test_the_admin_timeline_shows_each_plan_as_a_plan_not_as_a_step(acme, agent_dir):
    script = [PLAN, FAILING, REVISED, LOOKUP, {"text": "It is open."}]
    result = run(acme, agent_with(agent_dir, script, strategy="plan_execute"))
    operator = Client()
    operator.force_login(get_user_model().objects.get(username="admin"))

    page = operator.get(f"/admin/harness/run/{result['id']}/change/").content.decode()

    plan = re.search(r"<h3>\s*Plan\s", page).start()
    revised = re.search(r"<h3>\s*Revised plan\s", page).start()
    assert page.count('class="timeline-step timeline-plan"') == 2
    assert plan < page.index("<li>Look the ticket up with get_ticket</li>") < revised
    assert revised < page.index("<li>Try get_ticket instead</li>")
    # The steps keep their numbers, each once.
    assert [page.count(f'id="step-{n}"') for n in (1, 2, 3)] == [1, 1, 1]


def test_an_agent_without_the_strategy_writes_no_plan(acme, agent_dir):
    name = agent_with(agent_dir, [LOOKUP, {"text": "It is open."}])

    result = run(acme, name)

    assert result["status"] == "succeeded"
    assert events_of(result["id"], "plan.created") == []
    assert Run.objects.get(id=result["id"]).plans == []
