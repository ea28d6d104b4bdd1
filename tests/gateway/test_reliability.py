"""Retries, Retry-After, timeouts and fallback, for both real adapters."""

from dataclasses import dataclass
from typing import Any

import pytest

from gateway.errors import (
    MissingApiKey,
    ProviderRateLimited,
    ProviderRejected,
    ProviderTimeout,
    ProviderUnavailable,
)
from gateway.messages import Message
from gateway.services import complete
from tests.fake_providers import (
    FakeProvider,
    Reply,
    anthropic_error,
    anthropic_message,
    anthropic_text_stream,
    openai_completion,
    openai_error,
    openai_text_stream,
)
from tests.gateway.conftest import CONVERSATION


@dataclass
class Provider:
    server: FakeProvider
    route: str

    def answer(self, text: str = "ok", stream: bool = False) -> Reply:
        if self.server.api == "openai":
            return openai_text_stream(text) if stream else openai_completion(text)
        return anthropic_text_stream(text) if stream else anthropic_message(text)

    def error(self, status: int, **headers: str) -> Reply:
        if self.server.api == "openai":
            return openai_error(status, f"status {status}", **headers)
        kind = {429: "rate_limit_error", 400: "invalid_request_error", 401: "authentication_error"}
        return anthropic_error(status, kind.get(status, "api_error"), f"status {status}", **headers)


@pytest.fixture(params=["openai", "anthropic"])
def provider(request: Any, routes: Any) -> Provider:
    server = request.getfixturevalue(f"{request.param}_server")
    route = f"{request.param}:model-test"
    routes({route: {"backoff_s": 0.02, "retries": 2}})
    return Provider(server, route)


def statuses(attempts: list[dict[str, Any]]) -> list[tuple[str, int | None]]:
    return [(a["status"], a.get("http_status")) for a in attempts]


def test_a_429_is_retried_after_the_retry_after_it_names(provider):
    provider.server.queue(provider.error(429, **{"Retry-After": "1"}), provider.answer("later"))

    response = complete(provider.route, CONVERSATION, [])

    assert response.text == "later"
    first, second = response.attempts
    assert statuses([first, second]) == [("rate_limited", 429), ("ok", None)]
    assert first["retry_after_s"] == 1.0
    assert 1.0 <= first["wait_s"] <= 1.1
    assert (first["attempt"], second["attempt"]) == (1, 2)
    assert first["route"] == second["route"] == provider.route
    assert first["latency_ms"] > 0


def test_retry_after_in_milliseconds_is_honoured_too(provider):
    provider.server.queue(provider.error(429, **{"retry-after-ms": "250"}), provider.answer())

    response = complete(provider.route, CONVERSATION, [])

    assert 0.25 <= response.attempts[0]["wait_s"] <= 0.275


def test_a_500_then_success_backs_off_with_jitter_and_succeeds(provider):
    provider.server.queue(provider.error(500), provider.error(502), provider.answer("fine"))

    response = complete(provider.route, CONVERSATION, [])

    assert response.text == "fine"
    assert statuses(response.attempts) == [
        ("server_error", 500),
        ("server_error", 502),
        ("ok", None),
    ]
    # Exponential: the n-th wait lies in [base·2ⁿ⁻¹/2, base·2ⁿ⁻¹].
    assert 0.01 <= response.attempts[0]["wait_s"] <= 0.02
    assert 0.02 <= response.attempts[1]["wait_s"] <= 0.04


@pytest.mark.parametrize("status", [400, 401])
def test_other_4xx_answers_are_not_retried(provider, status):
    provider.server.queue(provider.error(status), provider.answer("never asked for"))

    with pytest.raises(ProviderRejected) as caught:
        complete(provider.route, CONVERSATION, [])

    assert caught.value.code == "provider_rejected"
    assert caught.value.details["http_status"] == status
    assert f"status {status}" in caught.value.message
    assert len(provider.server.requests) == 1
    assert statuses(caught.value.attempts) == [("rejected", status)]


def test_retries_end_after_the_routes_count_with_a_clear_error(provider):
    provider.server.queue(*(provider.error(503) for _ in range(3)), provider.answer("too late"))

    with pytest.raises(ProviderUnavailable) as caught:
        complete(provider.route, CONVERSATION, [])

    assert caught.value.code == "provider_unavailable"
    assert "after 3 attempts" in caught.value.message
    assert len(provider.server.requests) == 3
    assert [a["status"] for a in caught.value.attempts] == ["server_error"] * 3


def test_rate_limits_that_outlast_the_retries_are_reported_as_such(provider, routes):
    routes({provider.route: {"retries": 1, "backoff_s": 0.01}})
    provider.server.queue(provider.error(429), provider.error(429))

    with pytest.raises(ProviderRateLimited) as caught:
        complete(provider.route, CONVERSATION, [])

    assert caught.value.code == "provider_rate_limited"


