"""The run API end to end with the demo agent and the scripted model."""

import json

import pytest

from tools.demo.models import Notification, Ticket

ZH_QUESTION = "帮我查一下单号 T-20250318-007 为什么一直没人处理"
EN_QUESTION = "Why has ticket T-20250318-007 not been handled?"


def start_demo_run(client, question=EN_QUESTION, user="bob", **extra):
    body = {"agent": "ticket-assistant", "user": user, "input": question} | extra
    return client.post("/api/v1/runs", body)


@pytest.mark.parametrize(
    ("question", "answer_fragment"),
    [(ZH_QUESTION, "agent-li"), (EN_QUESTION, "assigned it to the queue's on-call agent")],
)
def test_the_demo_run_assigns_the_ticket_and_notifies_the_assignee(acme, question, answer_fragment):
    response = start_demo_run(acme, question)

    assert response.status_code == 200
    run = response.json()
    assert run["status"] == "succeeded"
    assert answer_fragment in run["answer"]
    assert run["model_route"] == "scripted:demo"
    assert run["steps"] == 4
    assert run["usage"]["total_tokens"] > 0
    ticket = Ticket.objects.get(tenant="acme", ticket_id="T-20250318-007")
    assert (ticket.status, ticket.assignee_id) == ("assigned", "agent-li")
    notification = Notification.objects.get(tenant="acme")
    assert (notification.recipient_id, notification.ticket_id) == ("agent-li", "T-20250318-007")


def test_the_trace_shows_the_spans_and_the_three_tool_calls_in_order(acme):
    run = start_demo_run(acme).json()

    trace = acme.get(run["links"]["trace"]).json()

    assert trace["request_id"] == run["request_id"]
    kinds = [span["kind"] for span in trace["spans"]]
    assert kinds == [
        "agent_session",
        "model_call",
        "policy_check",
        "tool_call",
        "model_call",
        "policy_check",
        "tool_call",
        "model_call",
        "policy_check",
        "tool_call",
        "model_call",
        "action_response",
    ]
    tool_spans = [span for span in trace["spans"] if span["kind"] == "tool_call"]
    assert [span["name"] for span in tool_spans] == ["get_ticket", "update_ticket", "notify_user"]
    session_id = trace["spans"][0]["span_id"]
    assert all(span["parent_span_id"] == session_id for span in trace["spans"][1:])


def test_the_trace_audits_what_the_model_saw_and_what_each_tool_did(acme):
    run = start_demo_run(acme).json()

    spans = acme.get(run["links"]["trace"]).json()["spans"]

    first_model_call = next(span for span in spans if span["kind"] == "model_call")
    request = first_model_call["audit"][0]
    assert request["kind"] == "model_request"
    sent = request["payload"]["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]
    assert sent[1]["content"] == EN_QUESTION
    assert {tool["name"] for tool in request["payload"]["tools"]} == {
        "get_ticket",
        "search_tickets",
        "update_ticket",
        "notify_user",
    }
    update = next(span for span in spans if span["name"] == "update_ticket")
    io = update["audit"][0]["payload"]
    assert io["arguments"] == {
        "ticket_id": "T-20250318-007",
        "action": "assign",
        "assignee_id": "agent-li",
    }
    assert io["result"]["status"] == "assigned"
    assert io["idempotency_key"] == f"{run['id']}:call_2_1"


def test_a_run_can_be_fetched_by_id(acme):
    run = start_demo_run(acme).json()

    response = acme.get(f"/api/v1/runs/{run['id']}")

    assert response.status_code == 200
    assert response.json()["answer"] == run["answer"]


def test_a_repeated_idempotency_key_returns_the_same_run(acme):
    first = acme.post(
        "/api/v1/runs",
        {"agent": "ticket-assistant", "user": "bob", "input": EN_QUESTION},
        **{"Idempotency-Key": "order-42"},
    ).json()
    second = acme.post(
        "/api/v1/runs",
        {"agent": "ticket-assistant", "user": "bob", "input": EN_QUESTION},
        **{"Idempotency-Key": "order-42"},
    ).json()

    assert second["id"] == first["id"]
    assert Notification.objects.count() == 1


def test_a_malformed_json_body_is_refused(acme):
    response = acme.post("/api/v1/runs", '{"agent": "ticket-assistant", ')

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed_json"


def test_a_missing_field_is_named(acme):
    response = acme.post("/api/v1/runs", {"agent": "ticket-assistant", "user": "bob"})

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert "input" in error["details"]["fields"]


def test_a_body_that_is_not_an_object_is_refused(acme):
    response = acme.post("/api/v1/runs", json.dumps(["ticket-assistant"]))

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"


def test_an_unknown_agent_is_refused_with_the_names_that_exist(acme):
    response = start_demo_run(acme, agent="ticket-wizard")

    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "unknown_agent"
    assert "ticket-assistant" in error["details"]["available"]
    assert "ticket-assistant" in error["message"]


def test_a_missing_api_key_is_refused(acme):
    response = acme.client.post("/api/v1/runs", data="{}", content_type="application/json")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("header", ["Bearer hk_nope_nope", "Bearer ", "Basic YWxpY2U6c2VjcmV0"])
def test_a_bad_api_key_is_refused(acme, header):
    response = acme.client.get("/api/v1/runs/whatever", HTTP_AUTHORIZATION=header)

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"


def test_a_revoked_api_key_is_refused(demo):
    from django.test import Client

    from harness.api_keys import create_api_key
    from tests.conftest import ApiClient

    old = create_api_key("acme", "rotating").secret
    create_api_key("acme", "rotating", replace=True)

    response = ApiClient(Client(), old).get("/api/v1/runs/whatever")

    assert response.status_code == 401


def test_another_tenants_run_is_not_found(acme, globex):
    run = start_demo_run(acme).json()

    for path in (f"/api/v1/runs/{run['id']}", f"/api/v1/runs/{run['id']}/trace"):
        response = globex.get(path)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "run_not_found"


def test_a_run_id_that_is_not_a_uuid_is_not_found(acme):
    response = acme.get("/api/v1/runs/../../etc")

    assert response.status_code == 404
