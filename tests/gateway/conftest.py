"""Fixtures for the gateway: local provider servers wired into the settings."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gateway import ratelimit
from gateway.messages import Message, ToolSpec
from tests.fake_providers import FakeProvider

GET_TICKET = ToolSpec(
    name="get_ticket",
    description="Look a ticket up by its id.",
    parameters={
        "type": "object",
        "properties": {"ticket_id": {"type": "string"}},
        "required": ["ticket_id"],
    },
)
CONVERSATION = [
    Message(role="system", content="You are a support assistant."),
    Message(role="user", content="Why has ticket T-1 not been handled?"),
]


@pytest.fixture(autouse=True)
def _fresh_rate_limit_buckets() -> Iterator[None]:
    ratelimit._buckets_for.cache_clear()
    yield
    ratelimit._buckets_for.cache_clear()


@pytest.fixture
def openai_server(settings: Any) -> Iterator[FakeProvider]:
    server = FakeProvider("openai")
    settings.OPENAI_BASE_URL = server.url
    settings.OPENAI_API_KEY = "sk-test-openai"
    yield server
    server.close()


@pytest.fixture
def anthropic_server(settings: Any) -> Iterator[FakeProvider]:
    server = FakeProvider("anthropic")
    settings.ANTHROPIC_BASE_URL = server.url
    settings.ANTHROPIC_API_KEY = "sk-test-anthropic"
    yield server
    server.close()


@pytest.fixture
def routes(settings: Any):
    """Set ``HARNESS_ROUTES`` for this test: ``routes({"openai:m": {"stream": True}})``."""

    def configure(table: dict[str, dict[str, Any]]) -> None:
        settings.HARNESS_ROUTES = table

    configure({})
    return configure
