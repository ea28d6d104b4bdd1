"""An agent file may name a route by the alias HARNESS_ROUTES gives it (``cheap``), as
docs/agents-and-tools.md documents; an alias nobody configured stops start-up naming the file
and the alias."""

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from harness.models import Run
from tests.factories import write_agent

CHEAP = {"cheap": {"provider": "scripted", "model": "demo"}}


def test_an_agent_runs_on_a_route_named_by_its_alias(acme, agent_dir, settings):
    settings.HARNESS_ROUTES = CHEAP
    agent = write_agent(agent_dir, model="cheap", summary_model="cheap", tools=["get_ticket"])

    call_command("check")
    response = acme.post(
        "/api/v1/runs", {"agent": agent["name"], "user": "bob", "input": "T-20250318-007?"}
    )

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "succeeded"
    assert Run.objects.get(id=response.json()["id"]).model_route == "cheap"


def test_an_alias_nobody_configured_is_named_at_start_up(agent_dir, settings):
    settings.HARNESS_ROUTES = CHEAP
    write_agent(agent_dir, name="pricey", fallback_models=["scripted:demo", "premium"])

    with pytest.raises(SystemCheckError) as error:
        call_command("check")

    message = str(error.value)
    assert "pricey.json" in message
    assert "at $.fallback_models[1]: route 'premium' is neither provider:model nor a route" in (
        message
    )
    assert "aliases configured: cheap" in message


def test_a_route_name_with_spaces_is_refused_by_the_file_format(agent_dir):
    write_agent(agent_dir, name="spacey", model="not a route")

    with pytest.raises(SystemCheckError) as error:
        call_command("check")

    assert "spacey.json" in str(error.value)
    assert "at $.model" in str(error.value)