def test_a_retry_after_longer_than_the_route_may_wait_ends_the_route_at_once(provider, routes):
    routes({provider.route: {"max_wait_s": 5}})
    provider.server.queue(provider.error(429, **{"Retry-After": "120"}), provider.answer())

    with pytest.raises(ProviderRateLimited) as caught:
        complete(provider.route, CONVERSATION, [])

    assert "longer than max_wait_s" in caught.value.message
    assert len(provider.server.requests) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "sse"])
def test_a_provider_slower_than_the_route_timeout_is_retried(provider, routes, stream):
    routes({provider.route: {"timeout_s": 0.3, "backoff_s": 0.01, "stream": stream}})
    slow = provider.answer("slow", stream)
    slow.stall_s = 10  # released when the server closes
    provider.server.queue(slow, provider.answer("quick", stream))

    response = complete(provider.route, CONVERSATION, [])

    assert response.text == "quick"
    assert [a["status"] for a in response.attempts] == ["timeout", "ok"]


def test_a_provider_that_never_answers_in_time_is_a_timeout_error(provider, routes):
    routes({provider.route: {"timeout_s": 0.2, "retries": 1, "backoff_s": 0.01}})
    for _ in range(2):
        slow = provider.answer()
        slow.stall_s = 10
        provider.server.queue(slow)

    with pytest.raises(ProviderTimeout) as caught:
        complete(provider.route, CONVERSATION, [])

    assert caught.value.code == "provider_timeout"
    assert [a["status"] for a in caught.value.attempts] == ["timeout", "timeout"]


def test_a_refused_connection_is_retried_then_reported(settings, routes):
    settings.OPENAI_API_KEY = "sk-test"
    routes(
        {"openai:nowhere": {"base_url": "http://127.0.0.1:9/v1", "retries": 1, "backoff_s": 0.01}}
    )

    with pytest.raises(ProviderUnavailable) as caught:
        complete("openai:nowhere", CONVERSATION, [])

    assert [a["status"] for a in caught.value.attempts] == ["connection_error"] * 2


def test_the_next_route_answers_when_the_first_one_gives_up(
    openai_server, anthropic_server, routes
):
    routes({"openai:primary": {"retries": 1, "backoff_s": 0.01}})
    openai_server.queue(openai_error(500), openai_error(500))
    anthropic_server.queue(anthropic_message("from the fallback"))

    response = complete("openai:primary", CONVERSATION, [], fallbacks=["anthropic:backup"])

    assert response.text == "from the fallback"
    assert response.route == "anthropic:backup"
    assert [(a["route"], a["status"]) for a in response.attempts] == [
        ("openai:primary", "server_error"),
        ("openai:primary", "server_error"),
        ("anthropic:backup", "ok"),
    ]
    assert [a["attempt"] for a in response.attempts] == [1, 2, 3]


def test_when_every_route_fails_the_last_error_lists_all_attempts(
    openai_server, anthropic_server, routes
):
    routes({"openai:primary": {"retries": 0}, "anthropic:backup": {"retries": 0}})
    openai_server.queue(openai_error(500))
    anthropic_server.queue(anthropic_error(400, "invalid_request_error", "prompt is too long"))

    with pytest.raises(ProviderRejected) as caught:
        complete("openai:primary", CONVERSATION, [], fallbacks=["anthropic:backup"])

    assert "prompt is too long" in caught.value.message
    assert caught.value.details["routes"] == ["openai:primary", "anthropic:backup"]
    assert [a["route"] for a in caught.value.attempts] == ["openai:primary", "anthropic:backup"]


def test_a_route_without_a_key_is_skipped_for_the_fallback(openai_server, settings):
    settings.ANTHROPIC_API_KEY = ""
    openai_server.queue(openai_completion("from openai"))

    response = complete("anthropic:claude-test", CONVERSATION, [], fallbacks=["openai:gpt-test"])

    assert response.route == "openai:gpt-test"
    assert response.attempts[0]["status"] == "missing_api_key"
    assert "ANTHROPIC_API_KEY" in response.attempts[0]["error"]


def test_a_route_without_a_key_and_no_fallback_says_which_variable_to_set(settings):
    settings.OPENAI_API_KEY = ""

    with pytest.raises(MissingApiKey) as caught:
        complete("openai:gpt-test", CONVERSATION, [])

    assert caught.value.code == "missing_api_key"
    assert "OPENAI_API_KEY" in caught.value.message


def test_the_scripted_route_answers_as_before_with_one_recorded_attempt():
    messages = [Message(role="user", content="Why has ticket T-20250318-007 not been handled?")]

    response = complete("scripted:demo", messages, [])

    assert response.route == "scripted:demo"
    assert response.model == "scripted:demo"
    assert [c.name for c in response.tool_calls] == ["get_ticket"]
    assert [(a["route"], a["status"]) for a in response.attempts] == [("scripted:demo", "ok")]
