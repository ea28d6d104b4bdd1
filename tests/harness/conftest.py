"""Fixtures shared by the harness tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.fake_providers import FakeProvider


@pytest.fixture
def unpriced(settings: Any) -> Iterator[FakeProvider]:
    """The demo's route sent to a local OpenAI-compatible server under a model no price
    table knows: its calls have no price."""
    server = FakeProvider("openai")
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = server.url, "sk-test"
    settings.HARNESS_ROUTES = {"scripted:demo": {"provider": "openai", "model": "local-llm"}}
    yield server
    server.close()


@pytest.fixture
def console_admin(demo: None) -> Client:
    """The demo's superuser, signed in to the console."""
    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    return client
