"""The terminal client: events live, then the answer and the trace id."""

import io

import pytest
from django.core.management import CommandError, call_command

from harness.models import Run


def test_run_agent_shows_the_steps_and_ends_with_the_answer_and_trace_id(demo):
    out = io.StringIO()

    call_command(
        "run_agent",
        "Why has ticket T-20250318-007 not been handled?",
        tenant="acme",
        user="bob",
        agent="ticket-assistant",
        stdout=out,
    )

    text = out.getvalue()
    run = Run.objects.get()
    assert "step 1/8" in text
    assert '-> get_ticket {"ticket_id": "T-20250318-007"}' in text
    assert "ok update_ticket" in text
    assert "succeeded after 4 step(s)" in text
    assert run.answer in text
    assert f"trace: {run.request_id}" in text


def test_run_agent_names_an_unknown_agent(demo):
    with pytest.raises(CommandError, match="ticket-assistant"):
        call_command(
            "run_agent", "hi", tenant="acme", user="bob", agent="nope", stdout=io.StringIO()
        )
