"""Client-side limits per route: requests/min and tokens/min, shared through Redis."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from gateway.errors import ClientRateLimited
from gateway.services import complete
from tests.fake_providers import openai_completion, openai_usage
from tests.gateway.conftest import CONVERSATION

REPO = Path(__file__).resolve().parents[2]
needs_redis = pytest.mark.skipif(
    not django_settings.REDIS_URL, reason="REDIS_URL is not set: the embedded tier has no Redis"
)


def unique_route() -> str:
    # Buckets are keyed by route name and, with Redis, outlive the test: a fresh name each time.
    return f"openai:limited-{uuid.uuid4().hex[:8]}"


def test_a_call_past_the_requests_per_minute_limit_is_refused_without_reaching_the_provider(
    openai_server, routes
):
    route = unique_route()
    routes({route: {"requests_per_minute": 1, "max_wait_s": 0}})
    openai_server.queue(openai_completion("first"), openai_completion("second"))

    complete(route, CONVERSATION, [])
    with pytest.raises(ClientRateLimited) as caught:
        complete(route, CONVERSATION, [])

    assert caught.value.code == "client_rate_limited"
    assert "1 requests/min" in caught.value.message
    assert len(openai_server.requests) == 1
    assert caught.value.attempts[0]["status"] == "client_rate_limited"


def test_a_call_waits_for_the_next_slot_when_the_wait_is_short_enough(openai_server, routes):
    route = unique_route()
    # 100 tokens a second; the first call uses the whole minute's budget.
    routes({route: {"tokens_per_minute": 6000, "max_wait_s": 5}})
    openai_server.queue(
        openai_completion("first", usage=openai_usage(prompt=6000, completion=0)),
        openai_completion("second"),
    )

    first = complete(route, CONVERSATION, [])
    response = complete(route, CONVERSATION, [])

    assert "limited_s" not in first.attempts[0]
    assert response.text == "second"
    assert 0 < response.attempts[0]["limited_s"] <= 1


def test_a_limited_route_falls_back_to_the_next_route(openai_server, routes):
    route = unique_route()
    routes({route: {"requests_per_minute": 1, "max_wait_s": 0}})
    openai_server.queue(openai_completion("first"), openai_completion("from the fallback"))

    complete(route, CONVERSATION, [])
    response = complete(route, CONVERSATION, [], fallbacks=["openai:gpt-test"])

    assert (response.route, response.text) == ("openai:gpt-test", "from the fallback")


def test_tokens_per_minute_are_charged_with_the_real_usage(openai_server, routes):
    route = unique_route()
    routes({route: {"tokens_per_minute": 1000, "max_wait_s": 0}})
    # The estimate is small; the provider reports a call far larger than the whole budget.
    openai_server.queue(openai_completion("big", usage=openai_usage(prompt=5000, completion=10)))

    complete(route, CONVERSATION, [])
    with pytest.raises(ClientRateLimited) as caught:
        complete(route, CONVERSATION, [])

    assert "1000 tokens/min" in caught.value.message
    assert len(openai_server.requests) == 1


def test_calls_go_ahead_when_the_limiter_store_is_unreachable(openai_server, routes, settings):
    settings.REDIS_URL = "redis://127.0.0.1:9/0"
    route = unique_route()
    routes({route: {"requests_per_minute": 1, "max_wait_s": 0}})
    openai_server.queue(openai_completion("one"), openai_completion("two"))

    complete(route, CONVERSATION, [])
    response = complete(route, CONVERSATION, [])

    assert response.text == "two"


@needs_redis
def test_the_limit_is_shared_with_another_process_through_redis(openai_server, routes):
    route = unique_route()
    table = {route: {"requests_per_minute": 2, "max_wait_s": 0}}
    routes(table)
    openai_server.queue(openai_completion("a"), openai_completion("b"), openai_completion("c"))
    script = (
        "import django; django.setup()\n"
        "from gateway.services import complete\n"
        "from gateway.messages import Message\n"
        "for _ in range(2):\n"
        "    complete(None, [Message(role='user', content='hi')], [])\n"
    )
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "harness.settings.test",
        "HARNESS_MODEL": route,
        "HARNESS_ROUTES": __import__("json").dumps(table),
        "OPENAI_BASE_URL": openai_server.url,
        "OPENAI_API_KEY": "sk-test",
        "REDIS_URL": django_settings.REDIS_URL,
    }
    subprocess.run([sys.executable, "-c", script], env=env, cwd=REPO, check=True, timeout=60)

    with pytest.raises(ClientRateLimited):
        complete(route, CONVERSATION, [])

    assert len(openai_server.requests) == 2
