"""Finding 8: every bad input is a clear 4xx with a stable code, never a 500."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from harness.models import ApiKey, Run, Session
from harness.webhooks import UnsafeCallbackUrl, check_callback_url
from policy.models import TenantLimits

RUN = {"agent": "ticket-assistant", "user": "bob", "input": "hello", "mode": "async"}


def error_code(response) -> str:
    return response.json()["error"]["code"]


def test_json_nested_a_thousand_deep_is_refused(acme):
    body = '{"agent": ' + "[" * 1000 + "]" * 1000 + "}"
    response = acme.post("/api/v1/runs", body)
    assert response.status_code == 400
    assert error_code(response) == "malformed_json"


def test_a_body_over_the_size_limit_is_413(acme):
    body = json.dumps(RUN | {"input": "x" * (3 * 1024 * 1024)})
    response = acme.post("/api/v1/runs", body)
    assert response.status_code == 413
    assert error_code(response) == "request_too_large"


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com:99999/hook",
        "http://" + "ä" * 63 + ".example.com/hook",
        "http://user:pass@example.com/hook",
    ],
)
def test_a_bad_callback_url_is_invalid_request(acme, url):
    response = acme.post("/api/v1/runs", RUN | {"callback_url": url})
    assert response.status_code == 400, response.content
    assert error_code(response) == "invalid_request"


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com:99999/hook",
        "http://" + "ä" * 63 + ".example.com/hook",
        "http://[::1/hook",
    ],
)
def test_the_callback_check_itself_refuses_what_the_api_field_might_let_through(url):
    # A URL stored before the API checked it, or redelivered from the admin, is checked again.
    with pytest.raises(UnsafeCallbackUrl):
        check_callback_url(url)


@pytest.mark.parametrize("text", ["a\u0000b", "a\ud800b"])
def test_a_rule_match_with_nul_or_a_lone_surrogate_is_invalid_request(acme, text):
    rule = {
        "name": "no-nul",
        "kind": "call",
        "effect": "require_approval",
        "tool": "update_ticket",
        "match": {"/action": text},
    }
    response = acme.post("/api/v1/policies/rules", json.dumps(rule), **{"X-Harness-User": "alice"})
    assert response.status_code == 400, response.content
    assert error_code(response) == "invalid_request"


def test_a_nul_in_a_run_input_is_invalid_request(acme):
    response = acme.post("/api/v1/runs", RUN | {"input": "a\u0000b"})
    assert response.status_code == 400
    assert error_code(response) == "invalid_request"


@pytest.mark.parametrize(
    ("query", "headers"),
    [("?after=%C2%B2", {}), ("", {"Last-Event-ID": "9" * 5000}), ("?after=-1", {})],
)
def test_a_bad_event_cursor_is_invalid_request(acme, query, headers):
    run = acme.post("/api/v1/runs", RUN).json()
    response = acme.get(f"/api/v1/runs/{run['id']}/events{query}", **headers)
    assert response.status_code == 400
    # An error is a JSON document even from the stream's endpoint, whatever the client accepts.
    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content)["error"]["code"] == "invalid_request"


@pytest.mark.parametrize("accept", ["text/event-stream", "*/*", "application/json"])
def test_the_event_streams_errors_are_json_whatever_the_client_accepts(acme, accept):
    response = acme.get(f"/api/v1/runs/{uuid.uuid4()}/events", Accept=accept)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content)["error"]["code"] == "run_not_found"


@pytest.mark.parametrize(
    "budget", [{"max_tool_calls": 2147483648}, {"max_tokens": 2**63}, {"max_calls_per_tool": 2**40}]
)
def test_a_budget_beyond_the_integer_range_is_invalid_request(acme, budget):
    response = acme.post("/api/v1/runs", RUN | {"budget": budget})
    assert response.status_code == 400
    assert error_code(response) == "invalid_request"


@pytest.mark.parametrize(
    "body",
    [RUN | {"callback_uri": "https://example.com/hook"}, RUN | {"budget": {"max_tokenz": 5}}],
)
def test_unknown_fields_are_refused(acme, body):
    response = acme.post("/api/v1/runs", body)
    assert response.status_code == 400
    assert error_code(response) == "invalid_request"
    assert Run.objects.count() == 0


def test_unknown_fields_of_a_policy_edit_are_refused(acme):
    response = acme.post(
        "/api/v1/policies/permissions",
        {"subject": "bob", "scope": "ticket:read", "efect": "deny"},
        **{"X-Harness-User": "alice"},
    )
    assert response.status_code == 400
    assert error_code(response) == "invalid_request"


def test_an_idempotency_key_reused_with_another_body_is_422(acme):
    first = acme.post("/api/v1/runs", RUN, **{"Idempotency-Key": "k-1"})
    again = acme.post("/api/v1/runs", RUN, **{"Idempotency-Key": "k-1"})
    other = acme.post("/api/v1/runs", RUN | {"input": "bye"}, **{"Idempotency-Key": "k-1"})
    assert first.status_code == again.status_code == 202
    assert again.json()["id"] == first.json()["id"]
    assert other.status_code == 422
    assert error_code(other) == "idempotency_key_reused"


def test_a_call_rule_for_a_tool_that_never_needs_approval_is_refused(acme):
    # get_ticket's file says "approval": "never": a rule requiring approval would never fire.
    rule = {
        "name": "hold-reads",
        "kind": "call",
        "effect": "require_approval",
        "tool": "get_ticket",
    }
    response = acme.post("/api/v1/policies/rules", rule, **{"X-Harness-User": "alice"})
    assert response.status_code == 400, response.content
    assert error_code(response) == "invalid_rule"


def test_a_failed_create_leaves_no_session_behind(acme, settings):
    settings.HARNESS_TENANT_MAX_TOKENS_PER_RUN = 1000
    sessions = Session.objects.count()
    response = acme.post("/api/v1/runs", RUN | {"budget": {"max_tokens": 5000}})
    assert response.status_code == 400
    assert error_code(response) == "budget_above_maximum"
    assert Session.objects.count() == sessions


@pytest.mark.parametrize(
    ("limits", "runs_before", "code"),
    [
        # refused by admission, before the run's transaction: a queued run holds the slot
        ({"max_concurrent_runs": 1}, 1, "too_many_concurrent_runs"),
        # refused inside the run's transaction, after its session was written
        ({"daily_tokens": 1000}, 0, "tenant_budget_exhausted"),
    ],
)
def test_a_create_refused_by_limits_leaves_no_session_behind(acme, limits, runs_before, code):
    TenantLimits.objects.create(tenant="acme", **limits)
    for _ in range(runs_before):
        assert acme.post("/api/v1/runs", RUN).status_code == 202
    sessions = Session.objects.count()
    response = acme.post("/api/v1/runs", RUN | {"budget": {"max_tokens": 5000}})
    assert response.status_code == 429, response.content
    assert error_code(response) == code
    assert Session.objects.count() == sessions


def test_an_api_key_records_when_it_was_last_used_at_most_once_a_minute(acme):
    key = ApiKey.objects.get(name="tests")
    assert key.last_used_at is None
    assert acme.get("/api/v1/runs").status_code == 200
    key.refresh_from_db()
    first = key.last_used_at
    assert first is not None
    assert acme.get("/api/v1/runs").status_code == 200
    key.refresh_from_db()
    assert key.last_used_at == first  # not rewritten within the minute


def test_trace_is_405(acme):
    response = Client().generic("TRACE", "/api/v1/runs", HTTP_AUTHORIZATION=f"Bearer {acme.key}")
    assert response.status_code == 405


@pytest.mark.parametrize(
    "path", ["/api/v1/policies/rules/a%00b", "/api/v1/runs/a%00b", "/api/v1/runs/x/approvals/c%00"]
)
def test_a_nul_in_a_path_is_invalid_request(acme, path):
    response = acme.get(path, **{"X-Harness-User": "alice"})
    assert response.status_code == 400
    assert error_code(response) == "invalid_request"
