"""Fixtures shared by the harness tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

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
